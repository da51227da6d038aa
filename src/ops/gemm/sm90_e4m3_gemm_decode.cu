// sm90_e4m3_gemm_decode: scaled_mm for M <= 64 (decode) as one stream over the weights, every
// scaling of ScaledMmArgs (block scales with 128-wide K blocks), on Hopper's warpgroup MMA
// (sm_90a). Reference: gemm_ref.cpp (same K-block promotion and epilogue order). Tests:
// tests/gpu/test_gemm_cuda.cpp (FP8KIT_GEMM_BACKEND=decode); bench: bench_gemm --m 1,16,64.
// Floor: weight bytes / ~4.3 TB/s (copy ceiling), e.g. 6144 x 4096: 5.9 us; 57344 x 8192: 110 us;
// activations, scales and output add under 1% at M <= 16.
//
// Orientation ("swap AB", as the fused MoE's decode GEMM, grouped_gemm_sm90_wgmma.cu): the weight
// rows are wgmma's M (64 a CTA, one consumer warpgroup) and the tokens its N (a token tile of 8,
// 16, 32 or 64, decode_token_tile), so a few tokens waste no weight bandwidth. Both operands reach
// shared memory by TMA in 128-byte K tiles (128 e4m3 values; rows past M and K read as zeros) in
// the 128-byte swizzle wgmma reads, kStages deep: one producer thread arms a stage's "full"
// mbarrier with the stage's bytes and issues the two loads; the consumer warpgroup waits on it,
// multiplies the tile into a fresh f32 fragment (two fragments take turns, so that the tensor cores
// work on tile kt while tile kt - 1 is promoted) and gives the stage back on its "empty" mbarrier.
// The promotion every 128 of K keeps the tensor cores' own FP8 accumulation short (DeepSeek-V3's
// and DeepGEMM's reason) and carries block scales. Token tiles of 8 and 16 read those into
// registers a tile ahead; with 32 and 64 tokens that load latency held the promotion up (block
// 1.29x and 1.50x the per-tensor time, geometric means over the bench shapes), so there the
// producer warp's lanes copy each K tile's scales into its stage (cp.async, arriving on the
// stage's barrier) and the promotion reads them from shared memory (1.16x and 1.22x; at M = 1 and
// 16 this measured slower, 1.17x and 1.23x against 1.05x and 1.10x).
//
// Persistent: kDecodeCtasPerSm CTAs a multiprocessor walk the (64-row tile, K split) items of
// plan_decode_gemm, the stage ring running on across items, so that the next item's weights load
// while the last one's results are stored. Launched with programmatic dependent launch: the first
// item's first weight tiles are requested before the wait for the kernel that wrote a (the
// activation quantization). With one split the kernel applies the epilogue and writes y; otherwise
// it writes f32 partials [split, M, N] that sm90_e4m3_gemm_decode_reduce sums in split order
// (deterministic, no atomics) before the epilogue.
//
// Epilogue (the reference's order, every step an explicit f32 rounding):
//   per-tensor / per-row: acc = sum of the promoted tiles; y = fma(sa[i], sb[j] * acc, bias[j])
//   block:                acc += (partial_kb * sa[i, kb]) * sb[j / bn, kb] per K tile; y = acc + bias[j]
#include "ops/gemm/sm90_e4m3_gemm_decode.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda/async_copy.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_attributes.h"
#include "core/cuda/pdl.cuh"
#include "core/cuda/tensor_map.h"
#include "core/cuda/wgmma.cuh"
#include "core/cuda/wgmma_pipeline.cuh"
#include "fp8kit/half.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {
namespace {

using cuda::smem_u32;

template <int kBT_, bool kBlock>
struct DecodeTraits {
  static constexpr int kBT = kBT_;                   // tokens: wgmma's N
  static constexpr int kRowsW = int(kDecodeTileN);  // weight rows: wgmma's M, one warpgroup
  static constexpr int kBK = int(kDecodeChunkK);
  static constexpr int kWeightBytes = kRowsW * kBK, kTokenBytes = kBT * kBK;
  static constexpr int kStageBytes = kWeightBytes + kTokenBytes;  // both multiples of 1024
  // As many stages as fit the shared memory of one of kDecodeCtasPerSm CTAs a multiprocessor (227 KB
  // a CTA at most; 228 KB a multiprocessor, less 1 KB a CTA for the system), less the alignment
  // slack, with each stage's two mbarriers (and block scales) in static shared memory: 12, 11, 9
  // and 6 for 8, 16, 32 and 64 tokens (12, 10, 9, 6 with block scales). Measured on the H200, one
  // CTA a multiprocessor with twice the stages (also with two consumer warpgroups taking turns)
  // streamed no faster on small weights and slower on large ones (block scales 0.62-0.87x).
  // Block scales: 8 and 16 tokens read them into registers a tile ahead; 32 and 64 tokens (whose
  // promotion waited for those loads) get them in shared memory with each stage.
  static constexpr bool kScalesInStage = kBlock && kBT >= 32;
  static constexpr int kScaleBytes = kScalesInStage ? (kBT + kRowsW) * 4 : 0;
  static constexpr int kCtaBudget = 228 * 1024 / kDecodeCtasPerSm - 1024 < 227 * 1024 ? 228 * 1024 / kDecodeCtasPerSm - 1024
                                                                                    : 227 * 1024;
  static constexpr int kStages = (kCtaBudget - 1024 - 64) / (kStageBytes + 16 + kScaleBytes);
  static constexpr int kConsumers = 128;            // one consumer warpgroup
  static constexpr int kThreads = kConsumers + 32;  // + the producer warp
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + alignment slack
  static constexpr int kFrag = kBT / 2;                            // f32 accumulators a thread
  static_assert(kBT == 8 || kBT == 16 || kBT == 32 || kBT == 64, "wgmma N");
  static_assert(kStageBytes % 1024 == 0 && kWeightBytes % 1024 == 0, "swizzled tiles need 1024-byte alignment");
  static_assert(kSmemBytes + kStages * (16 + kScaleBytes) + 64 <= kCtaBudget, "kDecodeCtasPerSm CTAs a multiprocessor");
};

struct DecodeLaunch {
  int64_t n_tiles = 0, items = 0;
  int chunks = 0, chunks_per_split = 0, splits = 1;
  float* workspace = nullptr;  // [splits, M, N] when splits > 1
};

__device__ __forceinline__ float load_bias(const ScaledMmArgs& a, int64_t j) {
  if (a.bias == nullptr) return 0.0f;
  switch (a.out_dtype) {
    case DType::kBF16: return bf16_to_float(static_cast<const BFloat16*>(a.bias)[j]);
    case DType::kF16: return f16_to_float(static_cast<const Float16*>(a.bias)[j]);
    default: return static_cast<const float*>(a.bias)[j];
  }
}

__device__ __forceinline__ float row_scale(const float* s, ScaleKind kind, int64_t index) {
  return kind == ScaleKind::kTensor ? s[0] : s[index];
}

// y = epilogue(acc) stored at (i, j): the reference's order, rounding step for rounding step
// (block scales are already in acc).
__device__ __forceinline__ void store_y(const ScaledMmArgs& a, int64_t i, int64_t j, float acc, float sa, float sb,
                                        float bias) {
  const float y = a.scale_a_kind == ScaleKind::kBlock ? __fadd_rn(acc, bias) : __fmaf_rn(sa, __fmul_rn(sb, acc), bias);
  switch (a.out_dtype) {
    case DType::kBF16: static_cast<BFloat16*>(a.out)[i * a.ldc + j] = float_to_bf16(y); break;
    case DType::kF16: static_cast<Float16*>(a.out)[i * a.ldc + j] = float_to_f16(y); break;
    default: static_cast<float*>(a.out)[i * a.ldc + j] = y; break;
  }
}

template <int kBT, bool kBlock>
__global__ void __launch_bounds__(DecodeTraits<kBT, kBlock>::kThreads, kDecodeCtasPerSm)
    sm90_e4m3_gemm_decode_kernel(const ScaledMmArgs args, const DecodeLaunch launch,
                                 const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap x_map) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = DecodeTraits<kBT, kBlock>;
  constexpr int kS = T::kStages, kFrag = T::kFrag;
  extern __shared__ uint8_t smem_raw[];
  // [stage]{weights 64 x 128 B, tokens kBT x 128 B}, swizzled, 1024-byte aligned.
  uint8_t* smem = smem_raw + ((1024 - smem_u32(smem_raw) % 1024) % 1024);
  const uint32_t smem_base = smem_u32(smem);
  __shared__ alignas(8) uint64_t s_full[kS], s_empty[kS];
  // Block scales of each stage's K tile (kScalesInStage): sa of its tokens, sb of its weight rows.
  constexpr bool kScalesInStage = T::kScalesInStage;
  __shared__ alignas(16) float s_sa[kScalesInStage ? kS : 1][kBT];
  __shared__ alignas(16) float s_sb[kScalesInStage ? kS : 1][T::kRowsW];

