// The Hopper wgmma GEMM kernel (wgmma.mma_async m64n128k32 e4m3, sm_90a only): scaled_mm (spec
// 1.4/1.5/1.7, the CUTLASS path's epilogue; launcher sm90_e4m3_gemm_wgmma.cu) and the fused
// MoE's GEMMs on expert-sorted rows (spec 1.10; launcher ops/moe/grouped_gemm_sm90_sorted.cu).
// References: scaled_mm_ref (gemm_ref.cpp), expert_gemm_ref (fused_experts_gemm_ref.cpp). Tests:
// tests/gpu/test_gemm_cuda.cpp, tests/gpu/test_grouped_gemm_cuda.cpp, test_fused_experts_cuda.cpp;
// bench: bench/bench_gemm.cpp, bench/bench_moe.cpp.
// Floor: 2 M N K FLOP over the dense FP8 rate (1,979 TFLOP/s datasheet; cuBLASLt reaches ~1,450 on
// the H200), and at least the operand bytes over the copy bandwidth.
//
// CTA: one producer warpgroup and two consumer warpgroups; an output tile of 128 rows of a by
// 128 rows of b, each consumer owning 64 rows of a (the other shapes: Traits). Persistent: a grid of one CTA a
// multiprocessor walks the tiles in groups of kGroupM row tiles (the CTAs in flight share a few
// tiles of a and b, so each is read from memory about once and then from L2); sorted MoE rows go
// in groups of one expert's row tiles (sorted_tile_coord).
//
// K goes through shared memory in 128-wide tiles, kStages deep, in the 128-byte swizzle wgmma
// reads (core/cuda/wgmma.cuh). The producer loads each stage by two TMA loads (zero past M, N and
// K) and, for block scales, the 128 activation scales of the stage by cp.async; the stage's
// "full" mbarrier completes when all have landed. The stage ring runs on across tiles, so the
// producer loads the next tile while the consumers store the last one.
//
// Accumulation: each 128-wide K tile is multiplied by the tensor cores into a fresh f32 fragment
// (64 x 128, 64 registers a thread) that is then added into the f32 result: the tensor cores keep
// about 14 bits while they add FP8 products (DeepSeek-V3's and DeepGEMM's reason to promote), and
// the promotion is also where block scales apply. Two fragments take turns, so that a warpgroup's
// next K tile is in the tensor cores while it promotes the last. Registers: result + two fragments
// are 192 floats a thread, so the producer hands its registers to the consumers (setmaxnreg 40 /
// 232). Measured on the H200, a 256-column tile (the two halves promoted in turn, one fragment)
// was no faster, and without the second fragment the tensor cores idled during promotion.
// kFastAccum (the fused MoE's per-tensor GEMMs on request, whose reference accumulates as Triton's
// FP8 dot does): the whole K accumulates in the tensor cores, no promotion; with 128 x 256 tiles
// the m64n256 fragment (128 registers) is the result itself, so the tile is stored before the next
// one starts (Mixtral-8x7B's GEMM1 at M = 4096 1.15x over promoted 128 x 128 tiles).
//
// Measured on the H200 and left out (dense GEMMs, wgmma against itself in one call): 128 x 192
// tiles promoted from one m64n192 fragment (16% less shared-memory traffic a FLOP) 0.95x with
// per-tensor scales at M = 8192, 1.03x with block scales; no promotion on 128 x 128 tiles
// 1.02-1.03x; queueing the next tile's first two K tiles (not one) before the epilogue 0.94x;
// clusters of two CTAs sharing b's tile by TMA multicast 0.96-0.98x (per-tensor); one fragment a
// warpgroup with the two warpgroups queueing their K tiles in turn, on 128 x 192 tiles or 128 x
// 256 in two halves, 1.02-1.04x at M = 8192 and 0.84-0.87x at M = 512 (with two fragments, in
// turn: 0.94-0.99x); 128 x 144 tiles with two m64n144 fragments (cuBLASLt's shape) 0.92-0.99x.
// Under ncu the promoted kernel keeps the tensor pipe ~82% busy, the unpromoted 128 x 256 one
// and cuBLASLt ~94% (run gemm-prefill-mainloop, docs/notes/performance-history.md).
//
// Epilogue (kTmaStore: the dense GEMM and the MoE's GEMMs, whose output rows are the tile's rows):
// the consumers scale the fragment in registers, write it rounded to a shared-memory box in the
// TMA's swizzle, and one thread a warpgroup stores the box by TMA; the threads never wait on
// global stores or read shared memory back. Outputs the TMA cannot address (a row base not 16-byte
// aligned) go through a per-warp staging, 32 columns at a time, 16 bytes a lane. Traced on
// the H200 (clock64 stamps, 8192 x 6144 x 4096): the per-warp staging took ~3,500 cycles a tile
// (its shared-memory loads waiting behind the tensor cores' and the TMA's traffic; run twice in a
// row, the second pass took ~3,200, so not instruction fetch), the TMA epilogue ~2,300, of ~24,000
// a tile. A consumer queues the next tile's first K tile into the tensor cores before it stores
// the tile it finished, so the store overlaps that multiply (measured on the H200: dense GEMMs
// 1.02-1.04x at M >= 512, the MoE prefill layers 1.05-1.08x at M = 4096).
//
// Epilogue (every step an explicit f32 rounding):
//   block (1 x 128 activations, 128 x 128 weights):
//          acc = fma(partial_kb, a_s[row, kb] * b_s[col / 128, kb], acc) per K block (DeepGEMM's
//          order; the reference rounds partial_kb * a_s before the product with b_s); y = acc + bias
//   otherwise: acc = sum of the tiles; y = fma(a_s[row or 0], b_s[col or 0] * acc, bias) (the reference's)
//   sorted (MoE): block promotion in the reference's order, acc = fma(partial_kb * a_s, b_s, acc);
//          y = acc * w[slot] if routed, then per-tensor (y * a_s) * b_s[expert]
// then rounded to the output dtype.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/cuda/async_copy.cuh"
#include "core/cuda/tensor_map.h"
#include "core/cuda/wgmma.cuh"
#include "fp8kit/half.h"
#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops::sm90_gemm {

