// CPU reference of the fused MoE's grouped GEMM (fused_experts_gemm_ref.h); slots in parallel.
#include "ops/moe/fused_experts_gemm_ref.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/checked_math.h"
#include "core/parallel.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"

namespace fp8kit::ops {
namespace {

// Exact sum of products of f32 values over [k0, k1) in double (products of FP8 or 16-bit values
// are exact in double, and so are the sums on the integer grid of the tests); rounded to f32 by
// the caller, which models an f32 accumulator with no rounding error of its own.
double dot(const float* a, const float* b, int64_t k0, int64_t k1) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = k0;
  for (; i + 4 <= k1; i += 4) {
    s0 += double(a[i]) * b[i];
    s1 += double(a[i + 1]) * b[i + 1];
    s2 += double(a[i + 2]) * b[i + 2];
    s3 += double(a[i + 3]) * b[i + 3];
  }
  for (; i < k1; ++i) s0 += double(a[i]) * b[i];
  return (s0 + s1) + (s2 + s3);
}

void store(const ExpertGemmArgs& g, int64_t index, float v) {
  switch (g.out_dtype) {
    case DType::kBF16: static_cast<BFloat16*>(g.out)[index] = float_to_bf16(v); break;
    case DType::kF16: static_cast<Float16*>(g.out)[index] = float_to_f16(v); break;
    default: static_cast<float*>(g.out)[index] = v; break;
  }
}

float decode(uint8_t code, DType dtype) {
  return dtype == DType::kE4M3FNUZ ? e4m3fnuz_bits_to_float(code) : e4m3fn_bits_to_float(code);
}

float widen(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16: return bf16_to_float(static_cast<const BFloat16*>(p)[i]);
    case DType::kF16: return f16_to_float(static_cast<const Float16*>(p)[i]);
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kE4M3FN:
    case DType::kE4M3FNUZ: return decode(static_cast<const uint8_t*>(p)[i], dtype);
    default: fail(ErrorCode::kInternal, "fused_experts: no f32 view of {}", dtype_name(dtype));
  }
}

}  // namespace

void expert_gemm_ref(const ExpertGemmArgs& g) {
  const int64_t kb_count = g.block_k > 0 ? (g.k + g.block_k - 1) / g.block_k : 0;
  const int64_t nb_count = g.block_n > 0 ? (g.n + g.block_n - 1) / g.block_n : 0;
  parallel_for(g.num_slots, 4, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const int32_t e = g.slot_expert[s];
      if (e < 0) {  // the kernel writes zeros for an expert of another rank
        for (int64_t j = 0; j < g.n; ++j) store(g, s * g.n + j, 0.0f);
        continue;
      }
      const int64_t row = s / g.slots_per_row;
      const float* a_row = g.a + row * g.k;
      const float* b_expert = g.b + e * g.n * g.k;
      for (int64_t j = 0; j < g.n; ++j) {
        const float* b_row = b_expert + j * g.k;
        float acc;
        if (g.scaling == ExpertGemmScaling::kBlock) {
          acc = 0.0f;
          for (int64_t kb = 0; kb < kb_count; ++kb) {
            const int64_t k0 = kb * g.block_k, k1 = std::min(g.k, k0 + g.block_k);
            const float partial = float(dot(a_row, b_row, k0, k1));
            const float a_s = g.a_scale[row * kb_count + kb];
            const float b_s = g.b_scale[(e * nb_count + j / g.block_n) * kb_count + kb];
            // Triton's order with its default FP contraction (spec 1.10): the product with a_s
            // rounded, the one with b_s fused into the add.
            acc = std::fma(partial * a_s, b_s, acc);
          }
        } else {
          acc = float(dot(a_row, b_row, 0, g.k));
        }
        if (g.slot_weight != nullptr) acc *= g.slot_weight[s];  // before the scales (spec 1.10)
        if (g.scaling == ExpertGemmScaling::kPerTensor) acc = acc * g.a_scale[0] * g.b_scale[e];
        store(g, s * g.n + j, acc);
      }
    }
  });
}

std::vector<float> expert_weights_f32(const Tensor& w, ExpertQuant quant, const Tensor& scale, bool block,
                                      int64_t block_n, int64_t block_k) {
  const int64_t e_count = w.size(0), n = w.size(1), k = w.size(2);
  std::vector<float> out(size_t(e_count * n * k));
  const Tensor s = quant == ExpertQuant::kWeightOnly ? scale.contiguous() : Tensor();
  const float* sp = s.defined() ? s.data<float>() : nullptr;
  const int64_t nb = block ? ceil_div(n, block_n) : 0, kb = block ? ceil_div(k, block_k) : 0;
  const auto* base = static_cast<const uint8_t*>(w.data_ptr());
  const int64_t es = w.stride(0), ns = w.stride(1);
  const size_t elem = w.element_size();
  parallel_for(e_count * n, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t e = r / n, j = r % n;
      const void* row = base + size_t(e * es + j * ns) * elem;
      float* dst = out.data() + r * k;
      for (int64_t c = 0; c < k; ++c) dst[c] = widen(row, w.dtype(), c);
      if (sp == nullptr) continue;
      for (int64_t c = 0; c < k; ++c) {
        dst[c] *= block ? sp[(e * nb + j / block_n) * kb + c / block_k] : sp[e];
      }
    }
  });
  return out;
}

std::vector<float> values_f32(const Tensor& t) {
  const int64_t rows = t.size(0), k = t.size(1), ld = t.stride(0);
  std::vector<float> out(size_t(rows * k));
  const auto* base = static_cast<const uint8_t*>(t.data_ptr());
  const size_t elem = t.element_size();
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const void* row = base + size_t(r * ld) * elem;
      for (int64_t c = 0; c < k; ++c) out[size_t(r * k + c)] = widen(row, t.dtype(), c);
    }
  });
  return out;
}

}  // namespace fp8kit::ops
