// LinearBase, ReplicatedLinear, ColumnParallelLinear and RowParallelLinear (include/fp8kit/
// layers/linear.h; vLLM linear.py): sizes per rank, the quantization method, forward, and the
// loaders of unfused layers. The fused layers are in linear_fused.cpp. Tested by
// tests/cpu/test_linear*.cpp.
#include "fp8kit/layers/linear.h"

#include <numeric>

#include "core/check.h"
#include "fp8kit/layers/quantization_config.h"
#include "fp8kit/layers/quantize_method.h"
#include "fp8kit/layers/unquantized_linear_method.h"
#include "layers/linear_load.h"
#include "layers/parameter_load.h"

namespace fp8kit {
namespace {

void check_input(const LinearBase& layer, const Tensor& x) {
  FP8KIT_CHECK_ARG(x.defined() && x.dim() >= 1 && x.size(-1) == layer.input_size_per_partition(),
                   "{}: the input must be [..., {}] (input features of this rank), got {}", detail::layer_name(layer.prefix()),
                   layer.input_size_per_partition(), x.defined() ? x.description() : std::string("an undefined tensor"));
  FP8KIT_CHECK_ARG(x.device() == layer.device(), "{}: the input is on {}, the layer on {}",
                   detail::layer_name(layer.prefix()), x.device().str(), layer.device().str());
}

}  // namespace

// ---- LinearBase ----

LinearBase::LinearBase(std::string prefix, int64_t input_size, int64_t output_size, const LinearOptions& options)
    : Layer(std::move(prefix), options.device),
      input_size_(input_size),
      output_size_(output_size),
      params_dtype_(options.params_dtype),
      parallel_(options.parallel),
      force_weight_only_(options.force_weight_only) {
  const std::string& name = detail::layer_name(this->prefix());
  FP8KIT_CHECK_ARG(input_size >= 1 && output_size >= 1, "{}: input_size and output_size must be positive, got {} and {}",
                   name, input_size, output_size);
  FP8KIT_CHECK_ARG(parallel_.tp_size >= 1 && parallel_.tp_rank >= 0 && parallel_.tp_rank < parallel_.tp_size,
                   "{}: tp_rank {} is not a rank of tp_size {}", name, parallel_.tp_rank, parallel_.tp_size);
  FP8KIT_CHECK_ARG(params_dtype_ == DType::kBF16 || params_dtype_ == DType::kF16 || params_dtype_ == DType::kF32,
                   "{}: params_dtype must be bf16, f16 or f32, got {}", name, dtype_name(params_dtype_));
  orig_dtype = params_dtype_;
  std::unique_ptr<QuantizeMethod> method;
  if (options.quant_config == nullptr) {
    method = std::make_unique<UnquantizedLinearMethod>();
  } else {
    method = options.quant_config->get_quant_method(*this, this->prefix());
    FP8KIT_CHECK_ARG(method != nullptr, "All linear layers should support quant method.");
  }
  FP8KIT_CHECK(dynamic_cast<LinearMethodBase*>(method.get()) != nullptr, ErrorCode::kInternal,
               "{}: {} is not a linear method", name, method->name());
  set_quant_method(std::move(method));
}

LinearMethodBase& LinearBase::linear_method() const { return static_cast<LinearMethodBase&>(*quant_method()); }

void LinearBase::create_weights(int64_t input_size_per_partition, std::vector<int64_t> output_partition_sizes,
                                bool bias, bool bias_is_partitioned) {
  input_size_per_partition_ = input_size_per_partition;
  output_partition_sizes_ = std::move(output_partition_sizes);
  output_size_per_partition_ =
      std::accumulate(output_partition_sizes_.begin(), output_partition_sizes_.end(), int64_t(0));
  linear_method().create_weights(*this, input_size_per_partition_, output_partition_sizes_, input_size_, output_size_,
                                 params_dtype_);
  if (bias) {
    Parameter p;
    p.name = "bias";
    p.kind = ParameterKind::kBias;
    p.data = Tensor::empty({bias_is_partitioned ? output_size_per_partition_ : output_size_}, params_dtype_, device());
    p.output_dim = 0;
    register_parameter(std::move(p));
  }
}

Tensor LinearBase::forward(const ForwardContext& ctx, const Tensor& x) {
  check_input(*this, x);
  return linear_method().apply(ctx, *this, x, forward_bias_);
}

void LinearBase::process_weights_after_loading(const ForwardContext& ctx) {
  linear_method().process_weights_after_loading(ctx, *this);
  const Parameter* bias = adds_bias() ? find_parameter("bias") : nullptr;
  forward_bias_ = bias != nullptr ? bias->data : Tensor();
}

// ---- ReplicatedLinear ----

ReplicatedLinear::ReplicatedLinear(std::string prefix, int64_t input_size, int64_t output_size,
                                   const LinearOptions& options)
    : LinearBase(std::move(prefix), input_size, output_size, options) {
  create_weights(input_size, {output_size}, options.bias, /*bias_is_partitioned=*/false);
}

void ReplicatedLinear::load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) {
  Parameter& p = parameter(name);
  detail::require_no_shard(*this, p, shard);
  detail::assert_and_load(*this, p, detail::scalar_as_1d(loaded), shard);
}

// ---- ColumnParallelLinear ----

ColumnParallelLinear::ColumnParallelLinear(std::string prefix, int64_t input_size, int64_t output_size,
                                           const LinearOptions& options)
    : ColumnParallelLinear(prefix, input_size, output_size, options,
                           {detail::divide_for_tp(prefix, output_size, options.parallel.tp_size, "output_size")}) {}

ColumnParallelLinear::ColumnParallelLinear(std::string prefix, int64_t input_size, int64_t output_size,
                                           const LinearOptions& options, std::vector<int64_t> output_partition_sizes)
    : LinearBase(std::move(prefix), input_size, output_size, options) {
  create_weights(input_size, std::move(output_partition_sizes), options.bias, /*bias_is_partitioned=*/true);
}

void ColumnParallelLinear::load_weight(std::string_view name, const Tensor& loaded,
                                       const std::optional<ShardId>& shard) {
  Parameter& p = parameter(name);
  detail::require_no_shard(*this, p, shard);
  detail::load_column_parallel(*this, p, loaded, shard);
}

// ---- RowParallelLinear ----

RowParallelLinear::RowParallelLinear(std::string prefix, int64_t input_size, int64_t output_size,
                                     const LinearOptions& options)
    : LinearBase(prefix, input_size, output_size, options) {
  const int64_t k = detail::divide_for_tp(this->prefix(), input_size, parallel_.tp_size, "input_size");
  // The bias is not split: every rank holds all of it and rank 0 adds it.
  create_weights(k, {output_size}, options.bias, /*bias_is_partitioned=*/false);
}

void RowParallelLinear::load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) {
  Parameter& p = parameter(name);
  detail::require_no_shard(*this, p, shard);
  const Tensor value = detail::scalar_as_1d(loaded);
  if (p.kind != ParameterKind::kModelWeight && p.kind != ParameterKind::kBlockScale) {
    return detail::assert_and_load(*this, p, value, shard);
  }
  // Weights narrow along K; block scales along K-blocks (ceil(K / block_k) per rank).
  const int64_t cols = p.data.size(1);
  const Tensor src = detail::narrow_loaded(*this, p, value, 1, parallel_.tp_rank * cols, cols, shard);
  detail::load_into(*this, p, p.data, src, shard);
}

}  // namespace fp8kit
