// paged_attention's decode kernel on 16-bit tensor cores: the plan's kMma with 8- or 16-row items
// (a decode step's token x group heads of one KV head, or any item of at most 16 packed rows) for
// head sizes 64 and 128. The tile kernel's numerics (attention_mma.cuh: q and the raw cache values
// exact in 16-bit operands, f32 logits scaled once, P rounded to 16 bits and l summing the
// rounded P, f32 partials for split items), with f16 operands for an FP8 cache whatever q's type
// (docs/numerics.md: a bf16 q row scaled by a power of two into f16's range, P rounded as P * 2^8),
// so that one cvt widens two cache values where bf16 took four instructions; built to stream the
// cache:
//
// - Items of at most 8 rows (the plan's for decode steps of G <= 8 group heads, kN8) swap the
//   operands: S^T = K Q^T with the tile's 16 keys as the mma's m and the 8 rows as its n, so one
//   m16n8k16 covers 16 keys where S = Q K^T (16 rows, half of them or more padding) took two; q
//   is the B operand, held in registers for the whole key loop (no ldmatrix a tile); the logits'
//   accumulators, rounded to P^, become the B operand of O^T = V^T P^T (m: 16 dims, k: the keys,
//   n: the rows) by one movmatrix transpose each of their two 8 x 8 halves, and the softmax's
//   maxima and sums reduce over the 8 lanes that share lane % 4. Half the tensor-core work and
//   half the accumulators (O^T: kD / 16 m-tiles): the FP8 instances fit 128 registers, 4 CTAs an
//   SM in 3 stages (16-row items: 149 registers, 3 CTAs in 4). Both forms load the same tiles
//   (the K units' A fragments of S^T are the B fragments of S = Q K^T, the value words' pairs of
//   keys the same).
// - No block-wide barrier in the key loop: each of the 4 warps walks its own tiles (warp w takes
//   tiles w, w + 4, ...) and issues the loads of the next ones before the math of the current one.
//   An FP8 cache's tiles go through shared memory: each lane copies its own operands of the mma
//   fragments into its column of the warp's stages (cp.async; up to 4 stages, as the shared
//   memory holds them) and reads back only those, so the copies need no barrier and hold no
//   registers while in flight. A 16-bit cache's tiles (half the keys for the same bytes, no
//   conversion) go straight into two register sets taken in turn (measured faster for them).
// - A tile that every row sees whole and whose blocks are all in the cache (all but the last of a
//   decode step) takes no mask; the readable keys of a tile come from its K loads, so a logit's
//   mask is a bit, not a block-table look-up.
// - The fragments are gathered with permutations that make every lane's loads 16-byte vectors:
//   the dot products' dimensions are permuted the same way in q and k (the sum does not depend on
//   the order of its terms beyond the tensor core's own f32 accumulation), and the output's
//   dimensions are permuted so that a lane's share of a value row is contiguous, which the
//   epilogue undoes (DecodeLayout).
// - The block table of the CTA's keys is read once into shared memory (in chunks of
//   kDecodeTableSlots blocks), so a key's address costs a multiply-high, a shift and a shared load
//   (BlockDivider), not a dependent global load and a 64-bit division; a tile inside one block
//   (all of a decode step's but its last, for block sizes that are multiples of 16) looks its
//   block up once and finds its keys a page stride apart. With 8-row items an FP8 cache's such
//   tile is copied from one row pointer a lane and cache, the zeros of a block outside the cache
//   by cp.async's ignore-src (issue_block_tile): 64 instructions from the block test to the last
//   of its 8 cp.async a lane where the key offsets took 204 (SASS of the loop), 125 registers.
// - What is uniform over the kernel or a tile is tested once, not a key or a logit: the FP8
//   format (a template argument), whether the item's rows 8-15 are padding (the key loop compiled
//   for each), the softcap (once a tile with an FP8 cache), the stage of a tile (counted, not
//   divided).
// At the end the 4 warps' softmax states merge through shared memory, as in the tile kernel.
// Floor: 2 * sum_r L_r * Hkv * D * (1 or 2) bytes over the bandwidth. Tests:
// tests/gpu/test_attention_cuda.cpp (every 8- and 16-row item of head size 64/128 runs here;
// AttentionCuda.DecodeEightRowItems* the GQA ratios, block sizes and masks of both forms).
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/attention/attention_mma.cuh"

namespace fp8kit::ops::attention_kernels::mma {

constexpr int kDecodeWarps = kAttentionMmaDecodeWarps;
constexpr int kDecodeTableSlots = kAttentionMmaDecodeTableSlots;

// Keys of one warp's tile: 16 (4 KiB of K and V at head size 128 for an FP8 cache, 8 KiB for a
// 16-bit one). FP8 tiles of 32 keys took more registers than 3 CTAs an SM allow; tiles of 16 in
// 4 stages keep as many bytes in flight. For 8-row items at 4 CTAs an SM, two stages of 32 keys
// a warp (64 KiB a CTA) are more than a quarter of the SM's shared memory.
template <bool kFp8>
constexpr int kDecodeWarpKeys = 16;

// The fragment layout. A 16-byte unit of a key row holds kUnit elements (16 FP8, 8 16-bit); lane
// (g, c) of the S = Q K^T mma loads, of key g of each 8-key n-tile, the units u at element
// u * 4 * kUnit + c * kUnit: element 4 t + j of its unit is slot j of k-step u * kUnit / 4 + t
// (slots 0, 1: b0's k = 2c, 2c + 1; slots 2, 3: b1's k = 2c + 8, 2c + 9).
template <int kD, bool kFp8>
struct DecodeLayout {
  static constexpr int kElem = kFp8 ? 1 : 2;               // bytes of a cache element
  static constexpr int kUnit = 16 / kElem;                 // elements of a 16-byte unit
  static constexpr int kKUnits = kD / (4 * kUnit);         // K units a lane loads of one key
  static constexpr int kVWords = kD / 8 * kElem / 4;       // 32-bit words a lane loads of one value row
  static constexpr int kWarpKeys = kDecodeWarpKeys<kFp8>;  // keys of a warp's tile
  static constexpr int kNt = kWarpKeys / 8;                // S n-tiles
  static constexpr int kPk = kWarpKeys / 16;               // P V k-steps
  static constexpr int kDt = kD / 8;                       // O n-tiles
  // A lane's share of a tile in 16-byte slots: its K units, then its value words, 4 a slot.
  static constexpr int kKSlots = kNt * kKUnits;
  static constexpr int kVSlots = kPk * 4 * kVWords / 4;
  static constexpr int kSlots = kKSlots + kVSlots;
  static_assert(kSlots * 16 * 32 == attention_mma_decode_stage_bytes(kD, kFp8 ? 1 : 2), "the stage's bytes");

