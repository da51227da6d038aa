#include "convert/quantization_error.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "convert/checkpoint_layout.h"
#include "core/check.h"
#include "core/names.h"
#include "core/parallel.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/ops/quant.h"

namespace fp8kit::convert {
namespace {

Tensor as_f32(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), DType::kF32);
  float* o = out.data<float>();
  const Tensor c = t.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) {
    switch (c.dtype()) {
      case DType::kBF16: o[i] = bf16_to_float(c.data<BFloat16>()[i]); break;
      case DType::kF16: o[i] = f16_to_float(c.data<Float16>()[i]); break;
      case DType::kF32: o[i] = c.data<float>()[i]; break;
      default: fail(ErrorCode::kInvalidArgument, "expected a 16- or 32-bit float tensor, got {}", c.description());
    }
  }
  return out;
}

}  // namespace

std::vector<WeightError> measure_quantization_error(const std::string& reference_dir, const std::string& fp8_dir) {
  const Checkpoint reference = Checkpoint::open(reference_dir);
  const Checkpoint quantized = Checkpoint::open(fp8_dir);
  const CheckpointLayout layout = analyze_checkpoint(quantized);
  std::vector<WeightError> errors;
  constexpr int64_t kColumns = 8;
  for (const auto& [name, w] : layout.fp8_weights) {
    FP8KIT_CHECK_ARG(reference.contains(name), "{} has no tensor {}", shown_path(reference_dir), quote_name(name));
    FP8KIT_CHECK_ARG(!w.scheme.empty(), "{}: {} has no usable scale", shown_path(fp8_dir), quote_name(name));
    const Tensor ref = as_f32(reference.tensor(name));
    const Tensor deq = ops::dequantize_weight(ForwardContext::from_environment(), quantized.tensor(name), scale_as_f32(quantized, w.scale), DType::kF32,
                                              w.block);
    const int64_t n = ref.size(0), k = ref.size(1);
    std::vector<double> x(k * kColumns);
    uint64_t state = 0x243f6a8885a308d3ull;
    for (double& v : x) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v = double(int64_t(state >> 11) - (int64_t(1) << 52)) / double(int64_t(1) << 52);
    }
    const float* r = ref.data<float>();
    const float* d = deq.data<float>();
    double dw = 0, nw = 0, dy = 0, ny = 0, worst_row = 0;
    std::mutex mutex;
    parallel_for(n, 16, [&](int64_t begin, int64_t end) {
      double ldw = 0, lnw = 0, ldy = 0, lny = 0, lworst = 0;
      for (int64_t i = begin; i < end; ++i) {
        double yr[kColumns] = {}, yd[kColumns] = {};
        double row_d = 0, row_n = 0;
        for (int64_t j = 0; j < k; ++j) {
          const double a = r[i * k + j], b = d[i * k + j];
          row_d += (a - b) * (a - b);
          row_n += a * a;
          for (int64_t c = 0; c < kColumns; ++c) {
            yr[c] += a * x[j * kColumns + c];
            yd[c] += b * x[j * kColumns + c];
          }
        }
        ldw += row_d;
        lnw += row_n;
        if (row_n > 0) lworst = std::max(lworst, std::sqrt(row_d / row_n));
        for (int64_t c = 0; c < kColumns; ++c) {
          ldy += (yr[c] - yd[c]) * (yr[c] - yd[c]);
          lny += yr[c] * yr[c];
        }
      }
      std::lock_guard<std::mutex> lock(mutex);
      dw += ldw;
      nw += lnw;
      dy += ldy;
      ny += lny;
      worst_row = std::max(worst_row, lworst);
    });
    errors.push_back({name, nw > 0 ? std::sqrt(dw / nw) : std::sqrt(dw), ny > 0 ? std::sqrt(dy / ny) : std::sqrt(dy),
                      worst_row});
  }
  return errors;
}

}  // namespace fp8kit::convert
