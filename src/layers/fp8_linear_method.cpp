// Fp8LinearMethod (include/fp8kit/layers/fp8_linear_method.h; spec 1.2, 1.4, 1.5): the choice of
// the weight-only path, create_weights with the spec's block-shape errors and not-loaded
// sentinels, and apply. process_weights_after_loading is in fp8_linear_method_process.cpp.
// Tested by tests/cpu/test_fp8_linear_method*.cpp.
#include "fp8kit/layers/fp8_linear_method.h"

#include <numeric>
#include <string>

#include "core/check.h"
#include "core/checked_math.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/linear.h"
#include "fp8kit/platform.h"
#include "layers/fp8_linear_method_internal.h"

namespace fp8kit {
namespace {

// An f32 tensor of `shape` on `device` with every element `value`.
Tensor filled_f32(const Shape& shape, float value, Device device) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = value;
  return t.to(device);
}

Parameter make_parameter(std::string name, ParameterKind kind, Tensor data, bool sharded_dims) {
  Parameter p;
  p.name = std::move(name);
  p.kind = kind;
  p.data = std::move(data);
  if (sharded_dims) {
    p.output_dim = 0;
    p.input_dim = 1;
  }
  return p;
}

// The spec's block-shape checks (fp8.py create_weights): a row-parallel slice of K, and the output
// partitions of column-parallel and merged layers (merged ones at TP = 1 too), must hold whole
// blocks.
void validate_block_shape(const LinearBase& layer, int64_t k, const std::vector<int64_t>& parts, int64_t n,
                          int64_t input_size, int64_t output_size, int64_t block_n, int64_t block_k) {
  const int64_t tp = layer.parallel().tp_size;
  if (tp > 1 && input_size / k == tp && k % block_k != 0) {
    fail(ErrorCode::kInvalidArgument,
         "Weight input_size_per_partition = {} is not divisible by weight quantization block_k = {}.", k, block_k);
  }
  if ((tp > 1 && output_size / n == tp) || parts.size() > 1) {
    for (int64_t s : parts) {
      FP8KIT_CHECK_ARG(s % block_n == 0,
                       "Weight output_partition_size = {} is not divisible by weight quantization block_n = {}.", s,
                       block_n);
    }
  }
}

// The 2-D view of x (the spec's input.view(-1, K)), and the output shape [..., n].
Tensor as_2d(const Tensor& x) { return x.dim() == 2 ? x : x.contiguous().view({-1, x.size(-1)}); }

Tensor as_output(const Tensor& y2d, const Tensor& x) {
  if (x.dim() == 2) return y2d;
  Shape shape = x.shape();
  shape.back() = y2d.size(1);
  return y2d.view(shape);
}

}  // namespace

Fp8LinearMethod::Fp8LinearMethod(std::shared_ptr<const Fp8Config> config)
    : config_(std::move(config)), block_quant_(config_->weight_block_size.has_value()) {}

bool Fp8LinearMethod::use_weight_only(const LinearBase& layer) const {
  // The spec's VLLM_TEST_FORCE_FP8_MARLIN: the fallback path runs (and is tested) anywhere.
  if (layer.force_weight_only()) return true;
  // FP8 tensor cores start at sm_89; a CPU layer runs W8A8 on the reference.
  return layer.device().is_cuda() && !has_device_capability(89, layer.device().index);
}

const PreparedFp8Linear& Fp8LinearMethod::prepared() const {
  FP8KIT_CHECK_ARG(prepared_.has_value(), "process_weights_after_loading must run before the forward pass");
  return *prepared_;
}

void Fp8LinearMethod::create_weights(LinearBase& layer, int64_t input_size_per_partition,
                                     const std::vector<int64_t>& output_partition_sizes, int64_t input_size,
                                     int64_t output_size, DType params_dtype) {
  const int64_t k = input_size_per_partition;
  const int64_t n = std::accumulate(output_partition_sizes.begin(), output_partition_sizes.end(), int64_t(0));
  const int64_t shards = static_cast<int64_t>(output_partition_sizes.size());
  weight_only_ = use_weight_only(layer);
  layer.logical_widths = output_partition_sizes;
  layer.orig_dtype = params_dtype;
  layer.weight_block_size = config_->weight_block_size;
  int64_t block_n = 0, block_k = 0;
  if (block_quant_) {
    block_n = (*config_->weight_block_size)[0];
    block_k = (*config_->weight_block_size)[1];
    validate_block_shape(layer, k, output_partition_sizes, n, input_size, output_size, block_n, block_k);
  }
  const bool serialized = config_->is_checkpoint_fp8_serialized;
  const Device device = layer.device();
  // [N, K]: FP8 from the checkpoint, or the model dtype for online quantization.
  layer.register_parameter(make_parameter("weight", ParameterKind::kModelWeight,
                                          Tensor::empty({n, k}, serialized ? DType::kE4M3FN : params_dtype, device),
                                          true));
  if (!serialized) return;  // online: the scale comes from process_weights_after_loading
  if (block_quant_) {
    layer.register_parameter(make_parameter(
        "weight_scale_inv", ParameterKind::kBlockScale,
        filled_f32({ceil_div(n, block_n), ceil_div(k, block_k)}, detail::kScaleNotLoaded, device), true));
  } else {
    layer.register_parameter(make_parameter("weight_scale", ParameterKind::kPerTensorScale,
                                            filled_f32({shards}, detail::kScaleNotLoaded, device), false));
  }
  if (config_->activation_scheme == "static") {
    layer.register_parameter(make_parameter("input_scale", ParameterKind::kPerTensorScale,
                                            filled_f32({shards}, detail::kScaleNotLoaded, device), false));
  }
}

Tensor Fp8LinearMethod::apply(const ForwardContext& ctx, LinearBase& layer, const Tensor& x, const Tensor& bias) {
  FP8KIT_CHECK_ARG(prepared_.has_value(), "{}: process_weights_after_loading must run before the forward pass",
                   layer.prefix());
  const PreparedFp8Linear& p = *prepared_;
  if (p.weight_only) {
    // W8A16: activations stay in the model dtype, which is also the output dtype.
    FP8KIT_CHECK_ARG(x.dtype() == p.out_dtype, "{}: the weight-only path takes {} inputs (the model dtype), got {}",
                     layer.prefix(), dtype_name(p.out_dtype), x.description());
    ops::WeightOnlyMmOptions o;
    o.bias = bias;
    o.block = p.block;
    return as_output(ops::weight_only_mm(ctx, as_2d(x), p.weight, p.weight_scale, o), x);
  }
  ops::Fp8LinearOptions o;
  o.bias = bias;
  o.out_dtype = p.out_dtype;
  o.activation = p.activation;
  o.weight_block = p.block;
  o.input_scale = p.input_scale;
  return ops::fp8_linear(ctx, x, p.weight, p.weight_scale, o);
}

}  // namespace fp8kit