  // The column of q's shared-memory row (the logical k of the mma) that holds physical dim d.
  __device__ static int q_column(int d) {
    const int u = d / (4 * kUnit), rem = d % (4 * kUnit);
    const int c = rem / kUnit, w = rem % kUnit, t = w / 4, j = w % 4;
    const int ks = u * (kUnit / 4) + t;
    return 16 * ks + 2 * c + (j % 2) + 8 * (j / 2);
  }
  // Value rows: lane (g, c) loads dims [g * kD / 8, (g + 1) * kD / 8) of its four keys, so O's
  // n-tile n, column x (of 8) is the physical dim x * kD / 8 + n.
};

// A warp's tile as each lane holds it: K units per n-tile, value words per k-step and key (2c,
// 2c + 1, 2c + 8, 2c + 9 of the step).
template <int kD, bool kFp8>
struct DecodeTile {
  using L = DecodeLayout<kD, kFp8>;
  uint4 k[L::kNt][L::kKUnits];
  uint32_t v[L::kPk][4][L::kVWords];
};

// The transpose of an 8 x 8 matrix of 16-bit values in the mma fragment layout (lane (g, c) holding
// row g, columns 2c and 2c + 1), in the same layout.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
#else
  return x;
#endif
}

// cp.async of 16 (8) bytes, zeros where `read` is false: the ignore-src predicate, which the
// instruction takes as it is, where a source size of 0 or 16 costs an address adjustment a copy.
__device__ __forceinline__ void cp_async16_or_zeros(void* dst, const void* src, bool read) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "{\n .reg .pred ignore;\n setp.eq.u32 ignore, %2, 0;\n"
      " cp.async.cg.shared.global [%0], [%1], 16, ignore;\n}\n" ::"r"(smem_addr(dst)),
      "l"(src), "r"(uint32_t(read))
      : "memory");
#endif
}
__device__ __forceinline__ void cp_async8_or_zeros(void* dst, const void* src, bool read) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "{\n .reg .pred ignore;\n setp.eq.u32 ignore, %2, 0;\n"
      " cp.async.ca.shared.global [%0], [%1], 8, ignore;\n}\n" ::"r"(smem_addr(dst)),
      "l"(src), "r"(uint32_t(read))
      : "memory");
#endif
}

