// weight_only_mma: weight_only_mm (W8A16, the spec's Marlin path) for M <= 64 rows on 16-bit
// tensor cores (mma.sync m16n8k16 bf16/f16 -> f32, sm_80+): the FP8 weights stream from memory in
// 16-byte loads and are widened in registers; the weight bytes are the whole cost at decode. Also
// the fused MoE's weight-only GEMMs at decode (kSorted: a CTA per moe_align block of 16 positions;
// reference expert_gemm_ref, fused_experts_gemm_ref.cpp; tests test_fused_experts_cuda.cpp).
//
// Reference: weight_only_mm_ref (src/ops/gemm/weight_only_ref.cpp), which rounds each dequantized
// weight fl32(decode(w) * s_w) and sums x * w_dq. Here the tensor cores multiply x by decode(w)
// (exact in bf16 and f16) and the scale is applied to the f32 sum: per tensor / per row once,
// y = round_out(fl32(fl32(s_w * acc) + bias)); block scales per 64-wide K chunk,
// acc += s_w[n / bn, k / bk] * partial. The results agree with the reference within f32 rounding
// of the sums (tests/gpu/test_weight_only_cuda.cpp).
// Floor: N * K weight bytes over the memory bandwidth (half of a BF16 GEMM's): 4096 x 4096 is
// 16.8 MB, 3.9 us at the 4.26 TB/s copy ceiling.
//
// Orientation ("swap AB"): weight rows are the MMA's M (16 per warp), tokens its N (8 per tile,
// kTiles tiles). A CTA = 8 warps on the same 16 weight rows, each over its own slice of K; the
// slices are summed in shared memory in warp order (deterministic). Within a 64-wide K chunk lane
// (g = lane / 4, t = lane % 4) loads the 16 weight bytes k0 + 16 t .. + 15 of rows g and g + 8
// and the same 16 activations of each token; the MMA's k-slots {2t, 2t+1, 2t+8, 2t+9} of step s
// hold k0 + 16 t + 4 s + {0, 1, 2, 3}. Any permutation of K applied to both operands leaves the
// sum unchanged, so this one lets every lane use whole 16-byte loads.
//
// FP8 -> 16-bit: w8a16_mma.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "fp8kit/half.h"
#include "ops/gemm/w8a16_mma.cuh"
#include "ops/gemm/weight_only_mma.h"