  const int tid = int(threadIdx.x);
  if (tid == 0) {
    for (int s = 0; s < kS; ++s) {
      // The producer's arrival with the TMA bytes (+ block: each producer lane's scale copies).
      cuda::mbarrier_init(smem_u32(&s_full[s]), kScalesInStage ? 33 : 1);
      cuda::mbarrier_init(smem_u32(&s_empty[s]), 4);  // one arrival per consumer warp
    }
  }
  __syncthreads();

  struct Item {
    int64_t n0;
    int split, kt0, num_k_tiles;
  };
  auto item_at = [&](int64_t lin) {
    Item t;
    t.split = int(lin / launch.n_tiles);
    t.n0 = (lin % launch.n_tiles) * T::kRowsW;
    t.kt0 = t.split * launch.chunks_per_split;
    t.num_k_tiles = min(launch.chunks - t.kt0, launch.chunks_per_split);  // >= 1: the plan has no empty split
    return t;
  };

  if (tid >= T::kConsumers) {
    // The producer warp: lane 0 issues the TMA loads; with block scales every lane also copies
    // two weight rows' and up to two tokens' scales of each K tile (cp.async, arriving on the
    // stage's barrier), so that the consumers read them from shared memory. The weights are
    // constant, so the first item's first kEarly weight tiles are requested before the wait for
    // the kernel before this one; the token tiles and their scales (written by that kernel) only
    // after it.
    const int lane = tid - T::kConsumers;
    if (!kScalesInStage && lane != 0) return;
    if (lane == 0) {
      cuda::tma_prefetch_descriptor(&w_map);
      cuda::tma_prefetch_descriptor(&x_map);
    }
    constexpr int kEarly = 2;
    int early = 0;
    if (int64_t(blockIdx.x) < launch.items) {
      const Item t = item_at(blockIdx.x);
      early = min(t.num_k_tiles, kEarly);
      for (int kt = 0; kt < early && lane == 0; ++kt) {
        const uint32_t full = smem_u32(&s_full[kt]);
        cuda::mbarrier_arrive_expect_tx(full, T::kStageBytes);
        cuda::tma_load_3d(smem_base + kt * T::kStageBytes, &w_map, (t.kt0 + kt) * T::kBK, int32_t(t.n0), 0, full);
      }
    }
    cuda::pdl_wait();
    cuda::pdl_allow_dependents();
    // Block: this lane's tokens lane and lane + 32 (their sa rows; null past M).
    const float* sa_row[2] = {nullptr, nullptr};
    if constexpr (kScalesInStage) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t token = lane + 32 * h;
        if (token < kBT && token < args.m) sa_row[h] = args.scale_a + token * args.sa_row_stride;
      }
    }
    uint32_t it = 0;  // K tiles loaded so far, into stage it % kS
    for (int64_t lin = blockIdx.x; lin < launch.items; lin += gridDim.x) {
      const Item t = item_at(lin);
      // Block: this lane's weight rows n0 + lane and n0 + lane + 32 (their sb rows; null past N).
      const float* sb_row[2] = {nullptr, nullptr};
      if constexpr (kScalesInStage) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t row = t.n0 + lane + 32 * h;
          if (row < args.n) sb_row[h] = args.scale_b + (row / args.block_n) * args.sb_row_stride;
        }
      }
      for (int kt = 0; kt < t.num_k_tiles; ++kt, ++it) {
        const uint32_t stage = it % kS;
        if (it >= uint32_t(kS)) cuda::mbarrier_wait(smem_u32(&s_empty[stage]), (it / kS - 1) & 1u);
        const uint32_t full = smem_u32(&s_full[stage]), sw = smem_base + stage * T::kStageBytes;
        const int32_t k0 = (t.kt0 + kt) * T::kBK;
        if (lane == 0) {
          if (it >= uint32_t(early)) {
            cuda::mbarrier_arrive_expect_tx(full, T::kStageBytes);
            cuda::tma_load_3d(sw, &w_map, k0, int32_t(t.n0), 0, full);
          }
          cuda::tma_load_3d(sw + T::kWeightBytes, &x_map, k0, 0, 0, full);
        }
        if constexpr (kScalesInStage) {
          const int64_t kb = t.kt0 + kt;  // block_k == the K tile
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if (lane + 32 * h < kBT) {
              const bool ok = sa_row[h] != nullptr;
              cuda::cp_async4(smem_u32(&s_sa[stage][lane + 32 * h]), ok ? sa_row[h] + kb * args.sa_group_stride : args.scale_a,
                              ok);
            }
            const bool ok = sb_row[h] != nullptr;
            cuda::cp_async4(smem_u32(&s_sb[stage][lane + 32 * h]), ok ? sb_row[h] + kb * args.sb_group_stride : args.scale_b,
                            ok);
          }
          cuda::cp_async_mbarrier_arrive(full);
        }
      }
    }
    if constexpr (kScalesInStage) cuda::cp_async_wait_all();  // no copy outlives the warp
    return;
  }

  // The consumer warpgroup.
  cuda::pdl_wait();  // before the scales, the bias and the stores
  cuda::pdl_allow_dependents();
  const int warp = tid / 32, lane = tid % 32, lg = lane / 4, lt = lane % 4;
  const int64_t m = args.m, n = args.n;
  uint32_t it = 0;  // K tiles of the items before this one, stage (it + kt) % kS for tile kt
  for (int64_t lin = blockIdx.x; lin < launch.items; lin += gridDim.x) {
    const Item t = item_at(lin);
    // This thread's weight rows (output columns) and token columns of the fragment.
    const int64_t row_lo = t.n0 + warp * 16 + lg, row_hi = row_lo + 8;

    // The epilogue's scales and bias, read now so that their latency passes during the K loop
    // (without a split the epilogue is this kernel's last step).
    float e_sa[kBT / 4], e_sb[2] = {1.0f, 1.0f}, e_bias[2] = {0.0f, 0.0f};
#pragma unroll
    for (int q = 0; q < kBT / 4; ++q) {
      const int64_t token = 8 * (q / 2) + 2 * lt + q % 2;
      e_sa[q] = !kBlock && token < m ? row_scale(args.scale_a, args.scale_a_kind, token) : 1.0f;
    }
    if (launch.splits == 1) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = h == 0 ? row_lo : row_hi;
        if (row < n) {
          if constexpr (!kBlock) e_sb[h] = row_scale(args.scale_b, args.scale_b_kind, row);
          e_bias[h] = load_bias(args, row);
        }
      }
    }

    // Block scales of tile kt read into registers a tile ahead (!kScalesInStage): sb of the two
    // rows, sa of the thread's kBT / 4 tokens (zero past M and N: those products are zero and
    // never stored).
    struct TileScales {
      float lo = 1.0f, hi = 1.0f;
      float a[kBlock && !kScalesInStage ? kBT / 4 : 1];
    };
    const float* sb_lo = nullptr;
    const float* sb_hi = nullptr;
    if constexpr (kBlock && !kScalesInStage) {
      if (row_lo < n) sb_lo = args.scale_b + (row_lo / args.block_n) * args.sb_row_stride;
      if (row_hi < n) sb_hi = args.scale_b + (row_hi / args.block_n) * args.sb_row_stride;
    }
    auto tile_scales = [&](int kt) {
      TileScales r;
      if constexpr (kBlock && !kScalesInStage) {
        const int64_t kb = t.kt0 + kt;
        r.lo = sb_lo != nullptr ? __ldg(sb_lo + kb * args.sb_group_stride) : 0.0f;
        r.hi = sb_hi != nullptr ? __ldg(sb_hi + kb * args.sb_group_stride) : 0.0f;
#pragma unroll
        for (int q = 0; q < kBT / 4; ++q) {
          const int64_t token = 8 * (q / 2) + 2 * lt + q % 2;
          r.a[q] = token < m ? __ldg(args.scale_a + token * args.sa_row_stride + kb * args.sa_group_stride) : 0.0f;
        }
      }
      return r;
    };

    float acc[kFrag], part0[kFrag], part1[kFrag];