// kE5m2: the FP8 cache's format, a template argument so that no widening branches on it. kN8: the
// items of at most 8 rows with the operands swapped (the header comment).
template <typename Tag, int kD, bool kFp8, bool kE5m2, bool kN8>
__global__ void __launch_bounds__(kThreads, !kFp8 ? kAttentionMmaCtasPerSm
                                           : kN8  ? kAttentionMmaDecodeN8Fp8CtasPerSm
                                                  : kAttentionMmaDecodeFp8CtasPerSm)
    paged_attention_mma_decode_kernel(const AttnParams p, bool q_vector, int stages) {
  constexpr bool e5m2 = kE5m2;
  using T = typename Tag::Storage;
  // The tensor cores' operand type: f16 for an FP8 cache (every e4m3 and e5m2 value is an f16
  // value, and one cvt widens two), the query's type for a 16-bit cache.
  using MmaTag = std::conditional_t<kFp8, F16, Tag>;
  // P rounded as P * 2^8 for an FP8 cache, so that f16 keeps 11 bits of every weight down to
  // 2^-22 (l and the accumulators carry the same factor, which the division cancels).
  constexpr int kPShift = kFp8 ? 8 : 0;
  using L = DecodeLayout<kD, kFp8>;
  using Tile = DecodeTile<kD, kFp8>;
  constexpr int kRowE = kD + 8;
  constexpr int kCtaKeys = kDecodeWarps * L::kWarpKeys;
  static_assert(kThreads == 32 * kDecodeWarps, "the decode kernel runs 4 warps");
  cuda::pdl_wait();
  cuda::pdl_allow_dependents();
  if (int(blockIdx.x) >= *p.item_count) return;

  extern __shared__ uint4 smem_raw[];
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem_raw);                  // [16][kRowE]
  int* table_s = reinterpret_cast<int*>(q_s + 16 * kRowE);                // [kDecodeTableSlots]
  int* q_exp_s = table_s + kDecodeTableSlots;                             // [16]
  constexpr int kShare = kD / 8 + 4, kMergeRow = 8 * kShare + 1;  // attention_mma_decode_merge_row
  // The key loop's stages (FP8), then the merge buffer over them.
  uint4* region = reinterpret_cast<uint4*>(q_exp_s + 16);
  float* merge_acc = reinterpret_cast<float*>(region);          // [4][16][kMergeRow]
  float* merge_ml = merge_acc + kDecodeWarps * 16 * kMergeRow;  // [4][16][2]

  const Item it = resolve_item(p, p.items[blockIdx.x]);
  const int64_t kvh = blockIdx.y;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, c = lane % 4;
  // The lane's two rows of the item: g and g + 8 of the 16 (the accumulators of S = Q K^T), or with
  // kN8 2c and 2c + 1 of the 8 (those of S^T = K Q^T).
  auto lane_row = [&](int h) { return kN8 ? 2 * c + h : g + 8 * h; };

  // Q rows -> shared memory, each physical dim at its mma column (zeros past the item's rows). A
  // row's kD / 8 chunks of 8 are on kD / 8 consecutive lanes (16 * kD / 8 chunks, a whole number of
  // passes of the block), which agree on the row's exponent for an FP8 cache.
  static_assert(16 * (kD / 8) % kThreads == 0 && kD / 8 <= 32, "a row's chunks on consecutive lanes of one warp");
  for (int i = tid; i < 16 * (kD / 8); i += kThreads) {
    const int r = i / (kD / 8), d0 = (i % (kD / 8)) * 8;
    uint16_t e[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (r < it.rows) {
      const int64_t packed = it.row0 + r;
      const int64_t t = it.q_start + packed / p.group, h = kvh * p.group + packed % p.group;
      const T* src = static_cast<const T*>(p.q) + t * p.q_token_stride + h * p.q_head_stride + d0;
      if (q_vector) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(src));
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) e[2 * k] = uint16_t(w[k]), e[2 * k + 1] = uint16_t(w[k] >> 16);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) e[k] = src[k].bits;
      }
    }
    if constexpr (kFp8 && Tag::kIsBf16) {
      const int q_exp = bf16_chunk_to_f16_operands<kD / 8>(e);
      if (i % (kD / 8) == 0) q_exp_s[r] = q_exp;
    } else if (i % (kD / 8) == 0) {
      q_exp_s[r] = 0;  // f16 queries are f16 operands as they are
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) q_s[r * kRowE + L::q_column(d0 + k)] = e[k];
  }

  // The keys each of the lane's two rows sees. Padding rows (past the item's) see every key: their
  // q is zero and their output is never written, and so a tile every real row sees whole needs
  // no mask. As 32-bit key indices, which a chunk's keys are (clamped: -1 <= last, first <=
  // INT32_MAX).
  int seen_first[2], seen_last[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = lane_row(h);
    const KeyRange k = r < it.rows ? visible_keys(p, it, row_position(p, it, r)) : KeyRange{0, INT64_MAX};
    seen_first[h] = int(k.first < INT32_MAX ? k.first : INT32_MAX);
    seen_last[h] = int(k.last < INT32_MAX ? (k.last < -1 ? -1 : k.last) : INT32_MAX);
  }
  const KeyRange keys = split_keys(item_keys(p, it), blockIdx.z, p.splits, kCtaKeys);
  const float k_scale = kFp8 ? __ldg(p.kv_scale[0] + kvh * p.kv_scale_stride) : 1.0f;
  const float v_scale = kFp8 ? __ldg(p.kv_scale[1] + kvh * p.kv_scale_stride) : 1.0f;
  // The logit scales of the lane's rows, times 2^-e for their q exponents: raw * 2^e * (scale *
  // 2^-e) rounds exactly as raw * scale.
  __syncthreads();  // q_s, q_exp_s
  float logit_scale[2], base2_scale[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float ls = __fmul_rn(p.scale, k_scale);
    const int q_exp = q_exp_s[lane_row(h)];
    logit_scale[h] = times_pow2(ls, -q_exp);
    base2_scale[h] = times_pow2(__fmul_rn(ls, kLog2e), -q_exp);
  }
  // kN8: q as the B operand of S^T = K Q^T (k: the logical dims, n: the 8 rows), held in registers
  // for the whole key loop: b0 of k-step ks pairs columns 16 ks + 2c, + 1 of row g, b1 + 8, + 9.
  uint32_t qb[kD / 16][2];
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) {
    qb[ks][0] = kN8 ? *reinterpret_cast<const uint32_t*>(q_s + g * kRowE + 16 * ks + 2 * c) : 0u;
    qb[ks][1] = kN8 ? *reinterpret_cast<const uint32_t*>(q_s + g * kRowE + 16 * ks + 2 * c + 8) : 0u;
  }

  const BlockDivider div(p.block_size);
  const int bs = div.bs;
  const uint8_t* base[2];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    base[w] = static_cast<const uint8_t*>(p.cache[w]) + kvh * p.head_stride[w] * L::kElem;
  }
  // The strides in bytes, read from the parameters where they are used (no registers held).
  auto block_bytes = [&](int which) { return p.block_stride[which] * L::kElem; };
  auto page_bytes = [&](int which) { return p.page_stride[which] * L::kElem; };
  // Byte offset of the row of slot `slot` of cache block `block` from its KV head's base.
  auto row_offset = [&](int which, int block, int64_t slot) -> int64_t {
    return int64_t(block) * block_bytes(which) + slot * page_bytes(which);
  };
  int chunk_block0 = 0, chunk_last = -1;
  // Byte offset of key j's row in cache `which`, or -1 when it is not readable (past the chunk,
  // or its block outside the cache).
  auto key_offset = [&](int which, int j) -> int64_t {
    if (j > chunk_last) return -1;
    const int block = table_s[div.block(j) - chunk_block0];
    if (block < 0) return -1;
    return row_offset(which, block, div.slot(j));
  };
  // Calls visit(offset), offset(which, i) being key tile0 + i's key_offset. A tile inside one
  // block of the chunk (every tile of a decode step but its last, for block sizes that are
  // multiples of the tile's 16 keys) takes one look-up of the block table, its keys' rows a page
  // stride apart; the others look up each key's block.
  auto with_offsets = [&](int tile0, auto&& visit) {
    const int tile_last = tile0 + L::kWarpKeys - 1;
    const int b0 = div.block(tile0);
    if (tile_last <= chunk_last && div.block(tile_last) == b0) {  // the same in every lane
      const int block = table_s[b0 - chunk_block0];
      const int64_t s0 = tile0 - b0 * bs;
      visit([&](int which, int i) -> int64_t {
        return block < 0 ? int64_t(-1) : row_offset(which, block, s0 + i);
      });
    } else {
      visit([&](int which, int i) -> int64_t { return key_offset(which, tile0 + i); });
    }
  };
  // Visits the lane's K units of a tile (copy(nt, u, at): unit u of key tile0 + nt * 8 + g at byte
  // `at`, -1 where not readable) and returns which of the tile's keys are readable (bit i: key
  // tile0 + i, the same in every lane); then its value rows (copy(kk, q, at): slot q of k-step kk).
  auto visit_k = [&](auto&& offset, auto&& copy) -> uint32_t {
    uint32_t readable = 0;
#pragma unroll
    for (int nt = 0; nt < L::kNt; ++nt) {
      const int64_t at = offset(0, nt * 8 + g);
      readable |= uint32_t(at >= 0) << (nt * 8 + g);
#pragma unroll
      for (int u = 0; u < L::kKUnits; ++u) copy(nt, u, at);
    }
    return __reduce_or_sync(0xffffffffu, readable);
  };
  auto visit_v = [&](auto&& offset, auto&& copy) {
#pragma unroll
    for (int kk = 0; kk < L::kPk; ++kk) {
#pragma unroll
      for (int q = 0; q < 4; ++q) copy(kk, q, offset(1, 16 * kk + 2 * c + (q & 1) + 8 * (q >> 1)));
    }
  };

  // 16-bit cache: a tile straight into registers.
  auto load_tile = [&](Tile& t, int tile0) -> uint32_t {
    uint32_t readable = 0;
    with_offsets(tile0, [&](auto&& offset) {
      readable = visit_k(offset, [&](int nt, int u, int64_t at) {
        t.k[nt][u] = at >= 0 ? __ldg(reinterpret_cast<const uint4*>(base[0] + at + (u * 4 + c) * 16)) : make_uint4(0, 0, 0, 0);
      });
      visit_v(offset, [&](int kk, int q, int64_t at) {
        const uint8_t* src = base[1] + at + g * (L::kVWords * 4);
#pragma unroll
        for (int x = 0; x < L::kVWords / 4; ++x) {
          const uint4 w = at >= 0 ? __ldg(reinterpret_cast<const uint4*>(src) + x) : make_uint4(0, 0, 0, 0);
          t.v[kk][q][4 * x] = w.x, t.v[kk][q][4 * x + 1] = w.y;
          t.v[kk][q][4 * x + 2] = w.z, t.v[kk][q][4 * x + 3] = w.w;
        }
      });
    });
    return readable;
  };

  // FP8 cache: the tiles in flight in shared memory. Each lane copies its own operands (cp.async,
  // zeros for keys it cannot read) into its column of the warp's stage and reads back only those,
  // so no barrier orders them; the column's layout ([slot][lane] of 16 bytes) keeps both free of
  // bank conflicts. With each lane's copy of which keys of the stage's tile are readable.
  uint4* stages_s = region + warp * stages * L::kSlots * 32;  // [stage][slot][lane]
  uint32_t* readable_s = reinterpret_cast<uint32_t*>(region + kDecodeWarps * stages * L::kSlots * 32) + warp * stages * 32;
  auto slot = [&](int stage, int i) { return stages_s + (stage * L::kSlots + i) * 32 + lane; };
  // kN8: a tile inside one block of the chunk (with_offsets' first case) copied from one row
  // pointer a lane and cache (its first key's), the lane's other keys' rows at multiples of the
  // page stride from it: the same bytes into the same slots as visit_k's and visit_v's copies, for
  // two 64-bit products a cache and tile in place of a key offset and a select a copy, and the
  // tile's readable keys (all or none: its one block) without a warp reduction.
  auto issue_block_tile = [&](int stage, int tile0, int b0) {
    const int block = table_s[b0 - chunk_block0];
    const bool ok = block >= 0;  // the same in every lane
    const int s0 = tile0 - b0 * bs;
    // Not readable: every copy zeros, from the cache's base as visit_k's and visit_v's.
    const int64_t pk = ok ? page_bytes(0) : 0, pv = ok ? page_bytes(1) : 0;
    const int64_t k_off = int64_t(uint32_t(block)) * block_bytes(0) + int64_t(uint32_t(s0 + g)) * pk + uint32_t(c * 16);
    const int64_t v_off =
        int64_t(uint32_t(block)) * block_bytes(1) + int64_t(uint32_t(s0 + 2 * c)) * pv + uint32_t(g * (L::kVWords * 4));
    const uint8_t* kp = base[0] + (ok ? k_off : 0);
    const uint8_t* vp = base[1] + (ok ? v_off : 0);
    constexpr uint32_t kAllKeys = L::kWarpKeys == 32 ? 0xffffffffu : (1u << L::kWarpKeys) - 1u;
    readable_s[stage * 32 + lane] = ok ? kAllKeys : 0u;
#pragma unroll
    for (int nt = 0; nt < L::kNt; ++nt) {
      const uint8_t* row = kp + (nt * 8) * pk;  // key tile0 + nt * 8 + g
#pragma unroll
      for (int u = 0; u < L::kKUnits; ++u) cp_async16_or_zeros(slot(stage, nt * L::kKUnits + u), row + u * 64, ok);
    }
#pragma unroll
    for (int kk = 0; kk < L::kPk; ++kk) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint8_t* src = vp + (16 * kk + (q & 1) + 8 * (q >> 1)) * pv;  // key tile0 + 16 kk + 2c + ...
        const int word0 = (kk * 4 + q) * L::kVWords;
        if constexpr (L::kVWords == 2) {
          cp_async8_or_zeros(reinterpret_cast<uint2*>(slot(stage, L::kKSlots + word0 / 4)) + (word0 % 4) / 2, src, ok);
        } else {
#pragma unroll
          for (int x = 0; x < L::kVWords / 4; ++x) {
            cp_async16_or_zeros(slot(stage, L::kKSlots + word0 / 4 + x), src + 16 * x, ok);
          }
        }
      }
    }
  };
  auto issue_tile = [&](int stage, int tile0) {
    if constexpr (kN8) {
      const int b0 = div.block(tile0);
      if (tile0 + L::kWarpKeys - 1 <= chunk_last && div.block(tile0 + L::kWarpKeys - 1) == b0) {
        issue_block_tile(stage, tile0, b0);
        return;
      }
    }
    with_offsets(tile0, [&](auto&& offset) {
      readable_s[stage * 32 + lane] = visit_k(offset, [&](int nt, int u, int64_t at) {
        cp_async16(slot(stage, nt * L::kKUnits + u), at >= 0 ? base[0] + at + (u * 4 + c) * 16 : base[0], at >= 0 ? 16 : 0);
      });
      visit_v(offset, [&](int kk, int q, int64_t at) {
        const uint8_t* src = at >= 0 ? base[1] + at + g * (L::kVWords * 4) : base[1];
        const int word0 = (kk * 4 + q) * L::kVWords;  // of the lane's value words, 4 a slot
        if constexpr (L::kVWords == 2) {
          cp_async8(reinterpret_cast<uint2*>(slot(stage, L::kKSlots + word0 / 4)) + (word0 % 4) / 2, src, at >= 0 ? 8 : 0);
        } else {
#pragma unroll
          for (int x = 0; x < L::kVWords / 4; ++x) {
            cp_async16(slot(stage, L::kKSlots + word0 / 4 + x), src + 16 * x, at >= 0 ? 16 : 0);
          }
        }
      });
    });
  };
  auto fetch_tile = [&](Tile& t, int stage) -> uint32_t {
#pragma unroll
    for (int nt = 0; nt < L::kNt; ++nt) {
#pragma unroll
      for (int u = 0; u < L::kKUnits; ++u) t.k[nt][u] = *slot(stage, nt * L::kKUnits + u);
    }
#pragma unroll
    for (int i = 0; i < L::kVSlots; ++i) {
      const uint4 w = *slot(stage, L::kKSlots + i);
      const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int word = 4 * i + x;
        t.v[word / (4 * L::kVWords)][(word / L::kVWords) % 4][word % L::kVWords] = words[x];
      }
    }
    return readable_s[stage * 32 + lane];
  };

  // O (16 rows x the dims: kD / 8 n-tiles), or with kN8 O^T (the dims x 8 rows: kD / 16 m-tiles).
  constexpr int kAccTiles = kN8 ? kD / 16 : L::kDt;
  float acc[kAccTiles][4];
