// grouped_gemm_sm90_wgmma: the fused MoE's grouped FP8 GEMM (vLLM's Triton fused_moe_kernel, spec
// 1.10) on Hopper's warpgroup MMA (wgmma.mma_async m64nNk32 e4m3, sm_90a only).
// Reference: expert_gemm_ref (fused_experts_gemm_ref.cpp), same K-block promotion and epilogue
// order as grouped_gemm_sm90_e4m3.cu; the products of one 128-wide K tile are summed by the
// tensor cores with fewer bits than f32 (tests/gpu/test_grouped_gemm_cuda.cpp bounds and measures it).
// Tests: tests/gpu/test_grouped_gemm_cuda.cpp, tests/gpu/test_fused_experts_cuda.cpp; bench:
// bench/bench_moe.cpp (the layer and GEMM1 alone).
// Floor: decode, the touched experts' weight bytes over ~4.3 TB/s; prefill, 2 * slots * n * k
// FLOP over the dense FP8 wgmma rate (~1,500 TFLOP/s measured by cuBLASLt on the H200).
//
// Orientation ("swap AB"): the expert's weight rows are wgmma's M (64 per warpgroup) and the
// tokens of one moe_align block are its N (kBT = block_m = 16, 64 or 128), so a decode block of a
// few tokens wastes no weight bandwidth and little tensor-core time. CTA = kWG consumer
// warpgroups (64 * kWG weight rows x kBT sorted positions of one expert) + one producer warpgroup.
// Persistent: as many CTAs as are resident at once walk the tiles of the blocks in use (read from
// num_post_pad), and the stage ring runs on across tiles, so the producer loads the next tile while
// the consumers store the last (a decode GEMM2's tile is only a few K tiles: Qwen3-30B-A3B's 6).
// Launched with programmatic dependent launch (core/cuda/pdl.cuh): the first tile's first two weight
// tiles go out while the kernel before (the quantization or the activation) is still running.
//
// K goes through shared memory in 128-byte tiles (128 e4m3 values), kStages deep, in the
// 128-byte swizzle wgmma reads (core/cuda/wgmma.cuh). The producer warpgroup loads each stage: the
// weight tile by one TMA load (3-D map [E, n, k], zero past n and k), the gathered token rows by
// cp.async (16 B, zero-filled for padding positions and past k); the stage's "full" mbarrier
// completes when both have landed. Each consumer warpgroup waits on it, multiplies the tile into a
// fresh f32 fragment, promotes it into its f32 result (DeepGEMM's scheme: the tensor cores keep
// fewer bits while they add FP8 products; the promotion also carries block scales) and arrives on
// the stage's "empty" mbarrier, which the producer waits on before it refills the stage. No
// __syncthreads in the K loop: the warpgroups and the producer run decoupled, and each consumer
// keeps the next tile's product in flight while it promotes the last (two fragments; per-tensor
// 128-token tiles have registers for one). With block scales and two consumer warpgroups the
// producer gives its registers to them (setmaxnreg 40 / 232: a 128-token tile's result and two
// fragments are 192 floats a thread); per-tensor measured slower with that split.
//
// The epilogue goes through a small staging buffer per warp (token-major, the output's order)
// and stores 16 bytes a lane; unrolled over the fragment it made the kernel larger than the
// instruction cache (the same cost measured on the dense wgmma GEMM, docs/PERFORMANCE.md).
//
// Epilogue (the reference's order, every step an explicit f32 rounding):
//   per-tensor: acc (f32, sum of tiles); acc *= w[slot] if routed; acc = (acc * a_scale) * b_scale[e]
//   block:      acc = fma(partial_kt * a_s[row, kb], b_s[e, n / bn, kb], acc) per 128-wide K tile kt of K
//               block kb (the reference's per-block order for 128-wide blocks; a wider block is
//               promoted tile by tile with its scales); acc *= w[slot]
// then rounded to the output dtype and stored at row `slot`. Expert -1 stores zeros.
//
// Split K (decode, block_m 16, GroupedGemmArgs::k_splits): the tiles repeat per split, each tile
// promotes only its split's K tiles and stores its epilogue's f32 values as partial sums; moe_sum
// adds them in split order. A few token blocks over a long K (Mixtral-8x7B's GEMM2 at M = 1: 128
// CTAs for 132 multiprocessors) otherwise leave most of the GPU's load slots empty.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/cuda/async_copy.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_attributes.h"
#include "core/cuda/pdl.cuh"
#include "core/cuda/tensor_map.h"
#include "core/cuda/wgmma.cuh"
#include "core/cuda/wgmma_pipeline.cuh"
#include "fp8kit/half.h"
#include "ops/moe/grouped_gemm_cuda.h"

