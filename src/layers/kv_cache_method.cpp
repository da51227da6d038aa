// BaseKVCacheMethod / Fp8KVCacheMethod (spec 1.13, vLLM kv_cache.py): the q/k/v/prob scale
// parameters of an attention layer and their processing after loading (k/v cases a/b/c, the
// deprecated single kv_scale, q and prob scales, the spec's warnings), with hazard H6 fixed
// (docs/compat.md). Tested in tests/cpu/test_kv_cache_method.cpp.
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"
#include "fp8kit/half.h"
#include "fp8kit/layers/attention.h"
#include "fp8kit/log.h"
#include "fp8kit/platform.h"

namespace fp8kit {
namespace {

constexpr const char* kScaleNames[] = {"q_scale", "k_scale", "v_scale", "prob_scale"};

constexpr const char* kKvNotPerTensor = "Only support per-tensor scaling factor for fp8 KV cache";
// Sic: the reference's text has no space between "factor" and "for".
constexpr const char* kQProbNotPerTensor = "Only support per-tensor scaling factorfor fp8-quantized Q/prob";

// vLLM doubles every *loaded* scale on platforms whose FP8 type is e4m3fnuz (ROCm MI300): fnuz
// values are half of OCP e4m3fn's for the same bits. fp8kit's platforms (NVIDIA GPUs, CPU) use
// e4m3fn, so this is false there; it stays a named rule so the reference's branch is visible.
bool platform_is_fp8_fnuz() { return fp8_dtype() == DType::kE4M3FNUZ; }
float loaded_scale_on_platform(float scale) { return platform_is_fp8_fnuz() ? scale * 2.0f : scale; }

// The value of a loaded scale when it holds one floating-point element (the reference's
// is_singleton_float; its comparisons with 0.0 need one element too); nullopt otherwise.
std::optional<float> single_float(const Tensor& t) {
  if (t.numel() != 1) return std::nullopt;
  const Tensor host = t.to(Device::cpu());
  switch (host.dtype()) {
    case DType::kF32:
      return *host.data<float>();
    case DType::kF64:
      return static_cast<float>(*host.data<double>());
    case DType::kF16:
      return f16_to_float(*host.data<Float16>());
    case DType::kBF16:
      return bf16_to_float(*host.data<BFloat16>());
    default:
      return std::nullopt;
  }
}

// The k/v scales the KV cache uses (spec 1.13 cases a/b/c). The reference converts a loaded
// scale with .tolist(), which is a float only for a 0-dim tensor: anything else (per-head
// [H_kv, 1, 1] scales of newer vLLM, [1] tensors) is the spec's ValueError.
struct KvScales {
  float k, v;
};

KvScales select_kv_scales(const Attention& layer, const Tensor& k_param, const Tensor& v_param) {
  const std::optional<float> k = single_float(k_param);
  const std::optional<float> v = single_float(v_param);
  FP8KIT_CHECK_ARG(k && v, "{}", kKvNotPerTensor);
  if (*k > 0.0f && *v > 0.0f) {  // (a) both loaded
    FP8KIT_CHECK_ARG(k_param.dim() == 0 && v_param.dim() == 0, "{}", kKvNotPerTensor);
    return {loaded_scale_on_platform(*k), loaded_scale_on_platform(*v)};
  }
  if (*k < 0.0f && *v < 0.0f) return {1.0f, 1.0f};  // (b) neither loaded: defaults, never doubled
  // (c) the deprecated single kv_scale, loaded into k_scale only (remap_kv_scale_name). The
  // reference asserts k > 0 and gives both max(k, v); past the assert v is not > 0 (else case a),
  // so Python's max returns k.
  FP8KIT_CHECK_ARG(*k > 0.0f,
                   "attention {}: unusable KV-cache scales k_scale {} and v_scale {}: loaded scales must be positive, "
                   "and a single one must be k_scale (the deprecated kv_scale)",
                   layer.prefix(), *k, *v);
  FP8KIT_CHECK_ARG(k_param.dim() == 0, "{}", kKvNotPerTensor);
  const float scale = loaded_scale_on_platform(*k);
  return {scale, scale};
}

// Python's repr of a float, as the reference's f-string prints 1.0: "1.0", "0.0213", "1e-05".
std::string py_float_repr(float value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // "1" -> "1.0"; inf, nan as is
  return text;
}

}  // namespace

void BaseKVCacheMethod::create_weights(Attention& layer) {
  // -1.0 marks "not loaded": every real scale is positive.
  for (const char* name : kScaleNames) {
    Parameter scale;
    scale.name = name;
    scale.kind = ParameterKind::kPlain;
    scale.data = Tensor::scalar_f32(-1.0f).to(layer.device());
    layer.register_parameter(std::move(scale));
  }
}

void BaseKVCacheMethod::apply(Attention& layer) {
  fail(ErrorCode::kInternal, "{}.apply should not be called.", name());
}

void BaseKVCacheMethod::process_weights_after_loading(Attention& layer) {
  // A second call (weights reloaded into a processed layer) finds the parameters gone: nothing
  // to do, as in later vLLM.
  int present = 0;
  for (const char* name : kScaleNames) present += layer.find_parameter(name) != nullptr ? 1 : 0;
  if (present == 0) return;
  FP8KIT_CHECK(present == 4, ErrorCode::kInternal,
               "attention {}: some of q_scale, k_scale, v_scale, prob_scale were removed before processing",
               layer.prefix());
  const std::optional<float> q_loaded = single_float(layer.parameter("q_scale").data);
  const std::optional<float> prob_loaded = single_float(layer.parameter("prob_scale").data);

  // Every check before the first write, in the reference's order (the KV error first), so a
  // failure leaves the layer as loaded.
  const bool kv_part = layer.kv_cache_dtype() != "auto" && !layer.calculate_kv_scales;
  std::optional<KvScales> kv;
  if (kv_part) kv = select_kv_scales(layer, layer.parameter("k_scale").data, layer.parameter("v_scale").data);
  FP8KIT_CHECK_ARG(q_loaded && prob_loaded, "{}", kQProbNotPerTensor);

  // Hazard H6: the reference writes k_scale into q_scale here, then overwrites it with 1.0 in
  // the Q/prob part. fp8kit keeps the fallback the warning announces.
  bool q_from_k = false;
  if (kv) {
    if (*q_loaded < 0.0f) {
      log_warning(
          "Checkpoint does not provide a q scaling factor. Setting it to k_scale. This only matters for the "
          "flash-attn backend.");
      layer.q_scale.copy_(Tensor::scalar_f32(kv->k));
      q_from_k = true;
    }
    layer.k_scale.copy_(Tensor::scalar_f32(kv->k));
    layer.v_scale.copy_(Tensor::scalar_f32(kv->v));
    layer.k_scale_float = kv->k;
    layer.v_scale_float = kv->v;
    if (kv->k == 1.0f && kv->v == 1.0f && layer.kv_cache_dtype().find("e5m2") == std::string::npos) {
      log_warning(
          "Using KV cache scaling factor 1.0 for fp8_e4m3. This may cause accuracy issues. Please make sure "
          "k/v_scale scaling factors are available in the fp8 checkpoint.");
    }
  }

  // Q and prob scales: always, whatever the KV-cache dtype.
  float q = 1.0f;
  if (*q_loaded > 0.0f) {
    q = loaded_scale_on_platform(*q_loaded);
    layer.calculate_kv_scales = false;  // a calibrated q_scale turns the dynamic scales off
  }
  const float prob = *prob_loaded > 0.0f ? loaded_scale_on_platform(*prob_loaded) : 1.0f;
  if (!q_from_k) layer.q_scale.copy_(Tensor::scalar_f32(q));
  layer.prob_scale.copy_(Tensor::scalar_f32(prob));
  // The reference's test (q == 1.0 is how it sees a missing q_scale); the text names the q in
  // effect, which is k_scale after the H6 fallback.
  if (layer.kv_cache_dtype() == "fp8" && (q == 1.0f || prob == 1.0f)) {
    log_warning(fmt::format(
        "Using uncalibrated q_scale {} and/or prob_scale {} with fp8 attention. This may cause accuracy issues. "
        "Please make sure q/prob scaling factors are available in the fp8 checkpoint.",
        py_float_repr(q_from_k ? kv->k : q), py_float_repr(prob)));
  }

  for (const char* name : kScaleNames) layer.remove_parameter(name);
}

}  // namespace fp8kit
