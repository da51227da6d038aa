// weight_only_tiled: weight_only_mm (W8A16, the spec's Marlin path) for many rows (prefill) on
// 16-bit tensor cores (mma.sync m16n8k16 bf16/f16 -> f32, sm_80+): a tiled GEMM whose weights
// arrive as FP8 and are widened to 16 bits in shared memory, once a CTA. Also the fused MoE's
// weight-only GEMMs above decode (kSorted: rows are moe_align's sorted positions in blocks of 128).
//
// Reference: weight_only_mm_ref (src/ops/gemm/weight_only_ref.cpp), which rounds each dequantized
// weight fl32(decode(w) * s_w) and sums x * w_dq; for the MoE expert_gemm_ref
// (fused_experts_gemm_ref.cpp). As in weight_only_mma.cu, the tensor cores multiply x by
// decode(w) (exact in 16 bits) and the scale goes on the f32 sum: per tensor / per row at the
// end, y = round_out(fl32(fl32(s_w * acc) + bias)); block scales per 32-wide K tile,
// acc = fma(s_w[n / bn, k / bk], partial, acc), then y = round_out(fl32(acc + bias)).
// Tests: tests/gpu/test_weight_only_cuda.cpp, test_fused_experts_cuda.cpp.
// Floor: 2 M N K FLOP at the 16-bit mma.sync rate (an A100's dense BF16 peak is 312 TFLOP/s; on
// the H200 this kernel measured 245-278 TFLOP/s, against 790 for the wgmma BF16 GEMM), and N K
// weight bytes + 2 M K activation bytes over the memory bandwidth.
//
// CTA: 128 rows of x by 128 weight rows (output columns), 8 warps as 2 (rows) x 4 (columns), a
// warp 64 x 32. K goes through shared memory 32 at a time: x's tile (16-bit) and w's (FP8) arrive
// by cp.async, kStages deep; then the CTA widens w's tile once into a 16-bit copy (each thread 16
// weights), a K tile ahead of the MMAs that read it, so that both operands reach the tensor cores
// by ldmatrix in their natural order. (Widening in every warp's registers instead took three
// times the MMAs' instructions, most of them moves that put the fragments in MMA order.) Tiles
// are 64 bytes a row, stored with 16-byte units XOR (row / 2) % 4, which keeps ldmatrix free of
// bank conflicts. 76 KB of shared memory: fits sm_86/89's 99 KB as well as sm_80/90's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/async_copy.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_attributes.h"
#include "fp8kit/half.h"
#include "fp8kit/tensor.h"
#include "ops/gemm/gemm_config.h"
#include "ops/gemm/w8a16_mma.cuh"
#include "ops/gemm/weight_only_mma.h"

