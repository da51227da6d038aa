// paged_attention's decode kernel on 16-bit tensor cores: the plan's kMma with 16-row items (a
// decode step's token x group heads of one KV head, or any item of at most 16 packed rows) for
// head sizes 64 and 128. Same numerics as the tile kernel (attention_mma.cuh: q and the raw cache
// values exact in 16-bit operands, f32 logits scaled once, P rounded to the query's type and l
// summing the rounded P, f32 partials for split items) but built to stream the cache:
//
// - No shared-memory staging of K and V and no block-wide barrier in the key loop: each lane loads
//   its operands of the mma fragments straight from the cache into registers, and each of the 4
//   warps walks its own tiles (warp w takes tiles w, w + 4, ...), issuing the loads of its next
//   tile before the math of the current one, so two tiles a warp are in flight.
// - The fragments are gathered with permutations that make every lane's loads 16-byte vectors:
//   the dot products' dimensions are permuted the same way in q and k (the sum does not depend on
//   the order of its terms beyond the tensor core's own f32 accumulation), and the output's
//   dimensions are permuted so that a lane's share of a value row is contiguous, which the
//   epilogue undoes (DecodeLayout).
// - The block table of the CTA's keys is read once into shared memory (in chunks of
//   kDecodeTableSlots blocks), so a key's address costs a shift and a shared load, not a dependent
//   global load and a 64-bit division.
// At the end the 4 warps' softmax states merge through shared memory, as in the tile kernel.
// Floor: 2 * sum_r L_r * Hkv * D * (1 or 2) bytes over the bandwidth. Tests:
// tests/gpu/test_attention_cuda.cpp (every 16-row item of head size 64/128 runs here).
#pragma once

#include "ops/attention/attention_mma.cuh"

namespace fp8kit::ops::attention_kernels::mma {

constexpr int kDecodeWarps = kAttentionMmaDecodeWarps;
constexpr int kDecodeTableSlots = kAttentionMmaDecodeTableSlots;

// Keys of one warp's tile: 32 for an FP8 cache, 16 for a 16-bit one (8 KiB of K and V at head
// size 128 either way).
template <bool kFp8>
constexpr int kDecodeWarpKeys = kFp8 ? 32 : 16;

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

// A warp's tile in registers: K units per n-tile, value words per k-step and key (2c, 2c + 1,
// 2c + 8, 2c + 9 of the step).
template <int kD, bool kFp8>
struct DecodeTile {
  using L = DecodeLayout<kD, kFp8>;
  uint4 k[L::kNt][L::kKUnits];
  uint32_t v[L::kPk][4][L::kVWords];
};

template <typename Tag, int kD, bool kFp8>
__global__ void __launch_bounds__(kThreads, 2) paged_attention_mma_decode_kernel(const AttnParams p, bool e5m2,
                                                                                 bool q_vector) {
  using T = typename Tag::Storage;
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
  constexpr int kShare = kD / 8 + 4, kMergeRow = 8 * kShare + 1;  // attention_mma_decode_merge_row
  float* merge_acc = reinterpret_cast<float*>(table_s + kDecodeTableSlots);  // [4][16][kMergeRow]
  float* merge_ml = merge_acc + kDecodeWarps * 16 * kMergeRow;           // [4][16][2]

  const Item it = resolve_item(p, p.items[blockIdx.x]);
  const int64_t kvh = blockIdx.y;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, c = lane % 4;

  // Q rows -> shared memory, each physical dim at its mma column (zeros past the item's rows).
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
#pragma unroll
    for (int k = 0; k < 8; ++k) q_s[r * kRowE + L::q_column(d0 + k)] = e[k];
  }

  KeyRange seen[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    seen[h] = r < it.rows ? visible_keys(p, it, row_position(p, it, r)) : KeyRange{0, -1};
  }
  const KeyRange keys = split_keys(item_keys(p, it), blockIdx.z, p.splits, kCtaKeys);
  const float k_scale = kFp8 ? __ldg(p.kv_scale[0] + kvh * p.kv_scale_stride) : 1.0f;
  const float v_scale = kFp8 ? __ldg(p.kv_scale[1] + kvh * p.kv_scale_stride) : 1.0f;
  const float logit_scale = __fmul_rn(p.scale, k_scale);
  const float base2_scale = __fmul_rn(logit_scale, kLog2e);

  const BlockDivider div(p.block_size);
  const int bs = div.bs;
  const uint8_t* base[2];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    base[w] = static_cast<const uint8_t*>(p.cache[w]) + kvh * p.head_stride[w] * L::kElem;
  }
  int chunk_block0 = 0, chunk_last = -1;
  // Byte offset of key j's row in cache `which` from its KV head's base, or -1 when it is not
  // readable (past the chunk, or its block outside the cache).
  auto key_offset = [&](int which, int j) -> int64_t {
    if (j > chunk_last) return -1;
    const int block = table_s[div.block(j) - chunk_block0];
    if (block < 0) return -1;
    return (int64_t(block) * p.block_stride[which] + int64_t(div.slot(j)) * p.page_stride[which]) * L::kElem;
  };
  auto readable = [&](int j) {
    if (j > chunk_last) return false;
    return table_s[div.block(j) - chunk_block0] >= 0;
  };

  auto load_tile = [&](Tile& t, int tile0) {
#pragma unroll
    for (int nt = 0; nt < L::kNt; ++nt) {
      const int64_t at = key_offset(0, tile0 + nt * 8 + g);
#pragma unroll
      for (int u = 0; u < L::kKUnits; ++u) {
        t.k[nt][u] = at >= 0 ? __ldg(reinterpret_cast<const uint4*>(base[0] + at + (u * 4 + c) * 16))
                             : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int kk = 0; kk < L::kPk; ++kk) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int64_t at = key_offset(1, tile0 + 16 * kk + 2 * c + (q & 1) + 8 * (q >> 1));
        const uint8_t* src = base[1] + at + g * (L::kVWords * 4);
        if constexpr (L::kVWords == 2) {
          const uint2 w = at >= 0 ? __ldg(reinterpret_cast<const uint2*>(src)) : make_uint2(0, 0);
          t.v[kk][q][0] = w.x, t.v[kk][q][1] = w.y;
        } else {
#pragma unroll
          for (int x = 0; x < L::kVWords / 4; ++x) {
            const uint4 w = at >= 0 ? __ldg(reinterpret_cast<const uint4*>(src) + x) : make_uint4(0, 0, 0, 0);
            t.v[kk][q][4 * x] = w.x, t.v[kk][q][4 * x + 1] = w.y;
            t.v[kk][q][4 * x + 2] = w.z, t.v[kk][q][4 * x + 3] = w.w;
          }
        }
      }
    }
  };

  float acc[L::kDt][4];