using cuda::smem_u32;


// Output tiles (kBM_ x kBN_):
//   128 x 128: consumer warpgroup w computes rows 64 w .. 64 w + 63 (m64n128);
//   128 x 256: the same rows by m64n256, fast accumulation only (the fragment is 128 registers
//              a thread, so there is no room for an f32 result beside it);
//   64 x 256: warpgroup w computes columns 128 w .. 128 w + 127 (the fused MoE's sorted rows in
//             blocks of 64, where each expert's last block is on average half padding).
template <bool kBlock_, int kBM_ = 128, int kBN_ = (kBM_ == 128 ? 128 : 256)>
struct Traits {
  static constexpr int kBM = kBM_, kBN = kBN_, kBK = 128;
  static_assert((kBM == 128 && (kBN == 128 || kBN == 256)) || (kBM == 64 && kBN == 256),
                "tiles of 128 x 128, 128 x 256 or 64 x 256");
  static constexpr int kWgRows = kBM == 128 ? 64 : 0, kWgCols = kBM == 128 ? 0 : 128;  // a warpgroup's offsets
  static constexpr int kWgN = kBM == 128 ? kBN : kBN / 2;  // columns a consumer warpgroup computes
  static constexpr int kFrag = kWgN / 2;                    // f32 registers of its fragment, a thread
  static constexpr int kThreads = 384;  // consumer warpgroups 0 and 1, producer warpgroup 2
  static constexpr int kABytes = kBM * kBK, kBBytes = kBN * kBK, kStageBytes = kABytes + kBBytes;
  // As many stages as fit beside the epilogue's buffers: 32 KB stages 6, 40 KB 5, 48 KB 4.
  static constexpr int kStages = kStageBytes <= 32768 ? 6 : kStageBytes <= 40960 ? 5 : 4;
  // Epilogue staging: per consumer warp 16 rows x 32 columns of f32, rows padded to 40 floats.
  static constexpr int kEpiStride = 40, kEpiWarpFloats = 16 * kEpiStride;
  static constexpr int kEpiBytes = 8 * kEpiWarpFloats * 4;  // the TMA epilogue's 2 x 64 x 128 bytes fit in it
  static_assert(kEpiBytes >= 2 * 64 * 128, "TMA epilogue buffers");
  static constexpr int kSmemBytes = kStages * kStageBytes + kEpiBytes + 1024;  // + alignment slack
  // The kernel's static shared memory (scales, barriers) comes on top; an H100/H200 CTA has 227 KB.
  static constexpr int kStaticSmemBytes = (kBlock_ ? kStages * kBM * 4 : 4) + 16 * kStages + 16 * kBN + 64;
  static_assert(kSmemBytes + kStaticSmemBytes <= 227 * 1024, "shared memory of an H100/H200 CTA");
  static_assert(kABytes % 1024 == 0 && kStageBytes % 1024 == 0, "swizzled tiles need 1024-byte alignment");
};

constexpr uint32_t kGroupM = 8;

// The epilogue's TMA store map of the output [m, n] (row stride ldc), written in boxes of 128
// bytes of 64 rows; `ok` false where the TMA cannot write it (the base not 16-byte aligned, or
// rows not a multiple of 16 bytes apart), which leaves the stores to the threads.
struct OutputMap {
  CUtensorMap map{};
  bool ok = false;
};
template <typename OutT>
inline OutputMap make_output_map(void* out, int64_t m, int64_t n, int64_t ldc) {
  OutputMap o;
  const uint64_t row_bytes = uint64_t(ldc) * sizeof(OutT);
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0 || row_bytes % 16 != 0 || m <= 0 || n <= 0) return o;
  o.map = cuda::make_tensor_map_2d_sw128(out, sizeof(OutT), uint64_t(n), uint64_t(m), row_bytes, 128 / sizeof(OutT), 64);
  o.ok = true;
  return o;
}

struct TileCoord {
  int64_t m0, n0;
};

// Tile t of the grouped raster: groups of kGroupM row tiles, column tiles outer within a group.
// 32-bit arithmetic (the launchers keep tile counts below 2^31): a 64-bit division is a
// subroutine call, and this runs between every two tiles.
[[maybe_unused]] __device__ __forceinline__ TileCoord tile_coord(uint32_t t, uint32_t m_tiles, uint32_t n_tiles, int bm, int bn) {
  const uint32_t per_group = uint32_t(kGroupM) * n_tiles;
  const uint32_t group = t / per_group, in_group = t - group * per_group;
  const uint32_t first = group * uint32_t(kGroupM);
  const uint32_t rows = m_tiles - first < uint32_t(kGroupM) ? m_tiles - first : uint32_t(kGroupM);
  const uint32_t n_tile = in_group / rows;
  return {int64_t(first + (in_group - n_tile * rows)) * bm, int64_t(n_tile) * bn};
}