#pragma unroll
    for (int i = 0; i < kFrag; ++i) acc[i] = part0[i] = part1[i] = 0.0f;

    // Waits for tile kt and queues its product into `part`.
    auto issue = [&](float (&part)[kFrag], int kt) {
      const uint32_t q = it + uint32_t(kt), stage = q % kS;
      cuda::mbarrier_wait(smem_u32(&s_full[stage]), (q / kS) & 1u);
      const uint32_t sw = smem_base + stage * T::kStageBytes, st = sw + T::kWeightBytes;
      cuda::wgmma_fence_operands(part);
      cuda::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < T::kBK / 32; ++ks) {
        cuda::wgmma_e4m3<kBT>(part, cuda::wgmma_desc_sw128(sw + 32 * ks), cuda::wgmma_desc_sw128(st + 32 * ks), ks > 0);
      }
      cuda::wgmma_commit();
    };
    // Tile kt's product is complete: promote it into acc, then give the stage back.
    auto retire = [&](float (&part)[kFrag], int kt, const TileScales& ts) {
      const uint32_t stage = (it + uint32_t(kt)) % kS;
      cuda::wgmma_fence_operands(part);
      if constexpr (kBlock) {
        // Element 4 j + e: row lo (e < 2) or hi, token 8 j + 2 lt + e % 2.
        const float sb_lo = kScalesInStage ? s_sb[stage][warp * 16 + lg] : ts.lo;
        const float sb_hi = kScalesInStage ? s_sb[stage][warp * 16 + lg + 8] : ts.hi;
#pragma unroll
        for (int j = 0; j < kBT / 8; ++j) {
          float2 sa;
          if constexpr (kScalesInStage) {
            sa = *reinterpret_cast<const float2*>(&s_sa[stage][8 * j + 2 * lt]);
          } else {
            sa = make_float2(ts.a[2 * j], ts.a[2 * j + 1]);
          }
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float sb = e < 2 ? sb_lo : sb_hi;
            acc[4 * j + e] = __fadd_rn(acc[4 * j + e], __fmul_rn(__fmul_rn(part[4 * j + e], e % 2 ? sa.y : sa.x), sb));
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < kFrag; ++i) acc[i] = __fadd_rn(acc[i], part[i]);
      }
      __syncwarp();  // the warp is done with the stage
      if (lane == 0) cuda::mbarrier_arrive(smem_u32(&s_empty[stage]));
    };

    const int num_k_tiles = t.num_k_tiles;
    cuda::promoted_k_loop(num_k_tiles, part0, part1, tile_scales, issue, retire);
    it += uint32_t(num_k_tiles);

    // acc[4 j + e] is (row lo (e < 2) or hi, token 8 j + 2 lt + e % 2). The outputs are M x N,
    // a few hundred kilobytes at most: plain stores, straight from the fragment.
    float* const partials = launch.splits > 1 ? launch.workspace + int64_t(t.split) * m * n : nullptr;