#pragma unroll
  for (int n = 0; n < L::kDt; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};

  auto consume = [&](const Tile& t, int tile0) {
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
          b0 = widen_fp8x2<Tag>(words[w], e5m2);
          b1 = widen_fp8x2<Tag>(words[w] >> 16, e5m2);
        } else {
          b0 = words[2 * w];
          b1 = words[2 * w + 1];
        }
        mma16816<Tag>(s[n], a, b0, b1);
      }
    }
    // Logits (base 2), masked.
    float tile_max[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int n = 0; n < L::kNt; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const int j = tile0 + n * 8 + 2 * c + (e % 2);
        const bool ok = readable(j) && j >= seen[h].first && j <= seen[h].last;
        s[n][e] = masked_logit(s[n][e], ok, p.softcap, logit_scale, base2_scale);
        tile_max[h] = nan_max(tile_max[h], s[n][e]);
      }
    }
    uint32_t pa[L::kNt][2];
    softmax_tile<Tag>(s, tile_max, m, l, acc, pa);
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
            b[0][pair] = widen_fp8x2<Tag>(both, e5m2);
            b[1][pair] = widen_fp8x2<Tag>(both >> 16, e5m2);
          } else {
            const int word = n / 2;
            b[0][pair] = __byte_perm(k0[word], k1[word], 0x5410);
            b[1][pair] = __byte_perm(k0[word], k1[word], 0x7632);
          }
        }
        mma16816<Tag>(acc[n], a, b[0][0], b[0][1]);
        mma16816<Tag>(acc[n + 1], a, b[1][0], b[1][1]);
      }
    }
  };

  // The keys in chunks of at most kDecodeTableSlots blocks (a whole number of CTA tiles).
  const int64_t chunk_keys_raw = int64_t(kDecodeTableSlots - 1) * bs;
  const int chunk_keys = int(chunk_keys_raw >= (int64_t(1) << 30) ? (int64_t(1) << 30)
                                                                   : chunk_keys_raw / kCtaKeys * kCtaKeys);
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
    int tile0 = int(chunk0) + warp * L::kWarpKeys;
    if (tile0 > chunk_last) continue;
    Tile cur;
    load_tile(cur, tile0);
    for (; tile0 <= chunk_last; tile0 += kCtaKeys) {
      Tile next;
      const bool more = tile0 + kCtaKeys <= chunk_last;
      if (more) load_tile(next, tile0 + kCtaKeys);
      consume(cur, tile0);
      if (more) cur = next;
    }
  }

  // Row sums over the 4 lanes of a row, then the 4 warps' states merged.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = __fadd_rn(l[h], __shfl_xor_sync(0xffffffffu, l[h], 1));
    l[h] = __fadd_rn(l[h], __shfl_xor_sync(0xffffffffu, l[h], 2));
  }
#pragma unroll
  for (int n = 0; n < L::kDt; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      // Physical dim (2c + e % 2) * kD / 8 + n (DecodeLayout) at share 2c + e % 2, offset n.
      merge_acc[(warp * 16 + g + 8 * (e / 2)) * kMergeRow + (2 * c + (e % 2)) * kShare + n] = acc[n][e];
    }
  }
  if (c == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      merge_ml[(warp * 16 + g + 8 * h) * 2] = m[h];
      merge_ml[(warp * 16 + g + 8 * h) * 2 + 1] = l[h];
    }
  }
  __syncthreads();
  for (int i = tid; i < 16 * kD; i += kThreads) {
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

template <typename Tag, int kD, bool kFp8>
void launch_decode_instance(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream) {
  constexpr auto kernel = paged_attention_mma_decode_kernel<Tag, kD, kFp8>;
  static_assert(attention_mma_decode_merge_row(kD) == 8 * (kD / 8 + 4) + 1, "the kernel's merge row");
  constexpr size_t smem = attention_mma_decode_shared_bytes(kD);
  cuda::allow_dynamic_smem<kernel>(int(smem));
  const dim3 grid(unsigned(l.items_bound), unsigned(p.num_kv_heads), unsigned(p.splits));
  cuda::launch_pdl(kernel, grid, kThreads, smem, stream, p, l.cache_dtype == KvCacheDtype::kFp8E5M2, l.q_vector);
  FP8KIT_CHECK_LAUNCH(stream, "paged_attention_mma_decode_kernel");
}

}  // namespace fp8kit::ops::attention_kernels::mma