namespace fp8kit::ops {
namespace {

constexpr int kBM = int(kWeightOnlyTileM), kBN = int(kWeightOnlyTileN), kBK = int(kWeightOnlyTileK);
constexpr int kStages = 5, kThreads = 256;
constexpr int kWarpM = 64, kWarpN = 32, kMTiles = kWarpM / 16, kNTiles = kWarpN / 8;
// Stage s: x's tile (kBM x kBK 16-bit) then w's (kBN x kBK FP8); then two widened w tiles.
constexpr int kABytes = kBM * kBK * 2, kBBytes = kBN * kBK, kStageBytes = kABytes + kBBytes;
constexpr int kWideBytes = kBN * kBK * 2;
constexpr int kSmemBytes = kStages * kStageBytes + 2 * kWideBytes;
constexpr uint32_t kGroupM = 8;  // row tiles a raster group: the CTAs in flight share weight tiles

// Byte offset of 16-byte unit `unit` (0-3) of row `row` in a tile of 64-byte rows.
__device__ __forceinline__ uint32_t swizzled(int row, int unit) { return uint32_t(row * 64 + ((unit ^ ((row / 2) % 4)) * 16)); }

// The epilogue of one output: per tensor / per row fl32(fl32(s_w * acc) + bias); block (the
// scales already in acc) fl32(acc + bias).
template <bool kBlock>
__device__ __forceinline__ float finish(float acc, float col_scale, float col_bias) {
  return __fadd_rn(kBlock ? acc : __fmul_rn(col_scale, acc), col_bias);
}

template <typename T>
__device__ __forceinline__ void store_pair(T* out, int64_t n, int64_t cols, float v0, float v1, bool pair_ok) {
  if (pair_ok && n + 1 < cols) {
    T two[2] = {from_float<T>(v0), from_float<T>(v1)};
    *reinterpret_cast<uint32_t*>(out + n) = *reinterpret_cast<const uint32_t*>(two);
  } else {
    if (n < cols) out[n] = from_float<T>(v0);
    if (n + 1 < cols) out[n + 1] = from_float<T>(v1);
  }
}

template <typename Tag, bool kBlock, bool kSorted>
__global__ void __launch_bounds__(kThreads, 2)
    weight_only_tiled_kernel(const WeightOnlyMmArgs a, const W8A16SortedRows sorted, int k_tiles_per_split, float* partials) {
  using T = typename Tag::Storage;
  extern __shared__ uint4 smem_raw[];
  const uint32_t smem = cuda::smem_u32(smem_raw);
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int wm = warp % 2, wn = warp / 2;

  // Grouped raster: kGroupM row tiles, column tiles outer within a group.
  const uint32_t m_tiles = uint32_t((a.m + kBM - 1) / kBM), n_tiles = uint32_t((a.n + kBN - 1) / kBN);
  const uint32_t per_group = kGroupM * n_tiles, group = blockIdx.x / per_group, in_group = blockIdx.x % per_group;
  const uint32_t first = group * kGroupM, rows = m_tiles - first < kGroupM ? m_tiles - first : kGroupM;
  const int64_t m0 = int64_t(first + in_group % rows) * kBM, n0 = int64_t(in_group / rows) * kBN;

  // Sorted (MoE): positions past those in use hold nothing; the tile's expert picks the weights
  // and scales (another rank's expert: no main loop, zeros out).
  const int64_t used = kSorted ? min(int64_t(*sorted.num_post_pad), a.m) : a.m;
  if (m0 >= used) return;
  const int expert = kSorted ? sorted.expert_ids[m0 / kBM] : 0;
  const uint8_t* const w_base = a.w + (expert > 0 ? int64_t(expert) * sorted.w_expert_stride : 0);
  const float* const scale = a.scale + (expert > 0 ? int64_t(expert) * sorted.scale_expert_stride : 0);
  // The slot of tile row `row` (sorted), or the row itself; < 0: none.
  auto slot_of = [&](int row) -> int64_t {
    const int64_t p = m0 + row;
    if constexpr (kSorted) {
      const int64_t slot = p < used ? sorted.sorted_ids[p] : -1;
      return slot >= 0 && slot < sorted.num_slots ? slot : -1;
    }
    return p < a.m ? p : -1;
  };

  const T* x = static_cast<const T*>(a.x);
  // This CTA's K tiles (split blockIdx.y of K): [kt0, kt0 + k_tiles).
  const int kt0 = int(blockIdx.y) * k_tiles_per_split;
  const int k_tiles = expert < 0 ? 0 : min(k_tiles_per_split, int((a.k + kBK - 1) / kBK) - kt0);
  // This thread's cp.async units of a stage: 2 of x's tile (row i / 4, unit i % 4, i = tid + 256 q)
  // and 1 of w's (row tid / 2, half tid % 2 of its 32 bytes). Rows past M or N read nothing (zeros).
  constexpr int kAUnits = kBM * kBK / 8 / kThreads;
  const T* x_src[kAUnits];
  bool x_ok[kAUnits];
  uint32_t x_dst[kAUnits];
#pragma unroll
  for (int q = 0; q < kAUnits; ++q) {
    const int i = tid + kThreads * q, row = i / 4, unit = i % 4;
    const int64_t slot = slot_of(row);
    x_ok[q] = slot >= 0;
    x_src[q] = x + (x_ok[q] ? (kSorted ? slot / sorted.a_slots_per_row : slot) * a.ldx : 0) + 8 * unit;
    x_dst[q] = swizzled(row, unit);
  }
  const bool w_ok = n0 + tid / 2 < a.n;
  const uint8_t* const w_src = w_base + (w_ok ? (n0 + tid / 2) * a.ldw : 0) + 16 * (tid % 2);
  auto load_stage = [&](int kt) {  // kt: this split's K tile
    const int64_t k0 = int64_t(kt0 + kt) * kBK;
    const uint32_t sa = smem + uint32_t(kt % kStages) * kStageBytes, sb = sa + kABytes;
#pragma unroll
    for (int q = 0; q < kAUnits; ++q) {
      const bool ok = x_ok[q] && k0 + 8 * ((tid + kThreads * q) % 4) < a.k;  // K % 16 == 0: all in or out
      cuda::cp_async16(sa + x_dst[q], ok ? x_src[q] + k0 : x, ok);
    }
    const bool ok = w_ok && k0 + 16 * (tid % 2) < a.k;
    cuda::cp_async16(sb + uint32_t(tid * 16), ok ? w_src + k0 : a.w, ok);
  };
  // Widens w's tile of stage kt into wide buffer kt % 2: this thread's 16 weights (row tid / 2,
  // k 16 (tid % 2) ..) become units 2 (tid % 2) and + 1 of that row.
  auto widen_stage = [&](int kt) {
    const uint32_t sb = smem + uint32_t(kt % kStages) * kStageBytes + kABytes;
    const uint32_t wide = smem + kStages * kStageBytes + uint32_t(kt % 2) * kWideBytes;
    uint32_t v[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "r"(sb + uint32_t(tid * 16))
                 : "memory");
    const int row = tid / 2, half = tid % 2;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const uint32_t w0 = w8a16::widen_pair<Tag>(v[2 * u], false), w1 = w8a16::widen_pair<Tag>(v[2 * u], true);
      const uint32_t w2 = w8a16::widen_pair<Tag>(v[2 * u + 1], false), w3 = w8a16::widen_pair<Tag>(v[2 * u + 1], true);
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(wide + swizzled(row, 2 * half + u)), "r"(w0),
                   "r"(w1), "r"(w2), "r"(w3)
                   : "memory");
    }
  };