namespace fp8kit::ops {
namespace {

using w8a16::mma16816;
using w8a16::widen_pair;

constexpr int kWarps = 8, kChunk = 64;

__device__ __forceinline__ uint4 load_streaming(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// kSorted (the fused MoE's weight-only experts at decode): CTA column blockIdx.y is moe_align block
// blockIdx.y of 16 sorted positions (kTiles = 2), one expert's; a token tile's token g is the
// position's slot, whose activation row is slot / a_slots_per_row and whose output row is slot.
template <typename Tag, int kTiles, bool kBlock, bool kSorted = false>
__global__ void __launch_bounds__(kWarps * 32)
    weight_only_mma_kernel(const WeightOnlyMmArgs a, const W8A16SortedRows sorted, int64_t k_slice) {
  static_assert(!kSorted || kTiles * 8 == kWeightOnlyMmaSortedBlock, "a sorted CTA is one block of positions");
  using T = typename Tag::Storage;
  __shared__ float partial[kWarps][kTiles * 4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // Sorted: positions past those in use hold nothing; another rank's expert multiplies nothing
  // and writes zeros.
  const int64_t p0 = int64_t(blockIdx.y) * kTiles * 8;
  if (kSorted && p0 >= min(int64_t(*sorted.num_post_pad), a.m)) return;
  const int expert = kSorted ? sorted.expert_ids[blockIdx.y] : 0;
  const uint8_t* const w = a.w + (expert > 0 ? int64_t(expert) * sorted.w_expert_stride : 0);
  const float* const scale = a.scale + (expert > 0 ? int64_t(expert) * sorted.scale_expert_stride : 0);
  // The slot (sorted) or token of position p0 + i of this CTA; -1: none.
  auto slot_of = [&](int i) -> int64_t {
    if constexpr (kSorted) {
      const int64_t slot = sorted.sorted_ids[p0 + i];
      return slot >= 0 && slot < sorted.num_slots ? slot : -1;
    }
    return i < a.m ? i : -1;
  };
  const int64_t row0 = int64_t(blockIdx.x) * 16;
  const int64_t row_lo = row0 + g, row_hi = row0 + g + 8;
  const bool lo_ok = row_lo < a.n, hi_ok = row_hi < a.n;
  const uint8_t* w_lo = w + (lo_ok ? row_lo : 0) * a.ldw + 16 * t;
  const uint8_t* w_hi = w + (hi_ok ? row_hi : 0) * a.ldw + 16 * t;
  const T* x = static_cast<const T*>(a.x);
  // This lane's activation row of each token tile (token g), -1 for none.
  int64_t x_row[kTiles];
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
    const int64_t slot = slot_of(tile * 8 + g);
    x_row[tile] = kSorted && slot >= 0 ? slot / sorted.a_slots_per_row : slot;
  }
  // Block scales: the two rows' scale rows, found once; a chunk's K block by a 32-bit division
  // (64-bit divisions are subroutine calls, four a chunk before).
  const float* s_row_lo = nullptr;
  const float* s_row_hi = nullptr;
  if constexpr (kBlock) {
    if (lo_ok) s_row_lo = scale + (row_lo / a.block_n) * a.s_row_stride;
    if (hi_ok) s_row_hi = scale + (row_hi / a.block_n) * a.s_row_stride;
  }
  const uint32_t block_k = uint32_t(a.block_k);

  float acc[kTiles][4] = {};
  const int64_t k_begin = int64_t(warp) * k_slice;
  const int64_t k_end = expert < 0 ? k_begin : k_begin + k_slice < a.k ? k_begin + k_slice : a.k;
  // A 64-wide K chunk of this lane's operands: 16 weight bytes of rows g and g + 8, and the same
  // 16 activations of each token tile's token g (zeros past M, K or the slice). The activations
  // travel with the weights (kXAhead): loaded only when the chunk was multiplied, their latency
  // stalled every chunk (H200, M = 2-8 and 17-32: 1.0-1.4x and 0.8-2.3x, geometric mean 1.15x
  // with per-channel scales). With two token tiles (M = 9-16) the extra registers cost a CTA a
  // multiprocessor, which measured 0.75-0.82x on weights of 448-512 CTAs, so there they are
  // loaded in the multiply step as before.
  constexpr bool kXAhead = kTiles != 2;
  struct Chunk {
    uint4 lo, hi, x[kTiles][2];
  };
  auto load_x = [&](int64_t k0, bool in, uint4 (&xs)[kTiles][2]) {
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      xs[tile][0] = xs[tile][1] = make_uint4(0, 0, 0, 0);
      if (in && x_row[tile] >= 0) {
        const uint4* xr = reinterpret_cast<const uint4*>(x + x_row[tile] * a.ldx + k0 + 16 * t);
        xs[tile][0] = xr[0];
        xs[tile][1] = xr[1];
      }
    }
  };
  auto load_chunk = [&](int64_t k0, Chunk& c) {
    const bool in = k0 < k_end && k0 + 16 * t < a.k;  // K % 16 == 0: a lane's 16 bytes are all in or all out
    c.lo = in && lo_ok ? load_streaming(w_lo + k0) : make_uint4(0, 0, 0, 0);
    c.hi = in && hi_ok ? load_streaming(w_hi + k0) : make_uint4(0, 0, 0, 0);
    if constexpr (kXAhead) load_x(k0, in, c.x);
  };
  // This chunk's product: the weights widened to 16 bits, times each token tile.
  auto multiply = [&](int64_t k0, Chunk c) {
    if constexpr (!kXAhead) load_x(k0, k0 + 16 * t < a.k, c.x);
    const uint32_t lo_words[4] = {c.lo.x, c.lo.y, c.lo.z, c.lo.w}, hi_words[4] = {c.hi.x, c.hi.y, c.hi.z, c.hi.w};
    uint32_t af[4][4];  // [step][a0..a3]
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      af[s][0] = widen_pair<Tag>(lo_words[s], false);
      af[s][1] = widen_pair<Tag>(hi_words[s], false);
      af[s][2] = widen_pair<Tag>(lo_words[s], true);
      af[s][3] = widen_pair<Tag>(hi_words[s], true);
    }
    float part[kTiles][4] = {};
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      const uint4 xa = c.x[tile][0], xb = c.x[tile][1];
      const uint32_t xw[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        mma16816<Tag>(kBlock ? part[tile] : acc[tile], af[s][0], af[s][1], af[s][2], af[s][3], xw[2 * s], xw[2 * s + 1]);
      }
    }
    if constexpr (kBlock) {  // acc += s_w[n / bn, k / bk] * partial of this chunk (block_k % 64 == 0)
      const int64_t kb = int64_t(uint32_t(k0) / block_k) * a.s_col_stride;
      const float s_lo = lo_ok ? s_row_lo[kb] : 0.0f, s_hi = hi_ok ? s_row_hi[kb] : 0.0f;
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        acc[tile][0] = __fmaf_rn(s_lo, part[tile][0], acc[tile][0]);
        acc[tile][1] = __fmaf_rn(s_lo, part[tile][1], acc[tile][1]);
        acc[tile][2] = __fmaf_rn(s_hi, part[tile][2], acc[tile][2]);
        acc[tile][3] = __fmaf_rn(s_hi, part[tile][3], acc[tile][3]);
      }
    }
  };
  // One chunk in flight a lane while the last is multiplied (two measured slower: registers).
  Chunk next;
  load_chunk(k_begin, next);
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kChunk) {
    const Chunk cur = next;
    load_chunk(k0 + kChunk, next);
    multiply(k0, cur);
  }

  // Sum the warps' K slices in warp order, then the epilogue by warp 0.
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
    for (int i = 0; i < 4; ++i) partial[warp][tile * 4 + i][lane] = acc[tile][i];
  }
  __syncthreads();
  if (warp != 0) return;
  T* out = static_cast<T*>(a.out);
  const T* bias = static_cast<const T*>(a.bias);
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = partial[0][tile * 4 + i][lane];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) v = __fadd_rn(v, partial[w][tile * 4 + i][lane]);
      const int64_t row = i < 2 ? row_lo : row_hi, token = slot_of(tile * 8 + 2 * t + (i % 2));
      if (row >= a.n || token < 0) continue;
      if (!kBlock) v = __fmul_rn(a.scale_kind == ScaleKind::kRow ? scale[row] : scale[0], v);
      if (bias != nullptr) v = __fadd_rn(v, to_float(bias[row]));
      if (kSorted && sorted.slot_weight != nullptr) v = __fmul_rn(v, sorted.slot_weight[token]);
      out[token * a.ldc + row] = from_float<T>(v);
    }
  }
}