// The sorted (MoE) raster: row tiles go in groups that each hold one expert's tiles within an
// aligned window of kSortedWindow row tiles, column tiles outer within a group. A group spans all
// column tiles, so group g starts at tile (its first row tile) * n_tiles, and the row tile
// t / n_tiles names the group of tile t. The CTAs in flight then share each expert's weight tiles
// and each row tile of a: with groups of 8 row tiles regardless of experts, every group boundary
// inside an expert read its weights twice (DeepSeek-V3 M = 4096: GEMM1 read 9.6 GB for 7.5 GB of
// weights, 8.2 GB with expert groups). The window's experts are read by independent loads, a
// tile ahead in the consumers, and the group found in registers by bit masks.
constexpr uint32_t kSortedWindow = 16;

// The loads of sorted_tile_coord for tile t, kept apart from the arithmetic so that a consumer can
// issue them a tile ahead (their latency otherwise fell between two tiles): each lane reads the
// expert of one row tile of the window, and a ballot of the warp compares them.
struct SortedWindow {
  int32_t expert;  // of the tile's row slot, which is the group's expert
  int32_t mine;    // of row tile window + lane % kSortedWindow
};

[[maybe_unused]] __device__ __forceinline__ SortedWindow load_sorted_window(uint32_t t, uint32_t used_tiles, uint32_t n_tiles,
                                                                            const int32_t* tile_expert) {
  const uint32_t slot = t / n_tiles, r = slot - slot % kSortedWindow + threadIdx.x % kSortedWindow;
  return {__ldg(tile_expert + slot), r < used_tiles ? __ldg(tile_expert + r) : 0};
}

// Called by whole warps (the ballot).
[[maybe_unused]] __device__ __forceinline__ TileCoord sorted_tile_coord(const SortedWindow& w, uint32_t t, uint32_t used_tiles,
                                                                        uint32_t n_tiles, int bm, int bn) {
  const uint32_t slot = t / n_tiles, window = slot - slot % kSortedWindow, k = slot - window;
  // Bit i: row tile window + i is in use and holds the group's expert.
  const bool mine = window + threadIdx.x % kSortedWindow < used_tiles && w.mine == w.expert;
  const uint32_t same = __ballot_sync(0xffffffffu, mine) & ((1u << kSortedWindow) - 1u);
  const uint32_t below = ~same & ((1u << k) - 1u), above = ~same & ~((2u << k) - 1u) & ((1u << kSortedWindow) - 1u);
  const uint32_t lo = window + (below != 0u ? 32u - uint32_t(__clz(below)) : 0u);
  const uint32_t hi = window + (above != 0u ? uint32_t(__ffs(above)) - 1u : kSortedWindow);
  const uint32_t rows = hi - lo, local = t - lo * n_tiles;
  const uint32_t col = local / rows;
  return {int64_t(lo + (local - col * rows)) * bm, int64_t(col) * bn};
}

[[maybe_unused]] __device__ __forceinline__ float out_to_float(BFloat16 v) { return bf16_to_float(v); }
[[maybe_unused]] __device__ __forceinline__ float out_to_float(Float16 v) { return f16_to_float(v); }
[[maybe_unused]] __device__ __forceinline__ float out_to_float(float v) { return v; }

