// grouped_gemm_sm90_sorted: the fused MoE's grouped FP8 GEMMs for prefill on the Hopper wgmma
// GEMM kernel (ops/gemm/sm90_e4m3_gemm_wgmma_kernel.cuh, its sorted mode): a's rows are already in
// moe_align_block_size's sorted order (block 64 or 128), so both operands arrive by TMA, as in
// the dense GEMM, instead of a gathered by cp.async (grouped_gemm_sm90_wgmma.cu). The tile of
// sorted position p uses expert expert_ids[p / block] (b as a 3-D tensor map [E, N, K]); blocks
// of 128 run 128 x 128 tiles (128 x 256 with fast accumulation), blocks of 64 run 64 x 256 tiles
// (half the padding rows of an expert's last block). The output row is p itself: the intermediate
// and GEMM2's output stay sorted (moe_sum reads the latter by slot).
// Also gather_sorted_rows, which puts GEMM1's quantized activation rows in sorted order.
// Tests: tests/gpu/test_fused_experts_cuda.cpp; bench: bench/bench_moe.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_attributes.h"
#include "core/cuda/tensor_map.h"
#include "fp8kit/half.h"
#include "ops/gemm/sm90_e4m3_gemm_wgmma_kernel.cuh"
#include "ops/moe/grouped_gemm_cuda.h"
#include "ops/moe/grouped_gemm_sorted.h"

namespace fp8kit::ops {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The epilogue stores by TMA: both GEMMs write the sorted rows themselves (the rejects ensure
// the TMA can address the output).
template <bool kBlock, typename OutT, int kBM, int kBN, bool kFast>
void launch_kernel(const ScaledMmArgs& mm, const sm90_gemm::SortedRows& sorted, const GroupedGemmArgs& g,
                   cudaStream_t stream) {
  using T = sm90_gemm::Traits<kBlock, kBM, kBN>;
  constexpr auto kernel = sm90_gemm::sm90_e4m3_gemm_wgmma_kernel<kBlock, OutT, true, kBM, kBN, kFast, true>;
  cuda::allow_dynamic_smem<kernel>(T::kSmemBytes);
  const CUtensorMap a_map = cuda::make_tensor_map_3d_u8_sw128(mm.a, uint64_t(mm.k), uint64_t(mm.m), 1, uint64_t(mm.lda),
                                                              uint64_t(mm.lda) * uint64_t(mm.m), T::kBK, T::kBM);
  const CUtensorMap b_map = cuda::make_tensor_map_3d_u8_sw128(g.b, uint64_t(g.k), uint64_t(g.n), uint64_t(g.num_experts),
                                                              uint64_t(g.ldb), uint64_t(g.b_expert_stride), T::kBK, T::kBN);
  const sm90_gemm::OutputMap c = sm90_gemm::make_output_map<OutT>(mm.out, mm.m, mm.n, mm.ldc);
  // grouped_gemm_sm90_sorted_rejects keeps outputs the TMA cannot address away.
  FP8KIT_CUDA_CHECK(c.ok ? cudaSuccess : cudaErrorMisalignedAddress);
  int device = 0, sms = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t tiles = ceil_div(mm.m, T::kBM) * ceil_div(mm.n, T::kBN);
  const unsigned ctas = unsigned(tiles < sms ? tiles : sms);
  kernel<<<ctas, T::kThreads, T::kSmemBytes, stream>>>(mm, sorted, a_map, b_map, c.map);
  FP8KIT_CHECK_LAUNCH(stream, "sm90_e4m3_gemm_wgmma_kernel (sorted)");
}

// Promoted every 128 of K: 128 x 128 tiles in blocks of 128, 64 x 256 in blocks of 64. Fast
// accumulation (per-tensor scales, g.fast_accum, blocks of 128): the whole K in the tensor cores,
// as the reference's Triton kernel does (spec 2.3), which frees the registers for 128 x 256 tiles
// (m64n256): Mixtral-8x7B's layer at M = 2048-4096 1.03-1.15x on the H200. In blocks of 64 it
// measured no faster (the tile stays 64 x 256), so they keep the promotion.
template <bool kBlock, typename OutT, int kBM>
void launch(const ScaledMmArgs& mm, const sm90_gemm::SortedRows& sorted, const GroupedGemmArgs& g, cudaStream_t stream) {
  if constexpr (!kBlock && kBM == 128) {
    if (g.fast_accum) return launch_kernel<false, OutT, 128, 256, true>(mm, sorted, g, stream);
  }
  launch_kernel<kBlock, OutT, kBM, kBM == 128 ? 128 : 256, false>(mm, sorted, g, stream);
}

template <bool kBlock, int kBM>
void launch_out(const ScaledMmArgs& mm, const sm90_gemm::SortedRows& sorted, const GroupedGemmArgs& g, cudaStream_t stream) {
  switch (mm.out_dtype) {
    case DType::kBF16: launch<kBlock, BFloat16, kBM>(mm, sorted, g, stream); break;
    case DType::kF16: launch<kBlock, Float16, kBM>(mm, sorted, g, stream); break;
    default: launch<kBlock, float, kBM>(mm, sorted, g, stream); break;
  }
}

template <int kBM>
void launch_scaling(const ScaledMmArgs& mm, const sm90_gemm::SortedRows& sorted, const GroupedGemmArgs& g,
                    cudaStream_t stream) {
  g.block ? launch_out<true, kBM>(mm, sorted, g, stream) : launch_out<false, kBM>(mm, sorted, g, stream);
}

// rows_out[p] = x[sorted_ids[p] / slots_per_row] for the sorted positions p < num_post_pad that
// hold a slot, zeros for the padding among them; the same for the block scales. One warp a row,
// 16 bytes a lane, four loads in flight before their stores.
__global__ void gather_sorted_rows_kernel(SortedGather a) {
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  const int lane = int(threadIdx.x % 32);
  const int64_t used = min(int64_t(*a.num_post_pad), a.rows);
  const int64_t vectors = a.k / 16;
  for (int64_t p = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; p < used; p += warps) {
    const int64_t slot = a.sorted_ids[p];
    const int64_t src = slot >= 0 && slot < a.num_slots ? slot / a.slots_per_row : -1;
    if (a.row_of_slot != nullptr && src >= 0 && lane == 0) a.row_of_slot[slot] = int32_t(p);
    const uint4* in = src >= 0 ? reinterpret_cast<const uint4*>(a.x + src * a.ldx) : nullptr;
    uint4* out = reinterpret_cast<uint4*>(a.out + p * a.ldo);
    constexpr int kInFlight = 4;
    for (int64_t c0 = lane; c0 < vectors; c0 += 32 * kInFlight) {
      uint4 v[kInFlight];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        const int64_t c = c0 + 32 * j;
        v[j] = in != nullptr && c < vectors ? in[c] : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        if (c0 + 32 * j < vectors) out[c0 + 32 * j] = v[j];
      }
    }
    if (a.scale != nullptr) {
      for (int64_t c = lane; c < a.groups; c += 32) a.scale_out[p * a.groups + c] = src >= 0 ? a.scale[src * a.groups + c] : 0.0f;
    }
  }
}

}  // namespace