#pragma unroll
  for (int n = 0; n < kAccTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};
  // The keys every row of the lane sees: a tile inside them is seen whole.
  const int all_first = max(seen_first[0], seen_first[1]), all_last = min(seen_last[0], seen_last[1]);
  const bool softcap = p.softcap > 0.0f;

  // One tile's logits, softmax and P V. lower_only (an item of at most 8 rows, a GQA decode step
  // of group 8 or less) leaves the lane's second row to padding: its logits and softmax are
  // skipped (softmax_tile). It is a template argument of the loop's code, so that no logit
  // tests it.
  auto consume = [&](const Tile& t, uint32_t readable, int tile0, auto lower_only_c) {
    constexpr bool lower_only = decltype(lower_only_c)::value;
    // S = Q K^T: 16 rows x the warp's keys.
    float s[L::kNt][4];
#pragma unroll
    for (int n = 0; n < L::kNt; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, smem_addr(q_s + (lane % 16) * kRowE + ks * 16 + (lane / 16) * 8));
      constexpr int kStepsPerUnit = L::kUnit / 4;
      const int u = ks / kStepsPerUnit, w = ks % kStepsPerUnit;
#pragma unroll
      for (int n = 0; n < L::kNt; ++n) {
        const uint4 unit = t.k[n][u];
        const uint32_t words[4] = {unit.x, unit.y, unit.z, unit.w};
        uint32_t b0, b1;
        if constexpr (kFp8) {
          b0 = widen_fp8x2<MmaTag>(words[w], e5m2);
          b1 = widen_fp8x2_high<MmaTag>(words[w], e5m2);
        } else {
          b0 = words[2 * w];
          b1 = words[2 * w + 1];
        }
        mma16816<MmaTag>(s[n], a, b0, b1);
      }
    }
    // Logits (base 2), masked unless every key of the tile is readable and seen by every row
    // (the tiles of a decode step but its last).
    constexpr uint32_t kAllKeys = L::kWarpKeys == 32 ? 0xffffffffu : (1u << L::kWarpKeys) - 1u;
    const int tile_last = tile0 + L::kWarpKeys - 1;
    const bool whole = __all_sync(0xffffffffu, readable == kAllKeys && tile0 >= all_first && tile_last <= all_last);
    float tile_max[2] = {kNegInf, kNegInf};
    auto logits = [&](auto whole_c, auto cap_c) {
#pragma unroll
      for (int n = 0; n < L::kNt; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2, i = n * 8 + 2 * c + (e % 2), j = tile0 + i;
          if (h == 1 && lower_only) break;
          bool ok = true;
          if constexpr (!decltype(whole_c)::value) {
            ok = ((readable >> i) & 1u) != 0 && j >= seen_first[h] && j <= seen_last[h];
          }
          float x;  // masked_logit's value
          if constexpr (std::is_same_v<decltype(cap_c), std::true_type>) {
            x = __fmul_rn(capped(__fmul_rn(s[n][e], logit_scale[h]), p.softcap), kLog2e);
          } else if constexpr (std::is_same_v<decltype(cap_c), std::false_type>) {
            x = __fmul_rn(s[n][e], base2_scale[h]);
          } else {
            x = masked_logit(s[n][e], true, p.softcap, logit_scale[h], base2_scale[h]);
          }
          s[n][e] = ok ? x : kNegInf;
          tile_max[h] = fmax_nan(tile_max[h], s[n][e]);
        }
      }
    };
    // The softcap's test once a tile with an FP8 cache; a 16-bit cache's kernel, short of
    // registers, spills with the capped logits' code twice, and tests it a logit.
    if constexpr (kFp8) {
      if (softcap) {
        whole ? logits(std::true_type{}, std::true_type{}) : logits(std::false_type{}, std::true_type{});
      } else {
        whole ? logits(std::true_type{}, std::false_type{}) : logits(std::false_type{}, std::false_type{});
      }
    } else {
      whole ? logits(std::true_type{}, 0) : logits(std::false_type{}, 0);
    }
    uint32_t pa[L::kNt][2];
    softmax_tile<MmaTag, kPShift>(s, tile_max, m, l, acc, pa, lower_only);
    // O += P^ V: b0 of n-tile n pairs keys 2c, 2c + 1 of dim n of the lane's share, b1 keys
    // 2c + 8, 2c + 9.
