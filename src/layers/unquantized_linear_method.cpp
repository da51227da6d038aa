// UnquantizedLinearMethod (include/fp8kit/layers/unquantized_linear_method.h): the weight in the
// model dtype and y = x W^T + bias through ops::matmul_16bit. Tested by
// tests/cpu/test_linear_unquantized.cpp.
#include "fp8kit/layers/unquantized_linear_method.h"

#include <numeric>

#include "core/check.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/ops/gemm.h"

namespace fp8kit {

void UnquantizedLinearMethod::create_weights(LinearBase& layer, int64_t input_size_per_partition,
                                             const std::vector<int64_t>& output_partition_sizes, int64_t input_size,
                                             int64_t output_size, DType params_dtype) {
  Parameter weight;
  weight.name = "weight";
  weight.kind = ParameterKind::kModelWeight;
  const int64_t n = std::accumulate(output_partition_sizes.begin(), output_partition_sizes.end(), int64_t(0));
  weight.data = Tensor::empty({n, input_size_per_partition}, params_dtype, layer.device());  // [N, K]
  weight.output_dim = 0;
  weight.input_dim = 1;
  layer.register_parameter(std::move(weight));
}

void UnquantizedLinearMethod::process_weights_after_loading(const ForwardContext&, LinearBase& layer) {
  weight_ = layer.parameter("weight").data;
}

Tensor UnquantizedLinearMethod::apply(const ForwardContext& ctx, LinearBase& layer, const Tensor& x,
                                      const Tensor& bias) {
  FP8KIT_CHECK_ARG(weight_.defined(), "{}: process_weights_after_loading must run before the forward pass",
                   layer.prefix());
  const Tensor& w = weight_;  // [N, K]
  FP8KIT_CHECK_ARG(x.dtype() == w.dtype(), "{}: the input is {}, the layer's weights are {}", layer.prefix(),
                   dtype_name(x.dtype()), dtype_name(w.dtype()));
  const int64_t k = x.size(-1);
  const Tensor x2d = x.dim() == 2 ? x : x.contiguous().view({-1, k});
  const Tensor y = ops::matmul_16bit(ctx, x2d, w, bias);
  Shape out_shape = x.shape();
  out_shape.back() = y.size(1);
  return x.dim() == 2 ? y : y.view(out_shape);
}

}  // namespace fp8kit