#pragma unroll
    for (int j = 0; j < kBT / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = e < 2 ? row_lo : row_hi, token = 8 * j + 2 * lt + e % 2;
        if (token < m && row < n) {
          if (partials != nullptr) {
            partials[token * n + row] = acc[4 * j + e];
          } else {
            store_y(args, token, row, acc[4 * j + e], e_sa[2 * j + e % 2], e_sb[e / 2], e_bias[e / 2]);
          }
        }
      }
    }
  }
#else
  __trap();  // decode_rejects() keeps other targets away
#endif
}

// y = epilogue(sum of the splits' partials in split order).
__global__ void sm90_e4m3_gemm_decode_reduce(const ScaledMmArgs args, const float* workspace, int splits) {
  const int64_t total = args.m * args.n, stride = int64_t(gridDim.x) * blockDim.x;
  const bool block = args.scale_a_kind == ScaleKind::kBlock;
  auto inputs = [&](int64_t e, float& sa, float& sb, float& bias) {
    const int64_t i = e / args.n, j = e % args.n;
    sa = block ? 1.0f : row_scale(args.scale_a, args.scale_a_kind, i);
    sb = block ? 1.0f : row_scale(args.scale_b, args.scale_b_kind, j);
    bias = load_bias(args, j);
  };
  // The first element's scales and bias before the wait: whatever wrote them (the activation
  // quantization) finished before the GEMM kernel let this one start (core/cuda/pdl.cuh).
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  float sa = 1.0f, sb = 1.0f, bias = 0.0f;
  if (e < total) inputs(e, sa, sb, bias);
  cuda::pdl_wait();
  cuda::pdl_allow_dependents();
  for (bool first = true; e < total; e += stride, first = false) {
    if (!first) inputs(e, sa, sb, bias);
    // Eight splits' loads at a time, then their sums in split order (a loop over the splits
    // one load at a time waited for each: ~4 us for 6144 outputs of 8 splits).
    float acc = workspace[e];
    for (int s0 = 1; s0 < splits; s0 += 8) {
      float w[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) w[q] = s0 + q < splits ? workspace[(s0 + q) * total + e] : 0.0f;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        if (s0 + q < splits) acc = __fadd_rn(acc, w[q]);
      }
    }
    store_y(args, e / args.n, e % args.n, acc, sa, sb, bias);
  }
}