#pragma unroll
    for (int kk = 0; kk < L::kPk; ++kk) {
      const uint32_t a[4] = {pa[2 * kk][0], pa[2 * kk][1], pa[2 * kk + 1][0], pa[2 * kk + 1][1]};
#pragma unroll
      for (int n = 0; n < L::kDt; n += 2) {
        uint32_t b[2][2];  // [n, n + 1][b0, b1]
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
          const uint32_t* k0 = t.v[kk][2 * pair];
          const uint32_t* k1 = t.v[kk][2 * pair + 1];
          if constexpr (kFp8) {
            const int word = n / 4, sel = (n % 4) == 0 ? 0x5140 : 0x7362;
            const uint32_t both = __byte_perm(k0[word], k1[word], sel);  // dims n, n + 1 of both keys
            b[0][pair] = widen_fp8x2<MmaTag>(both, e5m2);
            b[1][pair] = widen_fp8x2_high<MmaTag>(both, e5m2);
          } else {
            const int word = n / 2;
            b[0][pair] = __byte_perm(k0[word], k1[word], 0x5410);
            b[1][pair] = __byte_perm(k0[word], k1[word], 0x7632);
          }
        }
        mma16816<MmaTag>(acc[n], a, b[0][0], b[0][1]);
        mma16816<MmaTag>(acc[n + 1], a, b[1][0], b[1][1]);
      }
    }
  };

  // kN8: one tile with the operands swapped. S^T = K Q^T (m: the tile's 16 keys, n: the 8 rows)
  // takes the K units as A fragments (a0, a2: key g, the low and high pair of a word; a1, a3: key
  // g + 8), one mma a k-step where S = Q K^T took two; lane (g, c) then holds the logits of keys g
  // and g + 8 for rows 2c and 2c + 1, and a row's softmax reduces over the 8 lanes of its c. P^T,
  // rounded into two 8 x 8 matrices (keys 0-7 and 8-15), is transposed by movmatrix into the B
  // fragments of O^T = V^T P^T (m: 16 dims, k: the keys, n: the rows), whose A fragments pair
  // keys 2c, 2c + 1 (a0, a1) and 2c + 8, 2c + 9 (a2, a3) of one dim: m-tile mt, row g of the
  // lane's value share is its dim 2 mt, row g + 8 its dim 2 mt + 1.
  auto consume_n8 = [&](const Tile& t, uint32_t readable, int tile0) {
    float s2[2][4];  // even and odd k-steps: two accumulation chains
#pragma unroll
    for (int x = 0; x < 2; ++x) s2[x][0] = s2[x][1] = s2[x][2] = s2[x][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      constexpr int kStepsPerUnit = L::kUnit / 4;
      const int u = ks / kStepsPerUnit, w = ks % kStepsPerUnit;
      const uint4 k0 = t.k[0][u], k1 = t.k[1][u];  // keys g, g + 8
      const uint32_t w0[4] = {k0.x, k0.y, k0.z, k0.w}, w1[4] = {k1.x, k1.y, k1.z, k1.w};
      uint32_t a[4];
      if constexpr (kFp8) {
        a[0] = widen_fp8x2<MmaTag>(w0[w], e5m2);
        a[1] = widen_fp8x2<MmaTag>(w1[w], e5m2);
        a[2] = widen_fp8x2_high<MmaTag>(w0[w], e5m2);
        a[3] = widen_fp8x2_high<MmaTag>(w1[w], e5m2);
      } else {
        a[0] = w0[2 * w], a[1] = w1[2 * w], a[2] = w0[2 * w + 1], a[3] = w1[2 * w + 1];
      }
      mma16816<MmaTag>(s2[ks % 2], a, qb[ks][0], qb[ks][1]);
    }
    // s[e]: key g + 8 (e / 2), row 2c + e % 2.
    float s[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) s[e] = __fadd_rn(s2[0][e], s2[1][e]);
    constexpr uint32_t kAllKeys = (1u << L::kWarpKeys) - 1u;
    const int tile_last = tile0 + L::kWarpKeys - 1;
    const bool whole = __all_sync(0xffffffffu, readable == kAllKeys && tile0 >= all_first && tile_last <= all_last);
    float tile_max[2] = {kNegInf, kNegInf};
    auto logits = [&](auto whole_c, auto cap_c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e % 2, i = g + 8 * (e / 2), j = tile0 + i;
        bool ok = true;
        if constexpr (!decltype(whole_c)::value) {
          ok = ((readable >> i) & 1u) != 0 && j >= seen_first[h] && j <= seen_last[h];
        }
        float x;
        if constexpr (decltype(cap_c)::value) {
          x = __fmul_rn(capped(__fmul_rn(s[e], logit_scale[h]), p.softcap), kLog2e);
        } else {
          x = __fmul_rn(s[e], base2_scale[h]);
        }
        s[e] = ok ? x : kNegInf;
        tile_max[h] = fmax_nan(tile_max[h], s[e]);
      }
    };
    if (softcap) {
      whole ? logits(std::true_type{}, std::true_type{}) : logits(std::false_type{}, std::true_type{});
    } else {
      whole ? logits(std::true_type{}, std::false_type{}) : logits(std::false_type{}, std::false_type{});
    }
    // The online softmax of the lane's rows (softmax_tile's steps, the maxima over the 8 lanes of
    // the lane's c).
    float corr[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int x = 4; x < 32; x *= 2) tile_max[h] = fmax_nan(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], x));
      const float m_new = fmax_nan(m[h], tile_max[h]);
      corr[h] = m_new == kNegInf ? 1.0f : fast_exp2(m[h] - m_new);
      m[h] = m_new;
      l[h] = __fmul_rn(l[h], corr[h]);
    }
    if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
      for (int n = 0; n < kAccTiles; ++n) {
        acc[n][0] = __fmul_rn(acc[n][0], corr[0]), acc[n][1] = __fmul_rn(acc[n][1], corr[1]);
        acc[n][2] = __fmul_rn(acc[n][2], corr[0]), acc[n][3] = __fmul_rn(acc[n][3], corr[1]);
      }
    }
    float m_shifted[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) m_shifted[h] = m[h] == kNegInf ? 0.0f : __fsub_rn(m[h], float(kPShift));
    uint32_t pt[2];  // P^ of keys g (pt[0]) and g + 8 (pt[1]), rows 2c, 2c + 1
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const float p0 = fast_exp2(__fsub_rn(s[2 * x], m_shifted[0]));
      const float p1 = fast_exp2(__fsub_rn(s[2 * x + 1], m_shifted[1]));
      pt[x] = pack2<MmaTag>(p0, p1);
      const float2 r = unpack2<MmaTag>(pt[x]);
      l[0] = __fadd_rn(l[0], r.x);
      l[1] = __fadd_rn(l[1], r.y);
    }
    const uint32_t b0 = movmatrix_trans(pt[0]), b1 = movmatrix_trans(pt[1]);  // keys 2c, 2c + 1 / + 8, + 9 of row g
    // O^T += V^T P^T.
    const uint32_t* v0 = t.v[0][0];  // keys 2c, 2c + 1, 2c + 8, 2c + 9
    const uint32_t* v1 = t.v[0][1];
    const uint32_t* v2 = t.v[0][2];
    const uint32_t* v3 = t.v[0][3];