namespace fp8kit::ops {
namespace {

using cuda::swizzle_128b_offset;

template <int kWG_, int kBT_, bool kBlock_>
struct WgmmaTraits {
  static constexpr int kWG = kWG_, kBT = kBT_;
  static constexpr int kConsumers = 128 * kWG, kThreads = kConsumers + 128;  // + the producer warpgroup
  static constexpr int kRowsW = 64 * kWG, kBK = 128;
  static constexpr int kWeightBytes = kRowsW * kBK, kTokenBytes = kBT * kBK;
  static constexpr int kStageBytes = kWeightBytes + kTokenBytes;  // both multiples of 1024
  // Decode tiles (10 KB): 8 stages, two CTAs a multiprocessor. Larger tiles: 5-6 stages
  // (per-tensor), up to 192 KB (block scales, measured faster with the deeper pipeline).
  static constexpr int kStages = kStageBytes <= 12 * 1024 ? 8
                                 : kBlock_                 ? (192 * 1024 / kStageBytes < 8 ? 192 * 1024 / kStageBytes : 8)
                                                           : (kStageBytes <= 24 * 1024 ? 6 : 5);
  // Epilogue staging, per consumer warp: its 16 weight rows for kChunk token positions, stored
  // token-major (the output's order), rows padded to 20 floats.
  static constexpr int kChunk = kBT < 32 ? kBT : 32, kEpiStride = 20;
  static constexpr int kEpiWarpFloats = kChunk * kEpiStride, kEpiBytes = 4 * kWG * kEpiWarpFloats * 4;
  static constexpr int kSmemBytes = kStages * kStageBytes + kEpiBytes + 1024;  // + alignment slack
  static constexpr int kFrag = kBT / 2;                                         // f32 accumulators a thread
  // Block-scaled tiles of two warpgroups take the producer's registers (setmaxnreg 40 / 232) and
  // keep a second fragment in flight. Measured on the H200: per-tensor 128-token tiles ran 7-15%
  // slower with the register split (with or without the second fragment), so they keep the even
  // split (168 registers) and one fragment.
  static constexpr bool kRegSplit = kWG == 2 && kBlock_;
  static constexpr bool kTwoFragments = kBT < 128 || kRegSplit;
  static_assert(kBT == 16 || kBT == 64 || kBT == 128, "wgmma N");
  static_assert(kStageBytes % 1024 == 0 && kWeightBytes % 1024 == 0, "swizzled tiles need 1024-byte alignment");
};

constexpr int64_t kRasterGroup = 8;

using cuda::smem_u32;

__device__ __forceinline__ void store_one(const GroupedGemmArgs& g, int64_t row, int64_t n, float v) {
  const int64_t i = row * g.ldc + n;
  switch (g.c_dtype) {
    case DType::kBF16: static_cast<BFloat16*>(g.c)[i] = float_to_bf16(v); break;
    case DType::kF16: static_cast<Float16*>(g.c)[i] = float_to_f16(v); break;
    default: static_cast<float*>(g.c)[i] = v; break;
  }
}

// Round to nearest even, as float_to_bf16 / float_to_f16, two values in one instruction.
__device__ __forceinline__ uint32_t pack2(DType dtype, float lo, float hi) {
  if (dtype == DType::kBF16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Stores y[0..16) at (row, n .. n + 16) with 16-byte stores (the row aligned, all 16 inside it).
__device__ __forceinline__ void store16(const GroupedGemmArgs& g, int64_t row, int64_t n, const float (&y)[16]) {
  const int64_t i = row * g.ldc + n;
  if (g.c_dtype == DType::kF32) {
    float4* out = reinterpret_cast<float4*>(static_cast<float*>(g.c) + i);
#pragma unroll
    for (int q = 0; q < 4; ++q) out[q] = make_float4(y[4 * q], y[4 * q + 1], y[4 * q + 2], y[4 * q + 3]);
    return;
  }
  uint32_t w[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) w[e] = pack2(g.c_dtype, y[2 * e], y[2 * e + 1]);
  uint4* out = reinterpret_cast<uint4*>(static_cast<uint16_t*>(g.c) + i);
  out[0] = make_uint4(w[0], w[1], w[2], w[3]);
  out[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

// kSplit: split K (GroupedGemmArgs::k_splits > 1); its own instantiation, so that the kernels
// without it keep their code (the split's index arithmetic measured 6-9% slower there).
template <int kWG, int kBT, bool kBlock, bool kSplit>
__global__ void __launch_bounds__(WgmmaTraits<kWG, kBT, kBlock>::kThreads, 1)
    grouped_gemm_sm90_wgmma_kernel(const GroupedGemmArgs g, const __grid_constant__ CUtensorMap w_map) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = WgmmaTraits<kWG, kBT, kBlock>;
  constexpr int kS = T::kStages, kBK = T::kBK, kFrag = T::kFrag;
  extern __shared__ uint8_t smem_raw[];
  // [stage]{weights kRowsW x 128 B, tokens kBT x 128 B}, swizzled, 1024-byte aligned.
  uint8_t* smem = smem_raw + ((1024 - smem_u32(smem_raw) % 1024) % 1024);
  const uint32_t smem_base = smem_u32(smem);
  __shared__ float s_ascale[kBlock ? kS : 1][kBT];  // block: a_s[row, kb] of each stage's tile
  __shared__ alignas(8) uint64_t s_full[kS], s_empty[kS];

  const int tid = int(threadIdx.x), lane = tid % 32;
  if (tid == 0) {
    for (int s = 0; s < kS; ++s) {
      cuda::mbarrier_init(smem_u32(&s_full[s]), 129);  // the producer's TMA arrival + 128 cp.async arrivals
      cuda::mbarrier_init(smem_u32(&s_empty[s]), T::kConsumers / 32);  // one arrival per consumer warp
    }
  }
  __syncthreads();

  // The tiles (token block, weight tile[, split]) of the blocks in use (num_post_pad), walked by a
  // grid-stride loop. Raster: groups of kRasterGroup token blocks walk all weight tiles together,
  // so the CTAs in flight share a few token blocks (L2-resident) and read each weight tile from
  // memory ~once. Split K: the tiles repeat per split. A raster over the host's bound on the blocks
  // with the unused tiles skipped left whole CTAs idle (264 CTAs, 3 blocks of which 2 in use: every
  // third CTA had only unused tiles; Mixtral-8x7B's block-scaled GEMM1 at M = 1 took 95 us, not 72).
  const int64_t n_tiles = (g.n + T::kRowsW - 1) / T::kRowsW;
  const int64_t blocks_in_use = (int64_t(*g.num_post_pad) + kBT - 1) / kBT;
  const int64_t blocks = blocks_in_use < g.grid_m_blocks ? blocks_in_use : g.grid_m_blocks;
  const int64_t tiles = blocks * n_tiles, total = kSplit ? tiles * g.k_splits : tiles;
  const int all_k_tiles = int((g.k + kBK - 1) / kBK);
  const int split_tiles = kSplit ? (all_k_tiles + int(g.k_splits) - 1) / int(g.k_splits) : all_k_tiles;
  const int64_t kb_count = kBlock ? (g.k + g.block_k - 1) / g.block_k : 1;
  const int64_t nb_count = kBlock ? (g.n + g.block_n - 1) / g.block_n : 1;
  // K tiles per K block of the scales (block_k is a multiple of 128): the scale block of tile t
  // is t / tiles_per_kb, a 32-bit division (64-bit ones are subroutine calls, and decode tiles
  // are short enough for them to show: 1.3-1.5x the per-tensor kernel's time per tile).
  const uint32_t tiles_per_kb = kBlock ? uint32_t(g.block_k / kBK) : 1u;
  struct Tile {
    int64_t pos0, n0;  // first sorted position, first weight row
    int32_t expert;
    int split, kt0, num_k_tiles;  // this tile's K tiles [kt0, kt0 + num_k_tiles) (maybe none)
  };
  auto tile_at = [&](int64_t lin) {
    Tile t;
    const int64_t tile = kSplit ? lin % tiles : lin;
    t.split = kSplit ? int(lin / tiles) : 0;
    const int64_t group = tile / (kRasterGroup * n_tiles), in_group = tile % (kRasterGroup * n_tiles);
    const int64_t left = blocks - group * kRasterGroup, group_rows = left < kRasterGroup ? left : kRasterGroup;
    const int64_t token_block = group * kRasterGroup + in_group % group_rows;
    t.pos0 = token_block * kBT;
    t.n0 = (in_group / group_rows) * T::kRowsW;
    t.expert = g.expert_ids[token_block];  // block_m == kBT
    t.kt0 = t.split * split_tiles;
    t.num_k_tiles = t.kt0 >= all_k_tiles ? 0 : (all_k_tiles - t.kt0 < split_tiles ? all_k_tiles - t.kt0 : split_tiles);
    return t;
  };
  // The output row of sorted position p, -1 for padding.
  auto slot_at = [&](int64_t p) -> int64_t {
    const int64_t slot = g.sorted_ids[p];
    return slot >= 0 && slot < g.num_slots ? slot : -1;
  };

  if (tid >= T::kConsumers) {
    if constexpr (T::kRegSplit) cuda::setmaxnreg_dec<40>();  // the consumers take the registers
    // Producer warpgroup. Thread p copies the 16-byte chunk p % 8 of token rows p / 8 + 16 j. The
    // stage ring runs on across tiles: the next tile loads while the consumers store the last.
    constexpr int kRows = kBT / 16;
    const int p = tid - T::kConsumers, chunk = p % 8;
    const uint8_t* a_base = static_cast<const uint8_t*>(g.a);
    // 16 rows apart keeps the swizzle phase: row p / 8 + 16 j lies 2048 j bytes after row p / 8.
    const uint32_t dst0 = swizzle_128b_offset(uint32_t(p / 8), uint32_t(16 * chunk));
    // Launched by launch_pdl: the first tile's first weight tiles (constant) are requested before
    // the wait for the kernel before this one (the routing tables were written earlier still).
    // Two: measured on the H200 (decode layers in CUDA graphs), all eight stages slowed the kernel
    // before (its loads queued behind them; Mixtral-8x7B M = 1 0.98x), none or two sped the layer
    // up (two: Qwen3-30B-A3B M = 1 1.08-1.13x, Mixtral-8x7B and DeepSeek-V3 1.02-1.03x).
    constexpr int kEarlyStages = 2;
    int early = 0;  // K tiles of the first tile whose weight tiles are on their way
    if (int64_t(blockIdx.x) < total) {
      const Tile t = tile_at(blockIdx.x);
      early = t.expert < 0 ? 0 : (t.num_k_tiles < kEarlyStages ? t.num_k_tiles : kEarlyStages);
      for (int kt = 0; kt < early && p == 0; ++kt) {
        const uint32_t full = smem_u32(&s_full[kt]);
        cuda::mbarrier_arrive_expect_tx(full, T::kWeightBytes);
        cuda::tma_load_3d(smem_base + kt * T::kStageBytes, &w_map, int32_t(int64_t(t.kt0 + kt) * kBK), int32_t(t.n0),
                          t.expert, full);
      }
    }
    cuda::pdl_wait();
    cuda::pdl_allow_dependents();
    uint32_t it = 0;  // K tiles loaded so far, into stage it % kS
    for (int64_t lin = blockIdx.x; lin < total; lin += gridDim.x) {
      const Tile t = tile_at(lin);
      // The rows' slots are read with the expert (not after it: one load latency a tile less).
      int64_t slots[kRows];
#pragma unroll
      for (int j = 0; j < kRows; ++j) slots[j] = slot_at(t.pos0 + p / 8 + 16 * j);
      const int64_t slot_p = kBlock && p < kBT ? slot_at(t.pos0 + p) : -1;
      if (t.expert < 0) continue;  // zeros, stored by the consumers
      const uint8_t* t_src[kRows];
      uint32_t t_ok = 0;
#pragma unroll
      for (int j = 0; j < kRows; ++j) {
        t_src[j] = a_base + (slots[j] >= 0 ? slots[j] / g.a_slots_per_row : 0) * g.lda + 16 * chunk;
        t_ok |= slots[j] >= 0 ? 1u << j : 0u;
      }
      // Block: the a_s row of token row p (p < kBT).
      const float* as_src = slot_p >= 0 ? g.a_scale + (slot_p / g.a_slots_per_row) * kb_count : nullptr;
      for (int kt = 0; kt < t.num_k_tiles; ++kt, ++it) {
        const uint32_t stage = it % kS;
        if (it >= uint32_t(kS)) cuda::mbarrier_wait(smem_u32(&s_empty[stage]), (it / kS - 1) & 1u);
        const uint32_t full = smem_u32(&s_full[stage]);
        const uint32_t sw = smem_base + stage * T::kStageBytes, st = sw + T::kWeightBytes + dst0;
        const int64_t k0 = int64_t(t.kt0 + kt) * kBK;
        if (p == 0 && it >= uint32_t(early)) {  // (the first tile's first `early` are on their way)
          cuda::mbarrier_arrive_expect_tx(full, T::kWeightBytes);
          cuda::tma_load_3d(sw, &w_map, int32_t(k0), int32_t(t.n0), t.expert, full);
        }
        const bool k_ok = k0 + 16 * chunk < g.k;  // k % 16 == 0: a chunk is all in or all out
#pragma unroll
        for (int j = 0; j < kRows; ++j) {
          const bool valid = k_ok && (t_ok >> j & 1u);
          cuda::cp_async16(st + 2048 * j, valid ? t_src[j] + k0 : a_base, valid);
        }
        if constexpr (kBlock) {
          if (p < kBT) {
            const uint32_t kb = uint32_t(t.kt0 + kt) / tiles_per_kb;
            const bool ok = as_src != nullptr;
            cuda::cp_async4(smem_u32(&s_ascale[stage][p]), ok ? as_src + kb : g.a_scale, ok);
          }
        }
        cuda::cp_async_mbarrier_arrive(full);
      }
    }
    cuda::cp_async_wait_all();  // no copy outlives the warpgroup
    return;
  }

  // Consumer warpgroups: two f32 fragments take turns, so that the tensor cores multiply tile
  // kt while tile kt - 1 is promoted (wgmma.wait_group 1).
  if constexpr (T::kRegSplit) cuda::setmaxnreg_inc<232>();
  cuda::pdl_wait();  // before a_scale, the routed weights and the stores
  cuda::pdl_allow_dependents();
  // The warpgroup and warp through a shuffle from lane 0, which the compiler knows to be the
  // same in every lane: the wgmma descriptors derived from them then stay in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0), warp = __shfl_sync(0xffffffffu, (tid / 32) % 4, 0);
  const int lg = lane / 4, lt = lane % 4;
  // This thread's two weight rows (wgmma M) within the CTA tile.
  const int row_lo = wg * 64 + warp * 16 + lg, row_hi = row_lo + 8;
  float* const buf = reinterpret_cast<float*>(smem + kS * T::kStageBytes) + (tid / 32) * T::kEpiWarpFloats;
  uint32_t it = 0;  // K tiles consumed so far, from stage it % kS
  for (int64_t lin = blockIdx.x; lin < total; lin += gridDim.x) {
    const Tile t = tile_at(lin);
    // The epilogue's slots (lane t: position q kChunk + t), routed weights and scales, read now so
    // that their latency passes during the K loop (decode's short tiles; 128-token tiles have no
    // registers to spare and long K loops).
    constexpr bool kEarlySlots = kBT <= 64;
    constexpr int kChunks = kBT / T::kChunk, kEarly = kEarlySlots ? kChunks : 1;
    auto epilogue_slot = [&](int q) { return lane < T::kChunk ? slot_at(t.pos0 + q * T::kChunk + lane) : int64_t(-1); };
    auto routed_weight = [&](int64_t slot) {
      return g.slot_weight != nullptr && slot >= 0 ? g.slot_weight[slot] : 1.0f;
    };
    int64_t e_slot[kEarly];
#pragma unroll
    for (int q = 0; q < kEarly; ++q) e_slot[q] = kEarlySlots ? epilogue_slot(q) : -1;
    // Where the results go: c, or this split's f32 partial sums.
    GroupedGemmArgs out = g;
    if constexpr (kSplit) {
      out.c = g.partials + t.split * g.num_slots * g.n;
      out.c_dtype = DType::kF32;
      out.ldc = g.n;
    }
    if (t.expert < 0) {  // an expert of another rank: zero rows
      for (int i = tid; i < kBT * T::kRowsW; i += T::kConsumers) {
        const int64_t slot = slot_at(t.pos0 + i / T::kRowsW), n = t.n0 + i % T::kRowsW;
        if (slot >= 0 && n < g.n) store_one(out, slot, n, 0.0f);
      }
      continue;
    }

    float e_w[kEarly];
#pragma unroll
    for (int q = 0; q < kEarly; ++q) e_w[q] = kEarlySlots ? routed_weight(e_slot[q]) : 1.0f;
    const float a_scale = kBlock ? 1.0f : g.a_scale[0];
    const float b_scale = kBlock ? 1.0f : g.b_scale[t.expert];

    float acc[kFrag], part0[kFrag], part1[kFrag];
#pragma unroll
    for (int i = 0; i < kFrag; ++i) acc[i] = part0[i] = part1[i] = 0.0f;
    struct RowScales {
      float lo = 1.0f, hi = 1.0f;
    };
    // Block: b_s[e, n / bn, kb] of this thread's rows for tile kt; the rows' scale rows are found
    // once a tile (nullptr: past n).
    const float* bs_lo = nullptr;
    const float* bs_hi = nullptr;
    if constexpr (kBlock) {
      const int64_t n_lo = t.n0 + row_lo, n_hi = t.n0 + row_hi;
      const float* bs = g.b_scale + int64_t(t.expert) * nb_count * kb_count;
      if (n_lo < g.n) bs_lo = bs + (n_lo / g.block_n) * kb_count;
      if (n_hi < g.n) bs_hi = bs + (n_hi / g.block_n) * kb_count;
    }
    auto row_scales = [&](int kt) {
      RowScales r;
      if constexpr (kBlock) {
        const uint32_t kb = uint32_t(t.kt0 + kt) / tiles_per_kb;
        r.lo = bs_lo != nullptr ? __ldg(bs_lo + kb) : 0.0f;
        r.hi = bs_hi != nullptr ? __ldg(bs_hi + kb) : 0.0f;
      }
      return r;
    };
    // Waits for tile kt and queues its product into `part` (fresh: every tile is promoted).
    auto issue = [&](float (&part)[kFrag], int kt) {
      const uint32_t q = it + uint32_t(kt), stage = q % kS;
      cuda::mbarrier_wait(smem_u32(&s_full[stage]), (q / kS) & 1u);
      cuda::fence_proxy_async_shared();  // the producer's cp.async writes, visible to wgmma
      const uint32_t base = smem_base + stage * T::kStageBytes;
      const uint32_t sw = base + wg * 64 * 128, st = base + T::kWeightBytes;
      cuda::wgmma_fence_operands(part);
      cuda::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kBK / 32; ++ks) {
        cuda::wgmma_e4m3<kBT>(part, cuda::wgmma_desc_sw128(sw + 32 * ks), cuda::wgmma_desc_sw128(st + 32 * ks), ks > 0);
      }
      cuda::wgmma_commit();
    };
    // Tile kt's product is complete: acc += part (block: acc = fma(part * a_s[row, kb], b_s[e, n / bn, kb], acc)),
    // then the stage goes back to the producer.
    auto retire = [&](float (&part)[kFrag], int kt, RowScales sb) {
      const uint32_t stage = (it + uint32_t(kt)) % kS;
      cuda::wgmma_fence_operands(part);
      if constexpr (kBlock) {
#pragma unroll
        for (int j = 0; j < kBT / 8; ++j) {
          const float sa0 = s_ascale[stage][8 * j + 2 * lt], sa1 = s_ascale[stage][8 * j + 2 * lt + 1];
          acc[4 * j + 0] = __fmaf_rn(__fmul_rn(part[4 * j + 0], sa0), sb.lo, acc[4 * j + 0]);
          acc[4 * j + 1] = __fmaf_rn(__fmul_rn(part[4 * j + 1], sa1), sb.lo, acc[4 * j + 1]);
          acc[4 * j + 2] = __fmaf_rn(__fmul_rn(part[4 * j + 2], sa0), sb.hi, acc[4 * j + 2]);
          acc[4 * j + 3] = __fmaf_rn(__fmul_rn(part[4 * j + 3], sa1), sb.hi, acc[4 * j + 3]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kFrag; ++i) acc[i] = __fadd_rn(acc[i], part[i]);
      }
      __syncwarp();  // the warp is done with the stage
      if (lane == 0) cuda::mbarrier_arrive(smem_u32(&s_empty[stage]));
    };

    // kt counts this tile's K tiles (stage (it + kt) % kS); the K offset is kt0 + kt.
    const int num_k_tiles = t.num_k_tiles;
    if (num_k_tiles == 0) {
      // A split past the last K tile: its partial sums are zeros.
    } else if constexpr (!T::kTwoFragments) {
      for (int kt = 0; kt < num_k_tiles; ++kt) {
        const RowScales sb = row_scales(kt);
        issue(part0, kt);
        cuda::wgmma_wait<0>();
        retire(part0, kt, sb);
      }
    } else {
      cuda::promoted_k_loop(num_k_tiles, part0, part1, row_scales, issue, retire);
    }
    it += uint32_t(num_k_tiles);

    // Epilogue, kChunk token positions at a time through this warp's staging buffer: the fragment
    // goes to shared memory token-major (element 4 j + {0, 1}: weight row lg, positions 8 j + 2 lt +
    // {0, 1}; 4 j + {2, 3}: row lg + 8), then lane t scales the 16 outputs of position t and stores
    // them with 16-byte stores into the slot's row. Rolled over the positions: the unrolled
    // epilogue made the kernel larger than the instruction cache.
    const int64_t n_warp = t.n0 + wg * 64 + warp * 16;  // this warp's 16 weight rows = output columns
    const int count = g.n - n_warp < 16 ? int(g.n - n_warp) : 16;
    const bool vector = count == 16 && (out.ldc * (out.c_dtype == DType::kF32 ? 4 : 2)) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(out.c) % 16 == 0;
#pragma unroll
    for (int q = 0; q < kBT / T::kChunk; ++q) {
      __syncwarp();  // the previous chunk (or tile) has been read
#pragma unroll
      for (int jj = 0; jj < T::kChunk / 8; ++jj) {
        const int j = q * (T::kChunk / 8) + jj;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          buf[(8 * jj + 2 * lt + e) * T::kEpiStride + lg] = acc[4 * j + e];
          buf[(8 * jj + 2 * lt + e) * T::kEpiStride + lg + 8] = acc[4 * j + 2 + e];
        }
      }
      __syncwarp();
      const int64_t slot = kEarlySlots ? e_slot[q] : epilogue_slot(q);
      if (slot >= 0 && count > 0) {
        const float w = kEarlySlots ? e_w[q] : routed_weight(slot);
        // Routed weight before the scales (spec 1.10).
        auto finish = [&](float v) {
          if (g.slot_weight != nullptr) v = __fmul_rn(v, w);
          return kBlock ? v : __fmul_rn(__fmul_rn(v, a_scale), b_scale);
        };
        const float* row = buf + lane * T::kEpiStride;
        if (vector) {
          float y[16];
#pragma unroll
          for (int v = 0; v < 4; ++v) {
            const float4 x = *reinterpret_cast<const float4*>(row + 4 * v);
            y[4 * v] = finish(x.x);
            y[4 * v + 1] = finish(x.y);
            y[4 * v + 2] = finish(x.z);
            y[4 * v + 3] = finish(x.w);
          }
          store16(out, slot, n_warp, y);
        } else {
#pragma unroll 1
          for (int e = 0; e < count; ++e) store_one(out, slot, n_warp + e, finish(row[e]));
        }
      }
    }
  }
#else
  __trap();  // grouped_gemm_sm90_wgmma_rejects keeps other targets away
#endif
}

template <int kWG, int kBT, bool kBlock, bool kSplit>
void launch(const GroupedGemmArgs& g, cudaStream_t stream) {
  using T = WgmmaTraits<kWG, kBT, kBlock>;
  constexpr auto kernel = grouped_gemm_sm90_wgmma_kernel<kWG, kBT, kBlock, kSplit>;
  cuda::allow_dynamic_smem<kernel>(T::kSmemBytes);
  // The experts' weights [E, n, k] as bytes, read in kRowsW x 128 boxes.
  const CUtensorMap w_map = cuda::make_tensor_map_3d_u8_sw128(g.b, uint64_t(g.k), uint64_t(g.n), uint64_t(g.num_experts),
                                                              uint64_t(g.ldb), uint64_t(g.b_expert_stride), T::kBK, T::kRowsW);
  // Persistent: at most as many CTAs as fit on the GPU at once, each walking tiles.
  static const int per_sm = [] {
    int n = 0;
    FP8KIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, T::kThreads, T::kSmemBytes));
    return n > 0 ? n : 1;
  }();
  int device = 0, sms = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t tiles = g.grid_m_blocks * ((g.n + T::kRowsW - 1) / T::kRowsW) * g.k_splits;
  const int64_t resident = int64_t(per_sm) * sms;
  cuda::launch_pdl(kernel, unsigned(tiles < resident ? tiles : resident), T::kThreads, T::kSmemBytes, stream, g, w_map);
  FP8KIT_CHECK_LAUNCH(stream, "grouped_gemm_sm90_wgmma_kernel");
}

template <int kWG, int kBT, bool kSplit = false>
void launch_scaling(const GroupedGemmArgs& g, cudaStream_t stream) {
  if (g.block) {
    launch<kWG, kBT, true, kSplit>(g, stream);
  } else {
    launch<kWG, kBT, false, kSplit>(g, stream);
  }
}

}  // namespace

std::string grouped_gemm_sm90_tma_rejects(const GroupedGemmArgs& g, int device) {
  int major = 0, minor = 0;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (major != 9 || minor != 0) return "wgmma needs sm_90 (built for sm_90a)";
  if (g.quant != ExpertQuant::kFp8W8A8) return "not an FP8 W8A8 GEMM";
  if (g.a_dtype != DType::kE4M3FN || g.b_dtype != DType::kE4M3FN) return "operands are not e4m3fn";
  if (g.k % 16 != 0 || g.lda % 16 != 0 || g.ldb % 16 != 0 || g.b_expert_stride % 16 != 0) {
    return "K or a row stride is not a multiple of 16 bytes";
  }
  if (!aligned16(g.a) || !aligned16(g.b)) return "an operand is not 16-byte aligned";
  if (g.num_experts <= 0 || g.num_experts > 0x7fffffff || g.k > 0x7fffffff || g.n > 0x7fffffff) {
    return "no expert count, or a dimension past the TMA coordinate range";
  }
  if (g.num_experts > 1 && g.b_expert_stride < g.n * g.ldb) return "experts' weights overlap";
  return {};
}

std::string grouped_gemm_sm90_wgmma_rejects(const GroupedGemmArgs& g, int device) {
  if (std::string why = grouped_gemm_sm90_tma_rejects(g, device); !why.empty()) return why;
  if (g.block_m != 16 && g.block_m != 64 && g.block_m != 128) return "block_m is not 16, 64 or 128";
  if (g.block && (g.block_k % 128 != 0 || g.block_n <= 0)) return "block_k is not a multiple of 128";
  const int64_t rows_per_cta = g.block_m == 16 ? 64 : 128;
  if (g.k_splits < 1 || (g.k_splits > 1 && (g.partials == nullptr || g.block_m != 16))) {
    return "k_splits without partial sums, or not at block_m 16";
  }
  if (g.grid_m_blocks * ((g.n + rows_per_cta - 1) / rows_per_cta) * g.k_splits > 0x7fffffff) return "the grid is too large";
  return {};
}

void grouped_gemm_sm90_wgmma(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (args.grid_m_blocks <= 0 || args.n <= 0) return;
  if (args.k_splits > 1) return launch_scaling<1, 16, true>(args, stream);  // decode only (rejects)
  switch (args.block_m) {
    case 16: launch_scaling<1, 16>(args, stream); break;
    case 64: launch_scaling<2, 64>(args, stream); break;
    default: launch_scaling<2, 128>(args, stream); break;
  }
}

}  // namespace fp8kit::ops
