#include "ops/gemm/weight_only_ref.h"

#include <vector>

#include "core/parallel.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"

namespace fp8kit::ops {
namespace {

float load16(const void* p, DType dtype, int64_t i) {
  return dtype == DType::kBF16 ? bf16_to_float(static_cast<const BFloat16*>(p)[i])
                               : f16_to_float(static_cast<const Float16*>(p)[i]);
}

float weight_scale(const WeightOnlyMmArgs& a, int64_t row, int64_t col) {
  switch (a.scale_kind) {
    case ScaleKind::kTensor: return a.scale[0];
    case ScaleKind::kRow: return a.scale[row];
    case ScaleKind::kBlock: return a.scale[(row / a.block_n) * a.s_row_stride + (col / a.block_k) * a.s_col_stride];
  }
  return 0.0f;
}

}  // namespace

void weight_only_mm_ref(const WeightOnlyMmArgs& a) {
  // Dequantized weights [n, k] and activations [m, k] as float, once.
  std::vector<float> w(size_t(a.n * a.k)), x(size_t(a.m * a.k));
  parallel_for(a.n, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < a.k; ++c) {
        w[size_t(r * a.k + c)] = e4m3fn_bits_to_float(a.w[r * a.ldw + c]) * weight_scale(a, r, c);
      }
    }
  });
  for (int64_t i = 0; i < a.m; ++i) {
    for (int64_t c = 0; c < a.k; ++c) x[size_t(i * a.k + c)] = load16(a.x, a.act_dtype, i * a.ldx + c);
  }
  parallel_for(a.m, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < a.n; ++j) {
        double s = 0;
        for (int64_t c = 0; c < a.k; ++c) s += double(x[size_t(i * a.k + c)]) * double(w[size_t(j * a.k + c)]);
        float y = float(s);
        if (a.bias != nullptr) y += load16(a.bias, a.act_dtype, j);
        if (a.act_dtype == DType::kBF16) {
          static_cast<BFloat16*>(a.out)[i * a.ldc + j] = float_to_bf16(y);
        } else {
          static_cast<Float16*>(a.out)[i * a.ldc + j] = float_to_f16(y);
        }
      }
    }
  });
}

}  // namespace fp8kit::ops