template <typename Tag, bool kBlock>
void launch(const WeightOnlyMmArgs& a, cudaStream_t s) {
  // K in kWarps slices of whole 64-wide chunks (the last ones may be short or empty).
  const int64_t chunks = (a.k + kChunk - 1) / kChunk;
  const int64_t k_slice = (chunks + kWarps - 1) / kWarps * kChunk;
  const dim3 grid(unsigned((a.n + 15) / 16)), block(kWarps * 32);
  auto run = [&](auto tiles) {
    weight_only_mma_kernel<Tag, decltype(tiles)::value, kBlock><<<grid, block, 0, s>>>(a, W8A16SortedRows{}, k_slice);
  };
  if (a.m <= 8) {
    run(std::integral_constant<int, 1>{});
  } else if (a.m <= 16) {
    run(std::integral_constant<int, 2>{});
  } else if (a.m <= 32) {
    run(std::integral_constant<int, 4>{});
  } else {
    run(std::integral_constant<int, 8>{});
  }
  FP8KIT_CHECK_LAUNCH(s, "weight_only_mma_kernel");
}

template <typename Tag, bool kBlock>
void launch_sorted(const WeightOnlyMmArgs& a, const W8A16SortedRows& rows, cudaStream_t s) {
  const int64_t chunks = (a.k + kChunk - 1) / kChunk;
  const int64_t k_slice = (chunks + kWarps - 1) / kWarps * kChunk;
  const dim3 grid(unsigned((a.n + 15) / 16), unsigned(a.m / kWeightOnlyMmaSortedBlock)), block(kWarps * 32);
  weight_only_mma_kernel<Tag, kWeightOnlyMmaSortedBlock / 8, kBlock, true><<<grid, block, 0, s>>>(a, rows, k_slice);
  FP8KIT_CHECK_LAUNCH(s, "weight_only_mma_kernel (sorted)");
}

template <typename Tag>
void launch_scaling(const WeightOnlyMmArgs& a, cudaStream_t s) {
  if (a.scale_kind == ScaleKind::kBlock) {
    launch<Tag, true>(a, s);
  } else {
    launch<Tag, false>(a, s);
  }
}

}  // namespace

bool weight_only_mma_serves(const WeightOnlyMmArgs& a, int device) {
  return w8a16::operands_ok(a, device) && a.m <= kWeightOnlyMmaMaxM && a.n <= int64_t(16) * 0x7fffffff &&
         (a.scale_kind != ScaleKind::kBlock || (a.block_k % kChunk == 0 && a.block_n > 0));
}

bool weight_only_mma_sorted_serves(const WeightOnlyMmArgs& a, int device) {
  return w8a16::operands_ok(a, device) && a.m % kWeightOnlyMmaSortedBlock == 0 &&
         a.m / kWeightOnlyMmaSortedBlock <= 65535 && a.n <= int64_t(16) * 0x7fffffff &&
         (a.scale_kind != ScaleKind::kBlock || (a.block_k % kChunk == 0 && a.block_n > 0));
}

void weight_only_mma_sorted_cuda(const WeightOnlyMmArgs& a, const W8A16SortedRows& rows, cudaStream_t s) {
  if (a.m <= 0 || a.n <= 0) return;
  w8a16::with_act_tag(a.act_dtype, [&](auto tag) {
    using Tag = decltype(tag);
    a.scale_kind == ScaleKind::kBlock ? launch_sorted<Tag, true>(a, rows, s) : launch_sorted<Tag, false>(a, rows, s);
  });
}

void weight_only_mma_cuda(const WeightOnlyMmArgs& a, cudaStream_t s) {
  w8a16::with_act_tag(a.act_dtype, [&](auto tag) { launch_scaling<decltype(tag)>(a, s); });
}

}  // namespace fp8kit::ops