#pragma unroll
    for (int mt = 0; mt < kAccTiles; ++mt) {
      uint32_t a[4];
      if constexpr (kFp8) {
        const int word = mt / 2, sel = mt % 2 == 0 ? 0x5140 : 0x7362;
        const uint32_t lo = __byte_perm(v0[word], v1[word], sel);  // dims 2 mt, 2 mt + 1 of keys 2c, 2c + 1
        const uint32_t hi = __byte_perm(v2[word], v3[word], sel);
        a[0] = widen_fp8x2<MmaTag>(lo, e5m2);
        a[1] = widen_fp8x2_high<MmaTag>(lo, e5m2);
        a[2] = widen_fp8x2<MmaTag>(hi, e5m2);
        a[3] = widen_fp8x2_high<MmaTag>(hi, e5m2);
      } else {
        a[0] = __byte_perm(v0[mt], v1[mt], 0x5410);
        a[1] = __byte_perm(v0[mt], v1[mt], 0x7632);
        a[2] = __byte_perm(v2[mt], v3[mt], 0x5410);
        a[3] = __byte_perm(v2[mt], v3[mt], 0x7632);
      }
      mma16816<MmaTag>(acc[mt], a, b0, b1);
    }
  };
  auto consume_tile = [&](const Tile& t, uint32_t readable, int tile0, auto lower_only_c) {
    if constexpr (kN8) {
      consume_n8(t, readable, tile0);
    } else {
      consume(t, readable, tile0, lower_only_c);
    }
  };

  // The keys in chunks of at most kDecodeTableSlots blocks (a whole number of CTA tiles).
  const int64_t chunk_keys_raw = int64_t(kDecodeTableSlots - 1) * bs;
  const int chunk_keys = int(chunk_keys_raw >= (int64_t(1) << 30) ? (int64_t(1) << 30)
                                                                   : chunk_keys_raw / kCtaKeys * kCtaKeys);
  auto key_loop = [&](auto lower_only_c) {
    for (int64_t chunk0 = keys.first; chunk0 <= keys.last; chunk0 += chunk_keys) {
      chunk_last = int(chunk0 + chunk_keys - 1 < keys.last ? chunk0 + chunk_keys - 1 : keys.last);
      chunk_block0 = int(chunk0) / bs;
      const int blocks = chunk_last / bs - chunk_block0 + 1;
      __syncthreads();  // the previous chunk's table is no longer read
      for (int i = tid; i < blocks; i += kThreads) {
        const int64_t block = __ldg(it.table + chunk_block0 + i);
        table_s[i] = block >= 0 && block < p.num_blocks ? int(block) : -1;
      }
      __syncthreads();
      // The warp's tiles of the chunk: warp w takes tiles w, w + 4, ...
      const int first = int(chunk0) + warp * L::kWarpKeys;
      const int tiles = first > chunk_last ? 0 : (chunk_last - first) / kCtaKeys + 1;
      if constexpr (kFp8) {
        // stages - 1 tiles in flight beside the one computed; tile i in stage i % stages, counted
        // without a division.
        for (int i = 0; i < stages - 1; ++i) {
          if (i < tiles) issue_tile(i, first + i * kCtaKeys);
          cp_async_commit();
        }
        int stage = 0;  // i % stages
        for (int i = 0; i < tiles; ++i) {
          const int ahead = i + stages - 1;
          if (ahead < tiles) issue_tile(stage == 0 ? stages - 1 : stage - 1, first + ahead * kCtaKeys);
          cp_async_commit();
          if (stages == 4) {  // tile i has landed
            cp_async_wait_group<3>();
          } else if (stages == 3) {
            cp_async_wait_group<2>();
          } else {
            cp_async_wait_group<1>();
          }
          Tile t;
          const uint32_t readable = fetch_tile(t, stage);
          consume_tile(t, readable, first + i * kCtaKeys, lower_only_c);
          stage = stage + 1 == stages ? 0 : stage + 1;
        }
      } else {
        // Two tiles in flight, in two register sets taken in turn (a copy of 64 registers a tile
        // otherwise).
        Tile even, odd;
        uint32_t readable_even = 0, readable_odd = 0;
        if (tiles > 0) readable_even = load_tile(even, first);
        for (int i = 0; i < tiles; i += 2) {
          if (i + 1 < tiles) readable_odd = load_tile(odd, first + (i + 1) * kCtaKeys);
          consume_tile(even, readable_even, first + i * kCtaKeys, lower_only_c);
          if (i + 1 >= tiles) break;
          if (i + 2 < tiles) readable_even = load_tile(even, first + (i + 2) * kCtaKeys);
          consume_tile(odd, readable_odd, first + (i + 1) * kCtaKeys, lower_only_c);
        }
      }
    }
  };
  if (kN8 || it.rows <= 8) {  // kN8: the plan's items have at most 8 rows
    key_loop(std::true_type{});
  } else {
    key_loop(std::false_type{});
  }
  if constexpr (kFp8) cp_async_wait_all();
  __syncthreads();  // the merge buffer below reuses the stages of other warps

  // Row sums over the lanes of a row (4, or with kN8 the 8 of its c), then the 4 warps' states
  // merged.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int x = kN8 ? 4 : 1; x < (kN8 ? 32 : 4); x *= 2) l[h] = __fadd_rn(l[h], __shfl_xor_sync(0xffffffffu, l[h], x));
  }
  if constexpr (kN8) {
#pragma unroll
    for (int mt = 0; mt < kAccTiles; ++mt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // Row 2c + e % 2, physical dim g * kD / 8 + 2 mt + e / 2 at share g, offset 2 mt + e / 2.
        merge_acc[(warp * 16 + 2 * c + (e % 2)) * kMergeRow + g * kShare + 2 * mt + e / 2] = acc[mt][e];
      }
    }
  } else {
#pragma unroll
    for (int n = 0; n < L::kDt; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // Physical dim (2c + e % 2) * kD / 8 + n (DecodeLayout) at share 2c + e % 2, offset n.
        merge_acc[(warp * 16 + g + 8 * (e / 2)) * kMergeRow + (2 * c + (e % 2)) * kShare + n] = acc[n][e];
      }
    }
  }
  if (kN8 ? g == 0 : c == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      merge_ml[(warp * 16 + lane_row(h)) * 2] = m[h];
      merge_ml[(warp * 16 + lane_row(h)) * 2 + 1] = l[h];
    }
  }
  __syncthreads();
  constexpr int kItemRows = kN8 ? 8 : 16;
  for (int i = tid; i < kItemRows * kD; i += kThreads) {
    const int r = i / kD, d = i % kD;
    if (r >= it.rows) continue;
    const MergedRow mg = merge_four_warps(merge_ml, r);
    float a = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      if (mg.seen[w]) {
        a = __fadd_rn(a, __fmul_rn(merge_acc[(w * 16 + r) * kMergeRow + (d / (kD / 8)) * kShare + d % (kD / 8)], mg.f[w]));
      }
    }
    emit_output<T, kD>(p, out_row(p, it, r, kvh), d, mg.m, mg.l, a, v_scale);
  }
}