  // Block scales: this warp's 32 columns lie in one block (block_n % 32 == 0), whose scale row
  // is found once (a warp wholly past N reads row 0's and stores nothing); a K tile's block by a
  // 32-bit division.
  const int64_t warp_n0 = n0 + kWarpN * wn;
  const float* const s_row = kBlock ? scale + (warp_n0 < a.n ? warp_n0 / a.block_n : 0) * a.s_row_stride : nullptr;
  const uint32_t block_k = uint32_t(a.block_k);

  // ldmatrix rows of this lane: x's row tile i, step s: matrix lane / 8 = (rows +0 / +8) x
  // (k +0 / +8); w's column tiles 2 p, 2 p + 1: matrix lane / 8 = (tile +0 / +1) x (k +0 / +8).
  const int a_row = kWarpM * wm + lane % 16, a_unit = lane / 16;
  const int b_row = kWarpN * wn + (lane / 16) * 8 + lane % 8, b_unit = (lane / 8) % 2;

  float acc[kMTiles][kNTiles][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s);
    cuda::cp_async_commit();
  }
  cuda::cp_async_wait_group<kStages - 2>();
  __syncthreads();
  widen_stage(0);
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Stage kt + 1 has landed for this thread; after the barrier, for all of them, and wide
    // tile kt is written. Stage kt - 1 (its x read by the last MMAs, its w widened before them)
    // and wide buffer (kt + 1) % 2 are free again.
    cuda::cp_async_wait_group<kStages - 3>();
    __syncthreads();
    if (kt + kStages - 1 < k_tiles) load_stage(kt + kStages - 1);
    cuda::cp_async_commit();
    if (kt + 1 < k_tiles) widen_stage(kt + 1);

    // Block: the K tile's weight scale, loaded before the MMAs and used after them.
    const float sc = kBlock ? s_row[int64_t(uint32_t((kt0 + kt) * kBK) / block_k) * a.s_col_stride] : 1.0f;
    const uint32_t sa = smem + uint32_t(kt % kStages) * kStageBytes;
    const uint32_t wide = smem + kStages * kStageBytes + uint32_t(kt % 2) * kWideBytes;
    // The weights of this warp's 32 columns for both k16 steps: b[s][p] = {tile 2p k lo, tile 2p
    // k hi, tile 2p + 1 k lo, tile 2p + 1 k hi}.
    uint32_t b[kBK / 16][kNTiles / 2][4];