std::string grouped_gemm_sm90_sorted_rejects(const GroupedGemmArgs& g, int device) {
  if (std::string why = grouped_gemm_sm90_tma_rejects(g, device); !why.empty()) return why;
  if (g.block_m != 128 && g.block_m != 64) return "block_m is not 64 or 128";
  if (g.grid_m_blocks * g.block_m > 0x7fffffff || g.grid_m_blocks * ceil_div(g.n, 128) > 0x7fffffff) {
    return "the grid is too large";
  }
  if (g.block && (g.block_k != 128 || g.block_n != 128)) return "block scales other than 128 x 128";
  const int64_t out_bytes = g.c_dtype == DType::kF32 ? 4 : 2;
  if ((g.ldc * out_bytes) % 16 != 0 || reinterpret_cast<uintptr_t>(g.c) % 16 != 0) {
    return "the output rows are not 16-byte aligned (TMA stores)";
  }
  return {};
}

void grouped_gemm_sm90_sorted(const GroupedGemmArgs& g, cudaStream_t stream) {
  if (g.grid_m_blocks <= 0 || g.n <= 0) return;
  ScaledMmArgs mm;
  mm.m = g.grid_m_blocks * g.block_m;  // sorted rows the buffers hold; the kernel reads how many are in use
  mm.n = g.n;
  mm.k = g.k;
  mm.a = static_cast<const uint8_t*>(g.a);
  mm.lda = g.lda;
  mm.b = static_cast<const uint8_t*>(g.b);
  mm.ldb = g.ldb;
  mm.scale_a = g.a_scale;
  mm.scale_b = g.b_scale;
  mm.scale_a_kind = mm.scale_b_kind = g.block ? ScaleKind::kBlock : ScaleKind::kTensor;
  const int64_t k_blocks = ceil_div(g.k, 128), n_blocks = ceil_div(g.n, 128);
  mm.sa_row_stride = k_blocks;  // [rows, K / 128] row-major
  mm.sa_group_stride = 1;
  mm.sb_row_stride = k_blocks;  // [E, N / 128, K / 128]
  mm.sb_group_stride = 1;
  mm.out = g.c;
  mm.ldc = g.ldc;
  mm.out_dtype = g.c_dtype;
  sm90_gemm::SortedRows sorted;
  sorted.tile_expert = g.expert_ids;
  sorted.rows_in_use = g.num_post_pad;
  sorted.slot_of_row = g.sorted_ids;
  sorted.num_slots = g.num_slots;
  sorted.slot_weight = g.slot_weight;
  sorted.sb_expert_stride = n_blocks * k_blocks;
  g.block_m == 64 ? launch_scaling<64>(mm, sorted, g, stream) : launch_scaling<128>(mm, sorted, g, stream);
}

void gather_sorted_rows(const SortedGather& a, cudaStream_t stream) {
  if (a.rows <= 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div(a.rows, threads / 32), 4096);
  gather_sorted_rows_kernel<<<unsigned(blocks), threads, 0, stream>>>(a);
  FP8KIT_CHECK_LAUNCH(stream, "gather_sorted_rows_kernel");
}

}  // namespace fp8kit::ops