template <typename Tag, int kD, bool kFp8, bool kE5m2, bool kN8>
void launch_decode_kernel(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream) {
  constexpr auto kernel = paged_attention_mma_decode_kernel<Tag, kD, kFp8, kE5m2, kN8>;
  static_assert(attention_mma_decode_merge_row(kD) == 8 * (kD / 8 + 4) + 1, "the kernel's merge row");
  // The plan's stages (2 to 4 for an FP8 cache; anything else takes the fewest).
  const int stages = !kFp8 ? 0
                     : l.decode_stages >= kAttentionMmaDecodeMinStages && l.decode_stages <= kAttentionMmaDecodeMaxStages
                         ? l.decode_stages
                         : kAttentionMmaDecodeMinStages;
  const size_t smem = attention_mma_decode_shared_bytes(kD, kFp8, stages);
  cuda::allow_dynamic_smem<kernel>(int(smem));
  const dim3 grid(unsigned(l.items_bound), unsigned(p.num_kv_heads), unsigned(p.splits));
  cuda::launch_pdl(kernel, grid, kThreads, smem, stream, p, l.q_vector, stages);
  FP8KIT_CHECK_LAUNCH(stream, "paged_attention_mma_decode_kernel");
}

// Items of at most kAttentionMmaDecodeN8Rows rows (the plan's) take the swapped operands.
template <typename Tag, int kD, bool kFp8>
void launch_decode_instance(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream) {
  const bool n8 = p.rows_per_item <= kAttentionMmaDecodeN8Rows;
  if constexpr (kFp8) {
    if (l.cache_dtype == KvCacheDtype::kFp8E5M2) {
      return n8 ? launch_decode_kernel<Tag, kD, true, true, true>(p, l, stream)
                : launch_decode_kernel<Tag, kD, true, true, false>(p, l, stream);
    }
  }
  n8 ? launch_decode_kernel<Tag, kD, kFp8, false, true>(p, l, stream)
     : launch_decode_kernel<Tag, kD, kFp8, false, false>(p, l, stream);
}

}  // namespace fp8kit::ops::attention_kernels::mma