#pragma unroll
    for (int s = 0; s < kBK / 16; ++s) {
#pragma unroll
      for (int p = 0; p < kNTiles / 2; ++p) w8a16::ldmatrix_x4(b[s][p], wide + swizzled(b_row + 16 * p, 2 * s + b_unit));
    }
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
      uint32_t af[kBK / 16][4];
#pragma unroll
      for (int s = 0; s < kBK / 16; ++s) w8a16::ldmatrix_x4(af[s], sa + swizzled(a_row + 16 * i, 2 * s + a_unit));
      // Block scales: row tile i's K-tile product, then promoted into acc (one tile's partial
      // at a time keeps the kernel within 128 registers, two CTAs a multiprocessor).
      float part[kNTiles][4] = {};
#pragma unroll
      for (int s = 0; s < kBK / 16; ++s) {
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          float(&d)[4] = kBlock ? part[j] : acc[i][j];
          w8a16::mma16816<Tag>(d, af[s][0], af[s][1], af[s][2], af[s][3], b[s][j / 2][2 * (j % 2)], b[s][j / 2][2 * (j % 2) + 1]);
        }
      }
      if constexpr (kBlock) {
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = __fmaf_rn(sc, part[j][e], acc[i][j][e]);
        }
      }
    }
  }
  cuda::cp_async_wait_group<0>();  // no copy outlives the CTA

  // Epilogue: element e of fragment (i, j) is row 16 i + g + 8 (e / 2), column 8 j + 2 t + e % 2.
  // Split K: the f32 sums go to partials[split] (M x N), which weight_only_tiled_reduce finishes;
  // sorted, scaled (per tensor) and by slot ([split, num_slots, N]), finished by
  // weight_only_tiled_sorted_reduce.
  T* out = static_cast<T*>(a.out);
  const T* bias = static_cast<const T*>(a.bias);
  const bool pair_ok = a.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(out) % 4 == 0;
  const int64_t part_rows = kSorted ? sorted.num_slots : a.m;
  float* const part_out = partials != nullptr ? partials + int64_t(blockIdx.y) * part_rows * a.n : nullptr;
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const int64_t n = n0 + kWarpN * wn + 8 * j + 2 * t;
    float cs[2] = {1.0f, 1.0f}, cb[2] = {0.0f, 0.0f};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (n + e >= a.n) continue;
      if (!kBlock) cs[e] = scale[a.scale_kind == ScaleKind::kRow ? n + e : 0];
      if (bias != nullptr && part_out == nullptr) cb[e] = to_float(bias[n + e]);
    }
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t r = slot_of(kWarpM * wm + 16 * i + g + 8 * h);  // the output row
        if (r < 0) continue;
        if (part_out != nullptr) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float sum = acc[i][j][2 * h + e];
            if (n + e < a.n) part_out[r * a.n + n + e] = kSorted ? finish<kBlock>(sum, cs[e], 0.0f) : sum;
          }
          continue;
        }
        float v[2];
        const float routed = kSorted && sorted.slot_weight != nullptr ? sorted.slot_weight[r] : 1.0f;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          v[e] = finish<kBlock>(acc[i][j][2 * h + e], cs[e], cb[e]);
          if (kSorted && sorted.slot_weight != nullptr) v[e] = __fmul_rn(v[e], routed);
        }
        store_pair(out + r * a.ldc, n, a.n, v[0], v[1], pair_ok);
      }
    }
  }
}

// y = the epilogue of the sum of the splits' partials, summed in split order (deterministic).
template <typename T, bool kBlock>
__global__ void weight_only_tiled_reduce(const WeightOnlyMmArgs a, int splits, const float* partials) {
  const int64_t total = a.m * a.n;
  const T* bias = static_cast<const T*>(a.bias);
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / a.n, n = e - r * a.n;
    float acc = partials[e];
    for (int s = 1; s < splits; ++s) acc = __fadd_rn(acc, partials[s * total + e]);
    const float cs = kBlock ? 1.0f : a.scale[a.scale_kind == ScaleKind::kRow ? n : 0];
    const float cb = bias != nullptr ? to_float(bias[n]) : 0.0f;
    static_cast<T*>(a.out)[r * a.ldc + n] = from_float<T>(finish<kBlock>(acc, cs, cb));
  }
}

