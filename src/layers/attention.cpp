// Attention (spec 1.13, 2.4): kv_cache_dtype validation, the default scales and the ranges of the
// dynamic scales, the KV-cache method chosen by the quantization config, calc_kv_scales. The
// method's work on the loaded scales is in kv_cache_method.cpp. Tested in
// tests/cpu/test_attention.cpp.
#include "fp8kit/layers/attention.h"

#include <cmath>
#include <string_view>

#include "core/check.h"
#include "fp8kit/half.h"
#include "fp8kit/layers/quantization_config.h"
#include "fp8kit/layers/unquantized_linear_method.h"

namespace fp8kit {
namespace {

// vLLM's CacheConfig accepts exactly these (config-time check, before any layer exists).
bool is_known_kv_cache_dtype(const std::string& dtype) {
  return dtype == "auto" || dtype == "fp8" || dtype == "fp8_e4m3" || dtype == "fp8_e5m2";
}

template <typename T, typename ToFloat>
float abs_max_of(const T* values, int64_t n, ToFloat to_float) {
  float result = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(to_float(values[i]));
    if (std::isnan(a)) return a;  // torch's max propagates NaN
    if (a > result) result = a;
  }
  return result;
}

// torch.abs(t).max() widened to f32 (exact: abs and max do not round). Device tensors are copied
// to the host: this runs once per layer, on the first forward with dynamic scales.
float abs_max(const Tensor& t, const char* what) {
  FP8KIT_CHECK_ARG(t.defined() && t.numel() > 0, "calc_kv_scales: {} is empty", what);
  const Tensor host = t.to(Device::cpu()).contiguous();
  switch (host.dtype()) {
    case DType::kF32:
      return abs_max_of(host.data<float>(), host.numel(), [](float x) { return x; });
    case DType::kF16:
      return abs_max_of(host.data<Float16>(), host.numel(), [](Float16 x) { return f16_to_float(x); });
    case DType::kBF16:
      return abs_max_of(host.data<BFloat16>(), host.numel(), [](BFloat16 x) { return bf16_to_float(x); });
    default:
      fail(ErrorCode::kInvalidArgument, "calc_kv_scales: {} must be f32, f16 or bf16, got {}", what, t.description());
  }
}

}  // namespace

Attention::Attention(std::string prefix, int64_t num_heads, int64_t head_size, int64_t num_kv_heads,
                     const AttentionOptions& options)
    : Layer(std::move(prefix), options.device),
      calculate_kv_scales(options.calculate_kv_scales),
      num_heads_(num_heads),
      head_size_(head_size),
      num_kv_heads_(num_kv_heads),
      kv_cache_dtype_(options.kv_cache_dtype) {
  FP8KIT_CHECK_ARG(is_known_kv_cache_dtype(kv_cache_dtype_), "Unknown kv cache dtype: {}", kv_cache_dtype_);
  FP8KIT_CHECK_ARG(num_heads > 0 && head_size > 0 && num_kv_heads > 0,
                   "attention {}: num_heads ({}), head_size ({}) and num_kv_heads ({}) must be positive",
                   this->prefix(), num_heads, head_size, num_kv_heads);
  FP8KIT_CHECK_ARG(num_heads % num_kv_heads == 0, "attention {}: num_heads ({}) is not a multiple of num_kv_heads ({})",
                   this->prefix(), num_heads, num_kv_heads);

  // Four separate tensors: each scale is later updated in place.
  k_scale = Tensor::scalar_f32(1.0f).to(device());
  v_scale = Tensor::scalar_f32(1.0f).to(device());
  q_scale = Tensor::scalar_f32(1.0f).to(device());
  prob_scale = Tensor::scalar_f32(1.0f).to(device());
  // A range of 0 would make every dynamic scale infinite.
  FP8KIT_CHECK_ARG(options.q_range > 0 && options.k_range > 0 && options.v_range > 0,
                   "attention {}: the scale ranges must be positive, got q {}, k {}, v {}", this->prefix(),
                   options.q_range, options.k_range, options.v_range);
  q_range = options.q_range;
  k_range = options.k_range;
  v_range = options.v_range;

  if (options.quant_config == nullptr) return;
  std::unique_ptr<QuantizeMethod> method = options.quant_config->get_quant_method(*this, this->prefix());
  // Configs that leave attention unquantized hand out UnquantizedLinearMethod (vLLM accepts it).
  if (method == nullptr || dynamic_cast<UnquantizedLinearMethod*>(method.get()) != nullptr) return;
  auto* kv_method = dynamic_cast<BaseKVCacheMethod*>(method.get());
  FP8KIT_CHECK(kv_method != nullptr, ErrorCode::kInternal,
               "attention {}: the quantization config gave it {}, which is not a KV-cache method", this->prefix(),
               method->name());
  FP8KIT_CHECK_ARG(kv_cache_dtype_ != "fp8_e5m2", "fp8_e5m2 kv-cache is not supported with fp8 checkpoints.");
  set_quant_method(std::move(method));
  kv_method->create_weights(*this);
}

void Attention::calc_kv_scales(const Tensor& q, const Tensor& k, const Tensor& v) {
  // All three first, so a bad input leaves the layer as it was.
  const float q_value = abs_max(q, "query") / static_cast<float>(q_range);
  const float k_value = abs_max(k, "key") / static_cast<float>(k_range);
  const float v_value = abs_max(v, "value") / static_cast<float>(v_range);
  q_scale.copy_(Tensor::scalar_f32(q_value));
  k_scale.copy_(Tensor::scalar_f32(k_value));
  v_scale.copy_(Tensor::scalar_f32(v_value));
  k_scale_float = k_value;
  v_scale_float = v_value;
  calculate_kv_scales = false;
}

void Attention::process_weights_after_loading() {
  auto* kv_method = dynamic_cast<BaseKVCacheMethod*>(quant_method());
  if (kv_method != nullptr) kv_method->process_weights_after_loading(*this);
}

}  // namespace fp8kit