// Round to nearest even, as float_to_bf16 / float_to_f16 (one instruction for two values; a NaN
// becomes the canonical NaN of the type).
template <typename OutT>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<OutT, BFloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// Converts 8 consecutive f32 outputs and stores them at `out`: one 16-byte store per 16 bytes
// when `vector` (aligned, all 8 inside the row), else element by element up to `count`.
template <typename OutT>
__device__ __forceinline__ void store8(OutT* out, const float (&y)[8], bool vector, int count) {
  if (vector) {
    if constexpr (sizeof(OutT) == 2) {
      *reinterpret_cast<uint4*>(out) = make_uint4(pack2<OutT>(y[0], y[1]), pack2<OutT>(y[2], y[3]),
                                                  pack2<OutT>(y[4], y[5]), pack2<OutT>(y[6], y[7]));
    } else {
      reinterpret_cast<float4*>(out)[0] = make_float4(y[0], y[1], y[2], y[3]);
      reinterpret_cast<float4*>(out)[1] = make_float4(y[4], y[5], y[6], y[7]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (e >= count) break;
      if constexpr (sizeof(OutT) == 2) {
        reinterpret_cast<uint16_t*>(out)[e] = uint16_t(pack2<OutT>(y[e], 0.0f));
      } else {
        out[e] = y[e];
      }
    }
  }
}

// The fused MoE's GEMMs on rows sorted by expert (kSorted): a's row r is the sorted position r
// of moe_align_block_size (block 128), its 128-row tile belongs to one expert, b is [E, N, K] (a
// 3-D tensor map, the expert its third coordinate), and the epilogue is the grouped GEMM's.
struct SortedRows {
  const int32_t* tile_expert = nullptr;  // expert of each 128-row tile; -1: another rank's (zeros)
  const int32_t* rows_in_use = nullptr;  // [1] rows holding sorted slots (num_tokens_post_padded)
  const int32_t* slot_of_row = nullptr;  // slot of each row in use; >= num_slots: padding
  int64_t num_slots = 0;
  const float* slot_weight = nullptr;  // [num_slots] multiplied into the sum before the scales, or null
  int64_t sb_expert_stride = 0;        // b's scales of expert e at scale_b + e * stride
};

template <bool kBlock, typename OutT, bool kSorted, int kBM = 128, int kBN = (kBM == 128 ? 128 : 256),
          bool kFastAccum = false, bool kTmaStore = false>
__global__ void __launch_bounds__(384, 1)
    sm90_e4m3_gemm_wgmma_kernel(const ScaledMmArgs g, const SortedRows sorted, const __grid_constant__ CUtensorMap a_map,
                                const __grid_constant__ CUtensorMap b_map, const __grid_constant__ CUtensorMap c_map) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = Traits<kBlock, kBM, kBN>;
  constexpr int kF = T::kFrag;
  // A fragment of 128 registers is the result itself (fast accumulation straight into acc).
  constexpr bool kAccIsFragment = kF > 64;
  static_assert(!kFastAccum || !kBlock, "block scales apply per K tile");
  static_assert(!kAccIsFragment || kFastAccum, "m64n256 fragments leave no room for promotion");
  constexpr int kS = T::kStages, kBK = T::kBK;
  extern __shared__ uint8_t smem_raw[];
  // [stage]{a kBM x 128 B, b kBN x 128 B}, swizzled, 1024-byte aligned.
  uint8_t* smem = smem_raw + ((1024 - smem_u32(smem_raw) % 1024) % 1024);
  const uint32_t smem_base = smem_u32(smem);
  __shared__ float s_ascale[kBlock ? kS : 1][T::kBM];  // block: a_s[row, kb] of each stage's rows
  __shared__ alignas(8) uint64_t s_full[kS], s_empty[kS];
  // Per output tile (two in turn): the column scales and the bias of its kBN columns.
  __shared__ alignas(16) float s_col[2][2][T::kBN];

  const int tid = int(threadIdx.x), lane = tid % 32;
  if (tid == 0) {
    for (int s = 0; s < kS; ++s) {
      // Full: the producer's expect_tx arrival (+ kBM cp.async arrivals for block scales).
      cuda::mbarrier_init(smem_u32(&s_full[s]), kBlock ? T::kBM + 1 : 1);
      cuda::mbarrier_init(smem_u32(&s_empty[s]), 8);  // one arrival per consumer warp
    }
  }
  __syncthreads();

  const uint32_t m_tiles = uint32_t((g.m + T::kBM - 1) / T::kBM), n_tiles = uint32_t((g.n + T::kBN - 1) / T::kBN);
  const int num_k_tiles = int((g.k + kBK - 1) / kBK);
  // Sorted: rows past the count in use (a multiple of the block) hold nothing and are not
  // visited; other ranks' experts skip the main loop and, where the output is by row, store zeros.
  const int64_t used_rows = kSorted ? min(int64_t(*sorted.rows_in_use), g.m) : g.m;
  const uint32_t used_tiles = kSorted ? uint32_t((used_rows + T::kBM - 1) / T::kBM) : m_tiles;
  const uint32_t num_tiles = used_tiles * n_tiles;
  auto window_of = [&](uint32_t t) -> SortedWindow {
    if constexpr (kSorted) return load_sorted_window(t, used_tiles, n_tiles, sorted.tile_expert);
    return SortedWindow{};
  };
  // Tile t's coordinates and expert (0 unless sorted; -1: another rank's), from its window.
  auto coord = [&](uint32_t t, const SortedWindow& w) -> TileCoord {
    if constexpr (kSorted) return sorted_tile_coord(w, t, used_tiles, n_tiles, T::kBM, T::kBN);
    return tile_coord(t, m_tiles, n_tiles, T::kBM, T::kBN);
  };
  auto expert_of = [&](const SortedWindow& w) -> int {
    if constexpr (!kSorted) return 0;
    return w.expert;
  };

  if (tid >= 256) {
    // Producer warpgroup: thread 0 issues the TMA loads; for block scales thread p < kBM copies
    // the scale of activation row p. Warp 0 stays whole (the sorted raster's ballot).
    cuda::setmaxnreg_dec<40>();
    const int p = tid - 256;
    if (p >= 32 && (!kBlock || p >= T::kBM)) return;
    uint32_t it = 0;  // k tiles loaded so far, over all of this CTA's output tiles
    // Sorted: each tile's window is loaded a tile ahead, as in the consumers; loaded at the tile's
    // start, its latency came before the tile's first TMA load, inside the stages' lead.
    SortedWindow ahead = blockIdx.x < num_tiles ? window_of(blockIdx.x) : SortedWindow{};
    for (uint32_t t = blockIdx.x; t < num_tiles; t += gridDim.x) {
      const SortedWindow w = ahead;
      if (t + gridDim.x < num_tiles) ahead = window_of(t + gridDim.x);
      const int expert = expert_of(w);
      if (expert < 0) continue;
      const TileCoord c = coord(t, w);
      const int64_t row = c.m0 + p;
      const bool row_ok = row < g.m;
      for (int kt = 0; kt < num_k_tiles; ++kt, ++it) {
        const uint32_t stage = it % kS;
        if (it >= uint32_t(kS)) cuda::mbarrier_wait(smem_u32(&s_empty[stage]), ((it / kS) - 1) & 1u);
        const uint32_t full = smem_u32(&s_full[stage]);
        const uint32_t sa = smem_base + stage * T::kStageBytes, sb = sa + T::kABytes;
        if (p == 0) {
          cuda::mbarrier_arrive_expect_tx(full, T::kStageBytes);
          cuda::tma_load_3d(sa, &a_map, kt * kBK, int32_t(c.m0), 0, full);
          cuda::tma_load_3d(sb, &b_map, kt * kBK, int32_t(c.n0), expert, full);
        }
        if constexpr (kBlock) {
          const float* src = g.scale_a + (row_ok ? row * g.sa_row_stride + int64_t(kt) * g.sa_group_stride : 0);
          cuda::cp_async4(smem_u32(&s_ascale[stage][p]), src, row_ok);
          cuda::cp_async_mbarrier_arrive(full);
        }
      }
    }
    if constexpr (kBlock) cuda::cp_async_wait_all();  // no copy outlives the warpgroup
    return;
  }

  // Consumer warpgroups.
  cuda::setmaxnreg_inc<232>();
  float* const epi = reinterpret_cast<float*>(smem + kS * T::kStageBytes);
  OutT* const out = static_cast<OutT*>(g.out);
  const OutT* const bias = static_cast<const OutT*>(g.bias);
  const bool vec_ok = (g.ldc * int64_t(sizeof(OutT))) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const bool col_vector = g.scale_b_kind == ScaleKind::kRow;
  const float col_scale0 = kBlock || col_vector ? 1.0f : g.scale_b[0];
  // The warpgroup and warp through a shuffle from lane 0, which the compiler knows to be the
  // same in every lane: the shared-memory addresses and wgmma descriptors derived from them then
  // stay in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0), warp = __shfl_sync(0xffffffffu, (tid / 32) % 4, 0);
  const int lg = lane / 4, lt = lane % 4;
  const int row_in_tile = wg * T::kWgRows + warp * 16 + lg;  // this thread's rows: row_in_tile and + 8
  const int wg_col0 = wg * T::kWgCols;                         // its warpgroup's first column in the tile
  float acc[kF], part0[kF], part1[kF];  // part0 and part1: fragments of 64 only
  // Block: the scales of a fragment's K tile, a_s of this thread's two rows and b_s of the tile's
  // 128 columns (read while the stage is held).
  struct TileScales {
    float lo = 1.0f, hi = 1.0f, b = 1.0f;
  };
  // Block: the weight scales of this warpgroup's 128 columns of a tile, one per K block (a
  // warpgroup wholly past N reads the last row's, and stores nothing).
  auto tile_sb = [&](const TileCoord& c, int expert) -> const float* {
    if constexpr (!kBlock) return nullptr;
    const int64_t col0 = c.n0 + wg_col0 < g.n ? c.n0 + wg_col0 : g.n - 1;
    return g.scale_b + (kSorted ? int64_t(expert < 0 ? 0 : expert) * sorted.sb_expert_stride : 0) +
           (col0 / 128) * g.sb_row_stride;
  };
  // Waits for the CTA's k tile i (k tile kt of an output tile whose weight scales are sb) and
  // queues its product into `part`.
  auto issue = [&](float (&part)[kF], uint32_t i, const float* sb, int kt, TileScales& sc, bool fresh = true) {
    const uint32_t stage = i % kS;
    if constexpr (kBlock) sc.b = __ldg(sb + int64_t(kt) * g.sb_group_stride);
    cuda::mbarrier_wait(smem_u32(&s_full[stage]), (i / kS) & 1u);
    if constexpr (kBlock) {
      sc.lo = s_ascale[stage][row_in_tile];
      sc.hi = s_ascale[stage][row_in_tile + 8];
    }
    const uint32_t a_tile = smem_base + stage * T::kStageBytes + wg * T::kWgRows * 128;
    const uint32_t b_tile = smem_base + stage * T::kStageBytes + T::kABytes + wg_col0 * 128;
    cuda::wgmma_fence_operands(part);
    cuda::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kBK / 32; ++ks) {
      cuda::wgmma_e4m3<T::kWgN>(part, cuda::wgmma_desc_sw128(a_tile + 32 * ks), cuda::wgmma_desc_sw128(b_tile + 32 * ks),
                                ks > 0 || !fresh);
    }
    cuda::wgmma_commit();
  };
  // The CTA's k tile i is multiplied: its stage goes back to the producer.
  auto release = [&](float (&part)[kF], uint32_t i) {
    cuda::wgmma_fence_operands(part);
    __syncwarp();
    if (lane == 0) cuda::mbarrier_arrive(smem_u32(&s_empty[i % kS]));
  };
  // The CTA's k tile i is multiplied: its stage goes back to the producer, and it is promoted.
  auto retire = [&](float (&part)[kF], uint32_t i, const TileScales& sc) {
    release(part, i);
    if constexpr (kBlock && kSorted) {
      // The MoE reference's order (Triton's), fma(partial * a_s, b_s, acc): bit-exact on integer
      // grids whatever the activation scales, which the fused layer's tolerances assume.
#pragma unroll
      for (int e = 0; e < kF; ++e) acc[e] = __fmaf_rn(__fmul_rn(part[e], (e % 4) < 2 ? sc.lo : sc.hi), sc.b, acc[e]);
    } else if constexpr (kBlock) {
      // DeepGEMM's order, one FMA an element: acc + partial * (a_s * b_s). The reference's
      // (partial * a_s) * b_s + acc differs by f32 rounding only (docs/numerics.md).
      const float s_lo = __fmul_rn(sc.lo, sc.b), s_hi = __fmul_rn(sc.hi, sc.b);
#pragma unroll
      for (int e = 0; e < kF; ++e) acc[e] = __fmaf_rn(part[e], (e % 4) < 2 ? s_lo : s_hi, acc[e]);
    } else {
#pragma unroll
      for (int e = 0; e < kF; ++e) acc[e] = __fadd_rn(acc[e], part[e]);
    }
  };
  // The CTA's tiles: every gridDim.x-th of the raster.
  uint32_t t = blockIdx.x;
  uint32_t it = 0;  // k tiles consumed so far, over all of this CTA's output tiles
  int parity = 0;   // which s_col buffer this tile uses
  TileScales sc0, sc1;
  // The tile computed last, and its epilogue's per-column and per-row values (loaded at the
  // tile's start, so that their latency hides behind the main loop): thread tid < kBN the scale
  // and the bias of column tid; each lane its two output rows (-1: none), their scales of a and,
  // sorted, their slots' routed weights.
  TileCoord c{0, 0};
  float col_scale = 0.0f, col_bias = 0.0f, row_scale[2] = {1.0f, 1.0f}, row_weight[2] = {1.0f, 1.0f};
  // The tile's column scale where one serves all its columns (sorted: the expert's; dense: a
  // per-tensor b_s): the TMA epilogue then reads s_col only for per-channel scales or a bias.
  float tile_scale_b = 1.0f;
  const bool per_column = !kSorted && (col_vector || bias != nullptr);
  int64_t out_row[2] = {-1, -1};
  int32_t slot_ahead[2] = {-1, -1};  // sorted: the slots of the next tile's rows (-1: past the rows in use)
  bool epilogue_due = false;
  // Stores tile c (its result in acc) by TMA, each warpgroup its 64 rows of the tile's kWgN
  // columns, 128 bytes of each row a round: every thread scales its fragment in registers (element
  // 4 j + {0, 1}: row lg, columns 8 j + 2 lt + {0, 1}; 4 j + {2, 3}: row lg + 8), rounds it to
  // the output type and writes it to the warpgroup's buffer in the 128-byte swizzle the map
  // reads (16-byte units XOR the row % 8, which also keeps the writes free of bank conflicts);
  // one thread then stores the box. The threads wait on shared memory only (the stores leave
  // by the TMA unit): the per-warp staging of the other epilogue (below), whose loads from
  // shared memory waited behind the tensor cores' and the TMA's traffic, took ~3,500 cycles a
  // tile on the H200.
  auto store_tile_tma = [&]() {
    constexpr int kRoundCols = 128 / int(sizeof(OutT)), kRoundJ = kRoundCols / 8;
    const int wg_tid = tid % 128;
    uint8_t* const box = reinterpret_cast<uint8_t*>(epi) + wg * (64 * 128);
    const uint32_t bar_id = 2 + uint32_t(wg);  // named barriers 2 and 3: one a warpgroup
#pragma unroll
    for (int round = 0; round < T::kWgN / kRoundCols; ++round) {
      if (wg_tid == 0) cuda::bulk_wait_group_read<0>();  // the last store has read the buffer
      asm volatile("bar.sync %0, 128;\n" ::"r"(bar_id) : "memory");
      // Output values of fragment column group j (8 columns): y[2 h + e] at row lg + 8 h,
      // column 8 j + 2 lt + e.
      auto scaled = [&](int j, float (&y)[4]) {
        const int col = wg_col0 + 8 * j + 2 * lt;
        const float uniform_b = kSorted ? tile_scale_b : col_scale0;
        float2 cs = make_float2(uniform_b, uniform_b), bs = make_float2(0.0f, 0.0f);
        if (per_column) {
          cs = *reinterpret_cast<const float2*>(&s_col[parity][0][col]);
          bs = *reinterpret_cast<const float2*>(&s_col[parity][1][col]);
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int h = r / 2;
          const float v = acc[4 * j + r], cv = r % 2 == 0 ? cs.x : cs.y, bv = r % 2 == 0 ? bs.x : bs.y;
          if constexpr (kSorted) {
            // The grouped GEMM's order (spec 1.10): routed weight first, then a's and b's scales.
            const float w = sorted.slot_weight != nullptr ? __fmul_rn(v, row_weight[h]) : v;
            y[r] = kBlock ? w : __fmul_rn(__fmul_rn(w, row_scale[h]), cv);
          } else {
            y[r] = kBlock ? __fadd_rn(v, bv) : __fmaf_rn(row_scale[h], __fmul_rn(cv, v), bv);
          }
        }
      };
      if constexpr (sizeof(OutT) == 2) {
        // Two column groups a stmatrix: its four 8 x 8 matrices are (rows 0-7 | 8-15 of the warp)
        // x (group jl | jl + 1), laid out as the fragment is; lane l addresses row l % 8 of
        // matrix l / 8.
        const int m_row = warp * 16 + lane % 8 + 8 * ((lane / 8) % 2), m_unit = lane / 16;
#pragma unroll
        for (int jl = 0; jl < kRoundJ; jl += 2) {
          float y0[4], y1[4];
          scaled(round * kRoundJ + jl, y0);
          scaled(round * kRoundJ + jl + 1, y1);
          const uint32_t dst = smem_u32(box + m_row * 128 + (((jl + m_unit) ^ (m_row % 8)) * 16));
          cuda::stmatrix_x4(dst, pack2<OutT>(y0[0], y0[1]), pack2<OutT>(y0[2], y0[3]), pack2<OutT>(y1[0], y1[1]),
                            pack2<OutT>(y1[2], y1[3]));
        }
      } else {
#pragma unroll
        for (int jl = 0; jl < kRoundJ; ++jl) {
          float y[4];
          scaled(round * kRoundJ + jl, y);
          const int byte = (8 * jl + 2 * lt) * 4;  // within the round's 128 bytes of a row
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = warp * 16 + lg + 8 * h;  // within the warpgroup's 64 rows
            *reinterpret_cast<float2*>(box + row * 128 + ((byte / 16) ^ (row % 8)) * 16 + byte % 16) =
                make_float2(y[2 * h], y[2 * h + 1]);
          }
        }
      }
      cuda::fence_proxy_async_shared();  // the writes, visible to the TMA unit
      asm volatile("bar.sync %0, 128;\n" ::"r"(bar_id) : "memory");
      if (wg_tid == 0) {
        cuda::tma_store_2d(&c_map, smem_u32(box), int32_t(c.n0 + wg_col0 + round * kRoundCols),
                           int32_t(c.m0 + wg * T::kWgRows));
        cuda::bulk_commit_group();
      }
    }
  };
  auto store_tile_threads = [&]() {

    // Epilogue, 32 columns at a time through this warp's staging buffer: the fragment goes to
    // shared memory as it lies (element 4 j + {0, 1}: row lg, columns 8 j + 2 lt + {0, 1};
    // 4 j + {2, 3}: row lg + 8), then each lane scales 8 consecutive outputs of one row and stores
    // them with one 16-byte store.
    float* const buf = epi + (tid / 32) * T::kEpiWarpFloats;
    {
#pragma unroll
      for (int q = 0; q < T::kWgN / 32; ++q) {
        __syncwarp();  // the previous chunk has been read
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          const int j = 4 * q + jj;
          *reinterpret_cast<float2*>(buf + lg * T::kEpiStride + 8 * jj + 2 * lt) = make_float2(acc[4 * j], acc[4 * j + 1]);
          *reinterpret_cast<float2*>(buf + (lg + 8) * T::kEpiStride + 8 * jj + 2 * lt) =
              make_float2(acc[4 * j + 2], acc[4 * j + 3]);
        }
        __syncwarp();
        const int c8 = wg_col0 + 32 * q + 8 * (lane % 4);  // this lane's 8 columns within the tile
        const int64_t col = c.n0 + c8;
        const int count = g.n - col < 8 ? int(g.n - col) : 8;
        const float4 cs_lo = *reinterpret_cast<const float4*>(&s_col[parity][0][c8]);
        const float4 cs_hi = *reinterpret_cast<const float4*>(&s_col[parity][0][c8 + 4]);
        const float4 b_lo = *reinterpret_cast<const float4*>(&s_col[parity][1][c8]);
        const float4 b_hi = *reinterpret_cast<const float4*>(&s_col[parity][1][c8 + 4]);
        const float cs[8] = {cs_lo.x, cs_lo.y, cs_lo.z, cs_lo.w, cs_hi.x, cs_hi.y, cs_hi.z, cs_hi.w};
        const float b[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = lane / 4 + 8 * h;
          if (out_row[h] < 0 || count <= 0) continue;
          const float4 lo = *reinterpret_cast<const float4*>(buf + r * T::kEpiStride + 8 * (lane % 4));
          const float4 hi = *reinterpret_cast<const float4*>(buf + r * T::kEpiStride + 8 * (lane % 4) + 4);
          const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
          float y[8];
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            if constexpr (kSorted) {
              // The grouped GEMM's order (spec 1.10): routed weight first, then a's and b's scales.
              const float w = sorted.slot_weight != nullptr ? __fmul_rn(v[e], row_weight[h]) : v[e];
              y[e] = kBlock ? w : __fmul_rn(__fmul_rn(w, row_scale[h]), cs[e]);
            } else {
              y[e] = kBlock ? __fadd_rn(v[e], b[e]) : __fmaf_rn(row_scale[h], __fmul_rn(cs[e], v[e]), b[e]);
            }
          }
          store8(out + out_row[h] * g.ldc + col, y, vec_ok && count == 8, count);
        }
      }
    }
  };
  // Stores tile c (its result in acc).
  auto store_tile = [&]() {
    if (!kTmaStore || per_column) {
      if (tid < T::kBN) {
        s_col[parity][0][tid] = col_scale;
        s_col[parity][1][tid] = col_bias;
      }
      // Named barrier 1 of the 256 consumer threads: s_col is written; every thread is past the
      // previous tile's epilogue, so the other buffer is free for the next tile.
      asm volatile("bar.sync 1, 256;\n" ::: "memory");
    }
    if constexpr (kTmaStore) {
      store_tile_tma();
    } else {
      store_tile_threads();
    }
    parity ^= 1;
  };
  // Makes tile `next` the current one and loads its epilogue's values.
  auto start_tile = [&](const TileCoord& next, int expert) {
    c = next;
#pragma unroll
    for (int i = 0; i < kF; ++i) acc[i] = 0.0f;
    col_scale = col_bias = 0.0f;
    if constexpr (kSorted) tile_scale_b = expert >= 0 ? g.scale_b[expert] : 0.0f;
    if (const int64_t col = c.n0 + tid; tid < T::kBN && col < g.n) {
      col_scale = kSorted ? (expert >= 0 ? g.scale_b[expert] : 0.0f) : col_vector ? g.scale_b[col] : col_scale0;
      if (bias != nullptr) col_bias = out_to_float(bias[col]);
    }
    const int64_t warp_row0 = c.m0 + wg * T::kWgRows + warp * 16;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_scale[h] = row_weight[h] = 1.0f;
      const int64_t row = warp_row0 + lane / 4 + 8 * h;
      if (!kBlock && row < g.m) row_scale[h] = g.scale_a[g.scale_a_kind == ScaleKind::kTensor ? 0 : row];
      out_row[h] = row < g.m ? row : -1;
      if constexpr (kSorted) {
        const int64_t slot = slot_ahead[h];
        const bool valid = slot >= 0 && slot < sorted.num_slots;
        if (sorted.slot_weight != nullptr && valid) row_weight[h] = sorted.slot_weight[slot];
      }
    }
  };
  // Sorted: loads the slots of tile `tile`'s rows (this thread's two) into slot_ahead, a tile
  // ahead of start_tile: there the routed weight's load depends on the slot, and waiting for that
  // chain between two tiles left the tensor cores idle (GEMM2's short K tiles felt it most).
  auto load_slots = [&](uint32_t tile, const SortedWindow& w) {
    if constexpr (kSorted) {
      const int64_t row0 = coord(tile, w).m0 + wg * T::kWgRows + warp * 16 + lg;
#pragma unroll
      for (int h = 0; h < 2; ++h) slot_ahead[h] = row0 + 8 * h < used_rows ? __ldg(sorted.slot_of_row + row0 + 8 * h) : -1;
    }
  };
  // Each turn queues k tile 0 of tile t into part0, stores the tile before it while the tensor
  // cores work (rather than leave them idle until the next main loop), then computes tile t.
  // The two branches keep part0 out of any control-flow merge while it is in flight (ptxas
  // otherwise waits for the wgmma there).
  SortedWindow window = t < num_tiles ? window_of(t) : SortedWindow{};  // sorted: tile t's, loaded a tile ahead
  if (t < num_tiles) load_slots(t, window);
  for (; t < num_tiles; t += gridDim.x) {
    const TileCoord next = coord(t, window);
    const int expert = expert_of(window);
    if (kSorted && expert < 0) {  // another rank's expert: zeros
      if (t + gridDim.x < num_tiles) window = window_of(t + gridDim.x);
      if (epilogue_due) store_tile();
      start_tile(next, expert);
    } else if constexpr (kAccIsFragment) {
      // acc is busy until the tile is stored: store first, then the whole K into acc.
      const float* const sb_col = tile_sb(next, expert);
      if (t + gridDim.x < num_tiles) window = window_of(t + gridDim.x);
      if (epilogue_due) store_tile();
      start_tile(next, expert);
      issue(acc, it, sb_col, 0, sc0);
      for (int kt = 1; kt < num_k_tiles; ++kt) {
        issue(acc, it + kt, sb_col, kt, sc0, false);
        cuda::wgmma_wait<1>();
        release(acc, it + kt - 1);
      }
      cuda::wgmma_wait<0>();
      release(acc, it + num_k_tiles - 1);
      it += uint32_t(num_k_tiles);
    } else {
      const float* const sb_col = tile_sb(next, expert);
      issue(part0, it, sb_col, 0, sc0);
      if (t + gridDim.x < num_tiles) window = window_of(t + gridDim.x);
      if (epilogue_due) store_tile();
      start_tile(next, expert);
      if constexpr (kFastAccum) {
        // The whole K accumulates in part0 (in the tensor cores), which then becomes the result.
        for (int kt = 1; kt < num_k_tiles; ++kt) {
          issue(part0, it + kt, sb_col, kt, sc0, false);
          cuda::wgmma_wait<1>();
          release(part0, it + kt - 1);
        }
        cuda::wgmma_wait<0>();
        release(part0, it + num_k_tiles - 1);
#pragma unroll
        for (int e = 0; e < kF; ++e) acc[e] = part0[e];
      } else {
        // Two fragments take turns, so that the tensor cores multiply k tile kt while kt - 1 is
        // promoted; each fragment keeps one role per step (ptxas then keeps the wgmmas asynchronous).
        int kt = 1;
        for (; kt + 1 < num_k_tiles; kt += 2) {
          issue(part1, it + kt, sb_col, kt, sc1);
          cuda::wgmma_wait<1>();
          retire(part0, it + kt - 1, sc0);
          issue(part0, it + kt + 1, sb_col, kt + 1, sc0);
          cuda::wgmma_wait<1>();
          retire(part1, it + kt, sc1);
        }
        if (kt < num_k_tiles) {
          issue(part1, it + kt, sb_col, kt, sc1);
          cuda::wgmma_wait<1>();
          retire(part0, it + kt - 1, sc0);
          cuda::wgmma_wait<0>();
          retire(part1, it + kt, sc1);
        } else {
          cuda::wgmma_wait<0>();
          retire(part0, it + kt - 1, sc0);
        }
      }
      it += uint32_t(num_k_tiles);
    }
    if (t + gridDim.x < num_tiles) load_slots(t + gridDim.x, window);  // window is that tile's by now
    epilogue_due = true;
  }
  if (epilogue_due) store_tile();
  if (kTmaStore && tid % 128 == 0) cuda::bulk_wait_all();  // the buffers stay until the stores are done
#else
  __trap();  // the launchers' checks keep other targets away
#endif
}


}  // namespace fp8kit::ops::sm90_gemm