// Sorted: out[slot] = the sum of the splits' scaled partials (in split order) times the slot's
// routed weight.
template <typename T>
__global__ void weight_only_tiled_sorted_reduce(const WeightOnlyMmArgs a, const W8A16SortedRows sorted, int splits,
                                                const float* partials) {
  const int64_t total = sorted.num_slots * a.n;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t slot = e / a.n, n = e - slot * a.n;
    float acc = partials[e];
    for (int s = 1; s < splits; ++s) acc = __fadd_rn(acc, partials[s * total + e]);
    if (sorted.slot_weight != nullptr) acc = __fmul_rn(acc, sorted.slot_weight[slot]);
    static_cast<T*>(a.out)[slot * a.ldc + n] = from_float<T>(acc);
  }
}

// Plans the K splits (sorted: on the host's bound on the positions, since the blocks in use are
// known on the device only; decode, with a few experts' blocks, splits), launches the kernel and,
// split, the reduction of its f32 partials.
template <typename Tag, bool kBlock, bool kSorted>
void launch(const WeightOnlyMmArgs& a, const W8A16SortedRows& rows, cudaStream_t s) {
  int device = 0, sms = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const WeightOnlyTiledPlan plan = plan_weight_only_tiled(a.m, a.n, a.k, sms);
  const int64_t out_rows = kSorted ? rows.num_slots : a.m;
  Tensor partials;
  if (plan.splits > 1) partials = Tensor::empty({plan.splits, out_rows, a.n}, DType::kF32, Device::cuda(device));
  float* const part = plan.splits > 1 ? static_cast<float*>(partials.data_ptr()) : nullptr;
  constexpr auto kernel = weight_only_tiled_kernel<Tag, kBlock, kSorted>;
  cuda::allow_dynamic_smem<kernel>(kSmemBytes);
  const dim3 grid(unsigned(plan.tiles), unsigned(plan.splits));
  kernel<<<grid, kThreads, kSmemBytes, s>>>(a, rows, int(plan.k_tiles_per_split), part);
  FP8KIT_CHECK_LAUNCH(s, "weight_only_tiled_kernel");
  if (plan.splits == 1) return;
  const int threads = 256;
  const unsigned blocks = unsigned(std::min<int64_t>((out_rows * a.n + threads - 1) / threads, 4096));
  using T = typename Tag::Storage;
  if constexpr (kSorted) {
    weight_only_tiled_sorted_reduce<T><<<blocks, threads, 0, s>>>(a, rows, int(plan.splits), part);
  } else {
    weight_only_tiled_reduce<T, kBlock><<<blocks, threads, 0, s>>>(a, int(plan.splits), part);
  }
  FP8KIT_CHECK_LAUNCH(s, "weight_only_tiled reduction");
}

template <typename Tag, bool kSorted>
void launch_scaling(const WeightOnlyMmArgs& a, const W8A16SortedRows& rows, cudaStream_t s) {
  a.scale_kind == ScaleKind::kBlock ? launch<Tag, true, kSorted>(a, rows, s) : launch<Tag, false, kSorted>(a, rows, s);
}

}  // namespace

bool weight_only_tiled_serves(const WeightOnlyMmArgs& a, int device) {
  const int64_t tiles = ((a.m + kBM - 1) / kBM) * ((a.n + kBN - 1) / kBN);
  return w8a16::operands_ok(a, device) && tiles <= 0x7fffffff &&
         (a.scale_kind != ScaleKind::kBlock || (a.block_k % kBK == 0 && a.block_n % kWarpN == 0 && a.block_n > 0));
}

void weight_only_tiled_cuda(const WeightOnlyMmArgs& a, cudaStream_t s) {
  w8a16::with_act_tag(a.act_dtype, [&](auto tag) { launch_scaling<decltype(tag), false>(a, W8A16SortedRows{}, s); });
}

void weight_only_tiled_sorted_cuda(const WeightOnlyMmArgs& a, const W8A16SortedRows& rows, cudaStream_t s) {
  if (a.m <= 0 || a.n <= 0) return;
  w8a16::with_act_tag(a.act_dtype, [&](auto tag) { launch_scaling<decltype(tag), true>(a, rows, s); });
}

}  // namespace fp8kit::ops