template <int kBT, bool kBlock>
void launch_kernel(const ScaledMmArgs& args, const DecodeGemmPlan& plan, const DecodeLaunch& launch, cudaStream_t s) {
  using T = DecodeTraits<kBT, kBlock>;
  constexpr auto kernel = sm90_e4m3_gemm_decode_kernel<kBT, kBlock>;
  cuda::allow_dynamic_smem<kernel>(T::kSmemBytes);
  // b [N, K] and a [M, K] as bytes, read in 64 x 128 and kBT x 128 boxes (rows past M are zeros).
  const CUtensorMap w_map = cuda::make_tensor_map_3d_u8_sw128(args.b, uint64_t(args.k), uint64_t(args.n), 1,
                                                              uint64_t(args.ldb), uint64_t(args.ldb) * uint64_t(args.n),
                                                              T::kBK, T::kRowsW);
  const CUtensorMap x_map = cuda::make_tensor_map_3d_u8_sw128(args.a, uint64_t(args.k), uint64_t(args.m), 1,
                                                              uint64_t(args.lda), uint64_t(args.lda) * uint64_t(args.m),
                                                              T::kBK, T::kBT);
  cuda::launch_pdl(kernel, unsigned(plan.ctas), T::kThreads, T::kSmemBytes, s, args, launch, w_map, x_map);
  FP8KIT_CHECK_LAUNCH(s, "sm90_e4m3_gemm_decode_kernel");
}

