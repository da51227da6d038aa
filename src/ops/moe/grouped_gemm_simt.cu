// grouped_gemm_simt: the fused MoE's grouped GEMM on CUDA cores, for every mode the tensor-core
// kernel does not take (weight-only, unquantized, e4m3fnuz, shapes it rejects) and as the
// cross-check behind FP8KIT_MOE_GEMM=simt. Reference: expert_gemm_ref (fused_experts_gemm_ref.cpp):
// same K-block promotion and epilogue order, f32 accumulation in k order (the reference sums in
// double, hence the tolerance). Tests: tests/gpu/test_fused_experts_cuda.cpp.
// Floor: not a performance path; 2 * slots * n * k FLOP at ~1/4 of the 67 TFLOP/s FP32 peak.
//
// CTA = 16 x 16 threads = 16 sorted positions x 16 output columns; the 16 positions lie in one
// moe_align block (block_m % 16 == 0), so one expert. K goes through shared memory 32 at a time,
// decoded to f32 (FP8 codes, 16-bit values, weights times their weight-only scale).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/cuda/cuda_check.h"
#include "fp8kit/error.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "ops/moe/grouped_gemm_cuda.h"

namespace fp8kit::ops {
namespace {

constexpr int kTile = 16, kDepth = 32;

__device__ __forceinline__ float load_value(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16: return bf16_to_float(static_cast<const BFloat16*>(p)[i]);
    case DType::kF16: return f16_to_float(static_cast<const Float16*>(p)[i]);
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kE4M3FNUZ: return e4m3fnuz_bits_to_float(static_cast<const uint8_t*>(p)[i]);
    default: return e4m3fn_bits_to_float(static_cast<const uint8_t*>(p)[i]);
  }
}

__device__ __forceinline__ void store_value(const GroupedGemmArgs& g, int64_t index, float v) {
  switch (g.c_dtype) {
    case DType::kBF16: static_cast<BFloat16*>(g.c)[index] = float_to_bf16(v); break;
    case DType::kF16: static_cast<Float16*>(g.c)[index] = float_to_f16(v); break;
    default: static_cast<float*>(g.c)[index] = v; break;
  }
}

__global__ void grouped_gemm_simt_kernel(const GroupedGemmArgs g) {
  __shared__ float a_tile[kTile][kDepth + 1], b_tile[kTile][kDepth + 1];
  __shared__ int64_t a_row[kTile], slot_of[kTile];
  const int tx = int(threadIdx.x), ty = int(threadIdx.y), tid = ty * kTile + tx;
  const int64_t pos0 = int64_t(blockIdx.x) * kTile;
  if (pos0 >= int64_t(*g.num_post_pad)) return;  // the same for the whole CTA
  const int32_t expert = g.expert_ids[pos0 / g.block_m];
  const int64_t col0 = int64_t(blockIdx.y) * kTile;
  if (tid < kTile) {
    const int64_t slot = g.sorted_ids[pos0 + tid];
    const bool valid = slot >= 0 && slot < g.num_slots;
    slot_of[tid] = valid ? slot : -1;
    a_row[tid] = valid ? slot / g.a_slots_per_row : -1;
  }
  __syncthreads();
  const int64_t slot = slot_of[ty], col = col0 + tx;
  if (expert < 0) {  // an expert of another rank: zero rows
    if (slot >= 0 && col < g.n) store_value(g, slot * g.ldc + col, 0.0f);
    return;
  }

  const bool fp8 = g.quant == ExpertQuant::kFp8W8A8, weight_only = g.quant == ExpertQuant::kWeightOnly;
  const int64_t kb_count = g.block ? (g.k + g.block_k - 1) / g.block_k : 1;
  const int64_t nb_count = g.block ? (g.n + g.block_n - 1) / g.block_n : 1;
  const int64_t k_block = g.block ? g.block_k : g.k;  // fp8 promotion interval
  const int64_t b_bytes = g.b_dtype == DType::kF32 ? 4 : (g.b_dtype == DType::kBF16 || g.b_dtype == DType::kF16) ? 2 : 1;
  const uint8_t* b_expert = static_cast<const uint8_t*>(g.b) + int64_t(expert) * g.b_expert_stride * b_bytes;

  float acc = 0.0f, part = 0.0f;
  for (int64_t kb = 0; kb < kb_count; ++kb) {
    const int64_t k_begin = kb * k_block, k_end = min(g.k, k_begin + k_block);
    for (int64_t k0 = k_begin; k0 < k_end; k0 += kDepth) {
      __syncthreads();
      for (int e = tid; e < kTile * kDepth; e += kTile * kTile) {
        const int r = e / kDepth, c = e % kDepth;
        const int64_t kk = k0 + c;
        const bool in_k = kk < k_end;
        a_tile[r][c] = (in_k && a_row[r] >= 0) ? load_value(g.a, g.a_dtype, a_row[r] * g.lda + kk) : 0.0f;
        const int64_t n = col0 + r;
        float w = 0.0f;
        if (in_k && n < g.n) {
          w = load_value(b_expert, g.b_dtype, n * g.ldb + kk);
          if (weight_only) {  // f32(decode * scale), as expert_weights_f32
            const float s = g.block ? g.b_scale[(int64_t(expert) * nb_count + n / g.block_n) * kb_count + kk / g.block_k]
                                    : g.b_scale[expert];
            w = __fmul_rn(w, s);
          }
        }
        b_tile[r][c] = w;
      }
      __syncthreads();
      const int depth = k_end - k0 < kDepth ? int(k_end - k0) : kDepth;
      for (int c = 0; c < depth; ++c) part = __fmaf_rn(a_tile[ty][c], b_tile[tx][c], part);
    }
    if (fp8 && g.block) {  // acc = fma(partial * a_s[row, kb], b_s[e, n / bn, kb], acc)
      const float as = a_row[ty] >= 0 ? g.a_scale[a_row[ty] * kb_count + kb] : 0.0f;
      const float bs = col < g.n ? g.b_scale[(int64_t(expert) * nb_count + col / g.block_n) * kb_count + kb] : 0.0f;
      acc = __fmaf_rn(__fmul_rn(part, as), bs, acc);
      part = 0.0f;
    }
  }
  if (!(fp8 && g.block)) acc = part;
  if (slot < 0 || col >= g.n) return;
  if (g.slot_weight != nullptr) acc = __fmul_rn(acc, g.slot_weight[slot]);  // before the scales (spec 1.10)
  if (fp8 && !g.block) acc = __fmul_rn(__fmul_rn(acc, g.a_scale[0]), g.b_scale[expert]);
  store_value(g, slot * g.ldc + col, acc);
}

}  // namespace

void grouped_gemm_simt(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (args.grid_m_blocks <= 0 || args.n <= 0) return;
  const int64_t m_tiles = args.grid_m_blocks * (args.block_m / kTile);
  const int64_t n_tiles = (args.n + kTile - 1) / kTile;
  if (n_tiles > 65535 || m_tiles > 0x7fffffff) {
    throw Error(ErrorCode::kUnsupported, "fused_experts: grouped GEMM of " + std::to_string(args.n) +
                                             " columns exceeds the grid of grouped_gemm_simt");
  }
  const dim3 grid{unsigned(m_tiles), unsigned(n_tiles)};
  grouped_gemm_simt_kernel<<<grid, dim3(kTile, kTile), 0, stream>>>(args);
  FP8KIT_CHECK_LAUNCH(stream, "grouped_gemm_simt_kernel");
}

}  // namespace fp8kit::ops
