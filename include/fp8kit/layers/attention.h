// The attention layer's quantization state (spec 1.13): the KV-cache dtype and the q/k/v/prob
// scales an FP8 KV cache and FP8 attention use. fp8kit does not run attention itself; an engine
// reads these scales (and the KV-cache ops use them).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "fp8kit/layers/layer.h"
#include "fp8kit/layers/quantize_method.h"

namespace fp8kit {

class QuantizationConfig;
class BaseKVCacheMethod;

struct AttentionOptions {
  std::string kv_cache_dtype = "auto";  // auto | fp8 | fp8_e4m3 | fp8_e5m2
  bool calculate_kv_scales = false;     // compute k/v/q scales from the first forward's data
  const QuantizationConfig* quant_config = nullptr;  // only used while the layer is built
  Device device = Device::cpu();
  // Ranges of the dynamic scales (vLLM's Q/K/V_SCALE_CONSTANT; Overrides::q/k/v_scale_constant,
  // which the model loader passes): positive.
  int q_range = 200, k_range = 200, v_range = 100;
};

class Attention : public Layer {
 public:
  // The quant method is quant_config->get_quant_method(*this, prefix) when that is a
  // BaseKVCacheMethod (which then registers q/k/v/prob_scale); an UnquantizedLinearMethod or no
  // method leaves the layer without one; any other method is Error(kInternal).
  // Errors (kInvalidArgument; spec texts): "Unknown kv cache dtype: {d}"; with a KV-cache method
  // and fp8_e5m2: "fp8_e5m2 kv-cache is not supported with fp8 checkpoints."; head counts that
  // are not positive, or num_heads not a multiple of num_kv_heads; a range that is not positive.
  Attention(std::string prefix, int64_t num_heads, int64_t head_size, int64_t num_kv_heads,
            const AttentionOptions& options = {});

  int64_t num_heads() const { return num_heads_; }
  int64_t head_size() const { return head_size_; }
  int64_t num_kv_heads() const { return num_kv_heads_; }
  const std::string& kv_cache_dtype() const { return kv_cache_dtype_; }
  bool calculate_kv_scales = false;

  // The scales in effect (f32, 0-dim, on the layer's device; 1.0 until set) and their host
  // copies. Updates write into these tensors (copy_), so views an engine holds stay current.
  Tensor k_scale, v_scale, q_scale, prob_scale;
  float k_scale_float = 1.0f, v_scale_float = 1.0f;
  // Ranges of the dynamic scales: AttentionOptions' q/k/v_range.
  int q_range = 200, k_range = 200, v_range = 100;

  // --calculate-kv-scales (spec 2.4): q_scale = fl(max|q| / q_range) in f32 over the whole
  // tensor, likewise k and v (a NaN anywhere gives a NaN scale, as torch's max); then
  // calculate_kv_scales = false. As in vLLM the engine calls it while calculate_kv_scales is set
  // (the first eligible forward); a call computes the scales whatever the flag says.
  // q, k, v: f32|f16|bf16, any shape (not empty) and strides, on CPU or CUDA.
  void calc_kv_scales(const Tensor& q, const Tensor& k, const Tensor& v);
  // The KV-cache method's post-processing of the loaded scales (after the linear layers'); a
  // no-op without a KV-cache method and once the method has removed its parameters.
  void process_weights_after_loading();

 private:
  int64_t num_heads_, head_size_, num_kv_heads_;
  std::string kv_cache_dtype_;
};

// The base of KV-cache quantization methods (vLLM's BaseKVCacheMethod).
class BaseKVCacheMethod : public QuantizeMethod {
 public:
  std::string name() const override { return "BaseKVCacheMethod"; }
  // q_scale, k_scale, v_scale, prob_scale: 0-dim f32 kPlain parameters of -1.0 ("not loaded").
  virtual void create_weights(Attention& layer);
  // Spec 1.13: picks the k/v scales (loaded, defaults, or the deprecated single kv_scale), q and
  // prob scales, doubles them on fnuz platforms, warns as the spec does, removes the parameters.
  // Hazard H6 fixed: a missing q_scale falls back to k_scale and stays so.
  // Errors (kInvalidArgument): "Only support per-tensor scaling factor for fp8 KV cache" and
  // "Only support per-tensor scaling factorfor fp8-quantized Q/prob" (spec texts, sic) for
  // scales that are not single floats (per-head scales included); a v_scale loaded without a
  // positive k_scale (the reference's assert).
  virtual void process_weights_after_loading(Attention& layer);
  // RuntimeError of the spec: Error(kInternal) "{name}.apply should not be called."
  void apply(Attention& layer);
};

class Fp8KVCacheMethod : public BaseKVCacheMethod {
 public:
  explicit Fp8KVCacheMethod(std::shared_ptr<const Fp8Config> config) : config_(std::move(config)) {}
  std::string name() const override { return "Fp8KVCacheMethod"; }
  const Fp8Config& quant_config() const { return *config_; }

 private:
  std::shared_ptr<const Fp8Config> config_;
};

// Checkpoint names of KV-cache scales -> the attention parameter they load into (spec 1.13
// maybe_remap_kv_scale_name; FORMATS.md 1f), matched on the name's last components:
//   "X.kv_scale" (deprecated; logs the reference's DEPRECATED warning) -> "X.attn.k_scale"
//   "X.{k,v,q,prob}_scale" -> "X.attn.{k,v,q,prob}_scale" ("self_attn.k_scale" -> "self_attn.attn.k_scale")
//   ModelOpt "self_attn.{k,v,q}_proj.{k,v,q}_scale" -> "self_attn.attn.{k,v,q}_scale"
//   fused "self_attn.qkv_proj.{k,v,q}_scale" -> "self_attn.attn.{k,v,q}_scale"
//   names already in engine form ("self_attn.attn.k_scale") come back unchanged.
// Returns nullopt for names that are not KV-cache scales. compressed-tensors names
// ("k_proj.output_scale", ...) are QuantizationConfig::get_cache_scale's: the caller asks it
// first (as vLLM's model loaders do), then this function; the caller also checks that the
// result names a parameter of an attention layer, and skips the tensor otherwise.
std::optional<std::string> remap_kv_scale_name(const std::string& name);

}  // namespace fp8kit