template <int kBT>
void launch_tokens(const ScaledMmArgs& args, const DecodeGemmPlan& plan, const DecodeLaunch& launch, cudaStream_t s) {
  if (args.scale_a_kind == ScaleKind::kBlock) {
    launch_kernel<kBT, true>(args, plan, launch, s);
  } else {
    launch_kernel<kBT, false>(args, plan, launch, s);
  }
}

}  // namespace

void sm90_e4m3_gemm_decode(const ScaledMmArgs& args, const DecodeGemmPlan& plan, cudaStream_t stream) {
  if (args.m <= 0 || args.n <= 0) return;
  DecodeLaunch launch;
  launch.n_tiles = plan.n_tiles;
  launch.items = plan.n_tiles * plan.splits;
  launch.chunks = int(plan.chunks);
  launch.chunks_per_split = int(plan.chunks_per_split);
  launch.splits = int(plan.splits);
  Tensor workspace;
  if (plan.splits > 1) {
    int device = 0;
    FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
    workspace = Tensor::empty({plan.splits, args.m, args.n}, DType::kF32, Device::cuda(device));
    launch.workspace = static_cast<float*>(workspace.data_ptr());
  }
  switch (plan.token_tile) {
    case 8: launch_tokens<8>(args, plan, launch, stream); break;
    case 16: launch_tokens<16>(args, plan, launch, stream); break;
    case 32: launch_tokens<32>(args, plan, launch, stream); break;
    default: launch_tokens<64>(args, plan, launch, stream); break;
  }
  if (plan.splits > 1) {
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((args.m * args.n + threads - 1) / threads, 4096);
    cuda::launch_pdl(sm90_e4m3_gemm_decode_reduce, unsigned(blocks), threads, 0, stream, args,
                     static_cast<const float*>(launch.workspace), launch.splits);
    FP8KIT_CHECK_LAUNCH(stream, "sm90_e4m3_gemm_decode_reduce");
  }
}

}  // namespace fp8kit::ops
