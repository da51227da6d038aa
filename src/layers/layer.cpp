// Layer (include/fp8kit/layers/layer.h): the parameter registry every layer shares and the plain
// weight loader. Tested by tests/cpu/test_layer.cpp.
#include "fp8kit/layers/layer.h"

#include "core/check.h"
#include "fp8kit/layers/quantize_method.h"
#include "layers/parameter_load.h"

namespace fp8kit {

Layer::Layer(std::string prefix, Device device) : prefix_(std::move(prefix)), device_(device) {}

Layer::~Layer() = default;

Parameter& Layer::register_parameter(Parameter parameter) {
  // vLLM's set_weight_attrs refuses to overwrite an attribute: two parameters of one name are a
  // bug in a quantization method, not bad input.
  FP8KIT_CHECK(!parameters_.contains(parameter.name), ErrorCode::kInternal, "Overwriting existing tensor attribute: {}",
               parameter.name);
  std::string name = parameter.name;
  return parameters_.emplace(std::move(name), std::move(parameter)).first->second;
}

Parameter* Layer::find_parameter(std::string_view name) {
  auto it = parameters_.find(name);
  return it == parameters_.end() ? nullptr : &it->second;
}

const Parameter* Layer::find_parameter(std::string_view name) const {
  auto it = parameters_.find(name);
  return it == parameters_.end() ? nullptr : &it->second;
}

Parameter& Layer::parameter(std::string_view name) {
  return const_cast<Parameter&>(static_cast<const Layer&>(*this).parameter(name));
}

const Parameter& Layer::parameter(std::string_view name) const {
  const Parameter* p = find_parameter(name);
  FP8KIT_CHECK_ARG(p != nullptr, "{}: the layer has no parameter '{}'", prefix_.empty() ? "layer" : prefix_, name);
  return *p;
}

void Layer::remove_parameter(std::string_view name) {
  auto it = parameters_.find(name);
  if (it != parameters_.end()) parameters_.erase(it);
}

void Layer::load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) {
  Parameter& p = parameter(name);
  FP8KIT_CHECK_ARG(!shard.has_value(), "{}: this layer has no shards", detail::load_site(*this, p, shard));
  detail::assert_and_load(*this, p, loaded, shard);
}

void Layer::set_quant_method(std::unique_ptr<QuantizeMethod> method) { quant_method_ = std::move(method); }

}  // namespace fp8kit
