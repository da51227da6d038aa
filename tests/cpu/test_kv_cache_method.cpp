// BaseKVCacheMethod / Fp8KVCacheMethod (spec 1.13): create_weights, apply's error, and every
// branch of process_weights_after_loading (k/v cases a/b/c, the deprecated kv_scale, q and prob
// scales, calculate_kv_scales, the ValueErrors) with the spec's warning texts; hazard H6 fixed;
// the expectations of vLLM's test_kv_cache_model_load_and_run and test_load_fp16_model (1.15).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "expect_error.h"
#include "test_context.h"
#include "test_linear_util.h"
#include "fp8kit/half.h"
#include "fp8kit/layers/attention.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/log.h"

namespace fp8kit {
namespace {

using testing::expect_error;
using testing::expect_invalid;

const std::string kPrefix = "model.layers.0.self_attn.attn";

const std::string kQFallbackWarning =
    "Checkpoint does not provide a q scaling factor. Setting it to k_scale. This only matters for the flash-attn "
    "backend.";
const std::string kDefaultKvWarning =
    "Using KV cache scaling factor 1.0 for fp8_e4m3. This may cause accuracy issues. Please make sure k/v_scale "
    "scaling factors are available in the fp8 checkpoint.";
std::string uncalibrated_warning(const std::string& q, const std::string& prob) {
  return "Using uncalibrated q_scale " + q + " and/or prob_scale " + prob +
         " with fp8 attention. This may cause accuracy issues. Please make sure q/prob scaling factors are available "
         "in the fp8 checkpoint.";
}
const std::string kKvNotPerTensor = "Only support per-tensor scaling factor for fp8 KV cache";
const std::string kQProbNotPerTensor = "Only support per-tensor scaling factorfor fp8-quantized Q/prob";

using linear_test::LogCapture;

float value_of(const Tensor& t) { return t.to(Device::cpu()).item_f32(); }

AttentionOptions kv_dtype(const std::string& kv_cache_dtype) {
  AttentionOptions options;
  options.kv_cache_dtype = kv_cache_dtype;
  return options;
}

// An attention layer of an FP8 checkpoint (or online FP8 when serialized is false).
struct Fp8Attention {
  explicit Fp8Attention(const std::string& kv_cache_dtype, bool serialized = true, bool calculate_kv_scales = false)
      : config(serialized, serialized ? "static" : "dynamic") {
    AttentionOptions options;
    options.kv_cache_dtype = kv_cache_dtype;
    options.calculate_kv_scales = calculate_kv_scales;
    options.quant_config = &config;
    layer = std::make_unique<Attention>(kPrefix, 32, 128, 8, options);
  }
  void load(const std::string& name, float value) { layer->load_weight(name, Tensor::scalar_f32(value), std::nullopt); }
  void process() { layer->process_weights_after_loading(); }

  Fp8Config config;
  std::unique_ptr<Attention> layer;
};

void expect_scales(const Attention& a, float q, float k, float v, float prob) {
  EXPECT_EQ(value_of(a.q_scale), q);
  EXPECT_EQ(value_of(a.k_scale), k);
  EXPECT_EQ(value_of(a.v_scale), v);
  EXPECT_EQ(value_of(a.prob_scale), prob);
  EXPECT_EQ(a.k_scale_float, k);
  EXPECT_EQ(a.v_scale_float, v);
}

// ---- create_weights, apply ----

TEST(KVCacheMethod, CreateWeightsRegistersFourUnloadedScales) {
  Attention attn(kPrefix, 8, 64, 2, kv_dtype("fp8"));
  BaseKVCacheMethod method;
  method.create_weights(attn);
  ASSERT_EQ(attn.parameters().size(), 4u);
  for (const char* name : {"q_scale", "k_scale", "v_scale", "prob_scale"}) {
    const Parameter& p = attn.parameter(name);
    EXPECT_EQ(p.name, name);
    EXPECT_EQ(p.kind, ParameterKind::kPlain);
    EXPECT_EQ(p.data.shape(), Shape{});
    EXPECT_EQ(p.data.dtype(), DType::kF32);
    EXPECT_TRUE(p.data.device() == attn.device());
    EXPECT_EQ(value_of(p.data), -1.0f);
  }
  // Each is its own tensor.
  attn.parameter("k_scale").data.copy_(Tensor::scalar_f32(2.0f));
  EXPECT_EQ(value_of(attn.parameter("v_scale").data), -1.0f);
  // A second create_weights is a bug (vLLM's set_weight_attrs assert).
  expect_error([&] { method.create_weights(attn); }, ErrorCode::kInternal,
               "Overwriting existing tensor attribute: q_scale");
}

TEST(KVCacheMethod, ApplyShouldNotBeCalled) {
  Fp8Attention fp8("fp8");
  auto* method = dynamic_cast<Fp8KVCacheMethod*>(fp8.layer->quant_method());
  ASSERT_NE(method, nullptr);
  expect_error([&] { method->apply(*fp8.layer); }, ErrorCode::kInternal,
               "Fp8KVCacheMethod.apply should not be called.");
  BaseKVCacheMethod base;
  expect_error([&] { base.apply(*fp8.layer); }, ErrorCode::kInternal, "BaseKVCacheMethod.apply should not be called.");
}

// ---- k/v: case (a), both loaded ----

TEST(KVCacheMethod, BothKvScalesLoaded) {
  LogCapture log;
  Fp8Attention fp8("fp8_e4m3");
  fp8.load("k_scale", 0.0234375f);
  fp8.load("v_scale", 0.015625f);
  fp8.process();
  // H6: q follows k (the reference would end with q = 1.0).
  expect_scales(*fp8.layer, 0.0234375f, 0.0234375f, 0.015625f, 1.0f);
  EXPECT_EQ(log.warnings, std::vector<std::string>{kQFallbackWarning});
  EXPECT_TRUE(fp8.layer->parameters().empty());  // the spec's del
}

TEST(KVCacheMethod, LoadedScalesInOtherDtypesAndShapes) {
  LogCapture quiet;
  // compressed-tensors may store BF16 scales of shape [1]; the loader converts them into the
  // 0-dim f32 parameter (default_weight_loader's fill_ of one-element tensors).
  Fp8Attention fp8("fp8_e4m3");
  Tensor k = Tensor::empty({1}, DType::kBF16);
  k.data<BFloat16>()[0] = float_to_bf16(0.5f);
  fp8.layer->load_weight("k_scale", k, std::nullopt);
  fp8.layer->load_weight("v_scale", Tensor::from_vector<float>({0.75f}), std::nullopt);
  fp8.process();
  expect_scales(*fp8.layer, 0.5f, 0.5f, 0.75f, 1.0f);
}

// ---- k/v: case (b), none loaded ----

TEST(KVCacheMethod, NoScalesLoadedFp8) {
  LogCapture log;
  Fp8Attention fp8("fp8");
  fp8.process();
  expect_scales(*fp8.layer, 1.0f, 1.0f, 1.0f, 1.0f);
  EXPECT_EQ(log.warnings,
            (std::vector<std::string>{kQFallbackWarning, kDefaultKvWarning, uncalibrated_warning("1.0", "1.0")}));
}

TEST(KVCacheMethod, NoScalesLoadedFp8E4m3) {
  // The uncalibrated-q warning is for kv_cache_dtype "fp8" only.
  LogCapture log;
  Fp8Attention fp8("fp8_e4m3");
  fp8.process();
  expect_scales(*fp8.layer, 1.0f, 1.0f, 1.0f, 1.0f);
  EXPECT_EQ(log.warnings, (std::vector<std::string>{kQFallbackWarning, kDefaultKvWarning}));
}

TEST(KVCacheMethod, NoScalesLoadedE5m2HasNoDefaultWarning) {
  // Fp8KVCacheMethod refuses e5m2 at construction; the base method on an e5m2 layer shows the
  // "e5m2" exemption of the 1.0 warning.
  LogCapture log;
  Attention attn(kPrefix, 8, 64, 2, kv_dtype("fp8_e5m2"));
  BaseKVCacheMethod method;
  method.create_weights(attn);
  method.process_weights_after_loading(attn);
  expect_scales(attn, 1.0f, 1.0f, 1.0f, 1.0f);
  EXPECT_EQ(log.warnings, std::vector<std::string>{kQFallbackWarning});
}

// ---- k/v: case (c), the deprecated single kv_scale ----

TEST(KVCacheMethod, DeprecatedKvScaleIsDuplicated) {
  LogCapture log;
  Fp8Attention fp8("fp8_e4m3");
  // remap_kv_scale_name sends "self_attn.kv_scale" to k_scale only.
  fp8.load("k_scale", 0.0625f);
  fp8.process();
  expect_scales(*fp8.layer, 0.0625f, 0.0625f, 0.0625f, 1.0f);
  EXPECT_EQ(log.warnings, std::vector<std::string>{kQFallbackWarning});
}

TEST(KVCacheMethod, SingleScaleTakesPythonMax) {
  LogCapture quiet;
  // k > 0 and v == 0: neither case (a) nor (b); max(k, v) is k.
  Fp8Attention fp8("fp8_e4m3");
  fp8.load("k_scale", 0.5f);
  fp8.load("v_scale", 0.0f);
  fp8.process();
  expect_scales(*fp8.layer, 0.5f, 0.5f, 0.5f, 1.0f);
  // k > 0 and v NaN: NaN > k is false, so k again.
  Fp8Attention nan_v("fp8_e4m3");
  nan_v.load("k_scale", 0.25f);
  nan_v.load("v_scale", std::numeric_limits<float>::quiet_NaN());
  nan_v.process();
  expect_scales(*nan_v.layer, 0.25f, 0.25f, 0.25f, 1.0f);
}

TEST(KVCacheMethod, VScaleWithoutKScale) {
  LogCapture quiet;
  // The reference asserts k_scale > 0 here.
  Fp8Attention only_v("fp8_e4m3");
  only_v.load("v_scale", 0.5f);
  expect_invalid([&] { only_v.process(); },
                 "attention model.layers.0.self_attn.attn: unusable KV-cache scales k_scale -1 and v_scale 0.5: loaded "
                 "scales must be positive, and a single one must be k_scale (the deprecated kv_scale)");
  Fp8Attention zeros("fp8");
  zeros.load("k_scale", 0.0f);
  zeros.load("v_scale", 0.0f);
  expect_invalid([&] { zeros.process(); },
                 "attention model.layers.0.self_attn.attn: unusable KV-cache scales k_scale 0 and v_scale 0: loaded "
                 "scales must be positive, and a single one must be k_scale (the deprecated kv_scale)");
}

// ---- the KV ValueError ----

TEST(KVCacheMethod, PerHeadKvScalesAreNotSupported) {
  LogCapture quiet;
  // [H_kv, 1, 1] scales (FA3 in newer vLLM) cannot load into the 0-dim parameter; set directly,
  // they reach the spec's ValueError.
  Fp8Attention fp8("fp8");
  fp8.layer->parameter("k_scale").data = Tensor::from_vector<float>(std::vector<float>(8, 0.5f), {8, 1, 1});
  fp8.load("v_scale", 0.5f);
  expect_invalid([&] { fp8.process(); }, kKvNotPerTensor);
  // Nothing was written or removed.
  EXPECT_EQ(value_of(fp8.layer->k_scale), 1.0f);
  EXPECT_EQ(fp8.layer->parameters().size(), 4u);
}

TEST(KVCacheMethod, OneElementKvScaleMustBeZeroDim) {
  LogCapture quiet;
  // .tolist() of a [1] tensor is a list, not a float.
  Fp8Attention fp8("fp8_e4m3");
  fp8.load("k_scale", 0.5f);
  fp8.layer->parameter("v_scale").data = Tensor::from_vector<float>({0.5f});
  expect_invalid([&] { fp8.process(); }, kKvNotPerTensor);
  // In case (b) the loaded tensors are not read, so their shape does not matter.
  Fp8Attention unloaded("fp8_e4m3");
  unloaded.layer->parameter("v_scale").data = Tensor::from_vector<float>({-1.0f});
  unloaded.process();
  expect_scales(*unloaded.layer, 1.0f, 1.0f, 1.0f, 1.0f);
}

TEST(KVCacheMethod, IntegerKvScaleIsNotAFloat) {
  LogCapture quiet;
  Fp8Attention fp8("fp8_e4m3");
  fp8.load("k_scale", 0.5f);
  fp8.layer->parameter("v_scale").data = Tensor::from_vector<int32_t>({1}, {});
  expect_invalid([&] { fp8.process(); }, kKvNotPerTensor);
}

// ---- q and prob ----

TEST(KVCacheMethod, QScaleLoaded) {
  LogCapture log;
  Fp8Attention fp8("fp8", true, /*calculate_kv_scales=*/false);
  fp8.load("q_scale", 0.125f);
  fp8.load("k_scale", 0.25f);
  fp8.load("v_scale", 0.5f);
  fp8.process();
  expect_scales(*fp8.layer, 0.125f, 0.25f, 0.5f, 1.0f);
  // prob_scale is missing: the reference warns for kv_cache_dtype "fp8".
  EXPECT_EQ(log.warnings, std::vector<std::string>{uncalibrated_warning("0.125", "1.0")});
}

TEST(KVCacheMethod, QAndProbScalesLoaded) {
  LogCapture log;
  Fp8Attention fp8("fp8");
  fp8.load("q_scale", 0.125f);
  fp8.load("k_scale", 0.25f);
  fp8.load("v_scale", 0.5f);
  fp8.load("prob_scale", 0.00390625f);
  fp8.process();
  expect_scales(*fp8.layer, 0.125f, 0.25f, 0.5f, 0.00390625f);
  EXPECT_TRUE(log.warnings.empty());
}

TEST(KVCacheMethod, QScaleOfExactlyOneCountsAsUncalibrated) {
  LogCapture log;
  Fp8Attention fp8("fp8");
  fp8.load("q_scale", 1.0f);
  fp8.load("k_scale", 0.25f);
  fp8.load("v_scale", 0.5f);
  fp8.load("prob_scale", 0.5f);
  fp8.process();
  expect_scales(*fp8.layer, 1.0f, 0.25f, 0.5f, 0.5f);
  EXPECT_EQ(log.warnings, std::vector<std::string>{uncalibrated_warning("1.0", "0.5")});
}

TEST(KVCacheMethod, HazardH6QFallsBackToKAndStays) {
  LogCapture log;
  Fp8Attention fp8("fp8");
  fp8.load("k_scale", 0.25f);
  fp8.load("v_scale", 0.5f);
  fp8.load("prob_scale", 0.75f);
  fp8.process();
  // The reference announces the k_scale fallback, then writes 1.0 over it (spec 2.9 H6).
  EXPECT_EQ(value_of(fp8.layer->q_scale), 0.25f);
  EXPECT_EQ(value_of(fp8.layer->prob_scale), 0.75f);
  // The warning's trigger is the reference's (no q_scale in the checkpoint); its text names the
  // q in effect.
  EXPECT_EQ(log.warnings, (std::vector<std::string>{kQFallbackWarning, uncalibrated_warning("0.25", "0.75")}));
}

TEST(KVCacheMethod, KvCacheAutoIgnoresKvScalesButLoadsQAndProb) {
  LogCapture log;
  Fp8Attention fp8("auto");
  fp8.load("q_scale", 0.125f);
  fp8.load("k_scale", 0.25f);
  fp8.load("v_scale", 0.5f);
  fp8.load("prob_scale", 0.5f);
  fp8.process();
  expect_scales(*fp8.layer, 0.125f, 1.0f, 1.0f, 0.5f);
  EXPECT_TRUE(log.warnings.empty());
  EXPECT_TRUE(fp8.layer->parameters().empty());
}

TEST(KVCacheMethod, KvCacheAutoWithoutScales) {
  // No KV part at all: no fallback (q stays 1.0) and no warnings.
  LogCapture log;
  Fp8Attention fp8("auto");
  fp8.process();
  expect_scales(*fp8.layer, 1.0f, 1.0f, 1.0f, 1.0f);
  EXPECT_TRUE(log.warnings.empty());
}

TEST(KVCacheMethod, QProbValueErrors) {
  LogCapture quiet;
  {
    Fp8Attention fp8("auto");
    fp8.layer->parameter("q_scale").data = Tensor::from_vector<float>(std::vector<float>(32, 0.1f), {32, 1, 1});
    expect_invalid([&] { fp8.process(); }, kQProbNotPerTensor);
  }
  {
    Fp8Attention fp8("fp8_e4m3");  // the reference fails earlier here, comparing q with 0
    fp8.load("k_scale", 0.5f);
    fp8.load("v_scale", 0.5f);
    fp8.layer->parameter("q_scale").data = Tensor::from_vector<float>({0.1f, 0.2f});
    expect_invalid([&] { fp8.process(); }, kQProbNotPerTensor);
  }
  {
    // The reference has already written k/v when it raises; fp8kit checks first and leaves the
    // layer as loaded.
    Fp8Attention fp8("fp8");
    fp8.load("k_scale", 0.5f);
    fp8.load("v_scale", 0.25f);
    fp8.layer->parameter("prob_scale").data = Tensor::from_vector<float>({0.1f, 0.2f});
    expect_invalid([&] { fp8.process(); }, kQProbNotPerTensor);
    expect_scales(*fp8.layer, 1.0f, 1.0f, 1.0f, 1.0f);
    EXPECT_EQ(fp8.layer->parameters().size(), 4u);
  }
  {
    // Both malformed: the KV error comes first, as in the reference.
    Fp8Attention fp8("fp8");
    fp8.layer->parameter("k_scale").data = Tensor::from_vector<float>({0.1f, 0.2f});
    fp8.layer->parameter("q_scale").data = Tensor::from_vector<float>({0.1f, 0.2f});
    expect_invalid([&] { fp8.process(); }, kKvNotPerTensor);
  }
  {
    Fp8Attention fp8("auto");
    fp8.layer->parameter("prob_scale").data = Tensor::from_vector<float>({0.1f, 0.2f});
    expect_invalid([&] { fp8.process(); }, kQProbNotPerTensor);
  }
  {
    Fp8Attention fp8("auto");
    fp8.layer->parameter("prob_scale").data = Tensor::from_vector<int32_t>({2}, {});
    expect_invalid([&] { fp8.process(); }, kQProbNotPerTensor);
  }
}

TEST(KVCacheMethod, OneElementQScaleOfAnyShapeIsASingleFloat) {
  LogCapture quiet;
  // is_singleton_float takes any one-element floating tensor.
  Fp8Attention fp8("auto");
  fp8.layer->parameter("q_scale").data = Tensor::from_vector<float>({0.5f}, {1, 1});
  fp8.process();
  EXPECT_EQ(value_of(fp8.layer->q_scale), 0.5f);
}

// ---- calculate_kv_scales ----

TEST(KVCacheMethod, CalculateKvScalesSkipsTheKvPart) {
  LogCapture log;
  Fp8Attention fp8("fp8", true, /*calculate_kv_scales=*/true);
  fp8.load("k_scale", 0.25f);
  fp8.load("v_scale", 0.5f);
  fp8.process();
  // The scales come from the first forward instead (Attention::calc_kv_scales).
  expect_scales(*fp8.layer, 1.0f, 1.0f, 1.0f, 1.0f);
  EXPECT_TRUE(fp8.layer->calculate_kv_scales);
  EXPECT_EQ(log.warnings, std::vector<std::string>{uncalibrated_warning("1.0", "1.0")});
}

TEST(KVCacheMethod, LoadedQScaleTurnsCalculateKvScalesOff) {
  LogCapture quiet;
  // The reference's order: the KV part is skipped (calculate_kv_scales is still set), then a
  // loaded q_scale clears the flag, so k/v stay 1.0.
  Fp8Attention fp8("fp8_e4m3", true, /*calculate_kv_scales=*/true);
  fp8.load("q_scale", 0.125f);
  fp8.load("k_scale", 0.25f);
  fp8.load("v_scale", 0.5f);
  fp8.process();
  EXPECT_FALSE(fp8.layer->calculate_kv_scales);
  expect_scales(*fp8.layer, 0.125f, 1.0f, 1.0f, 1.0f);
}

// ---- processing twice, partial state ----

TEST(KVCacheMethod, SecondProcessingIsANoOp) {
  Fp8Attention fp8("fp8_e4m3");
  fp8.load("k_scale", 0.25f);
  fp8.load("v_scale", 0.5f);
  LogCapture log;
  fp8.process();
  const size_t first = log.warnings.size();
  fp8.process();
  expect_scales(*fp8.layer, 0.25f, 0.25f, 0.5f, 1.0f);
  EXPECT_EQ(log.warnings.size(), first);
}

TEST(KVCacheMethod, PartlyRemovedParametersAreAnInternalError) {
  LogCapture quiet;
  Fp8Attention fp8("fp8_e4m3");
  fp8.layer->remove_parameter("v_scale");
  expect_error([&] { fp8.process(); }, ErrorCode::kInternal,
               "attention model.layers.0.self_attn.attn: some of q_scale, k_scale, v_scale, prob_scale were removed "
               "before processing");
}

// ---- the model-level tests of spec 1.15 ----

// test_kv_cache_model_load_and_run: checkpoint names through remap_kv_scale_name into the layer,
// then 0 < k_scale < 1 and 0 < v_scale < 1.
void load_checkpoint_scales(Attention& layer, const std::vector<std::pair<std::string, float>>& tensors) {
  for (const auto& [name, value] : tensors) {
    const std::optional<std::string> target = remap_kv_scale_name(name);
    ASSERT_TRUE(target.has_value()) << name;
    const std::string parent = target->substr(0, target->rfind('.'));
    ASSERT_EQ(parent, layer.prefix()) << name;
    layer.load_weight(target->substr(target->rfind('.') + 1), Tensor::scalar_f32(value), std::nullopt);
  }
}

TEST(KVCacheMethodModelLoad, Llama3Fp8KvDeprecatedKvScale) {
  // neuralmagic/Meta-Llama-3-8B-Instruct-FP8-KV stores one kv_scale per layer.
  LogCapture log;
  Fp8Attention fp8("fp8");
  load_checkpoint_scales(*fp8.layer, {{"model.layers.0.self_attn.kv_scale", 0.0213623046875f}});
  fp8.process();
  const float k = value_of(fp8.layer->k_scale), v = value_of(fp8.layer->v_scale);
  EXPECT_TRUE(0.0f < k && k < 1.0f);
  EXPECT_TRUE(0.0f < v && v < 1.0f);
  EXPECT_EQ(k, 0.0213623046875f);
  EXPECT_EQ(v, k);
  EXPECT_EQ(value_of(fp8.layer->q_scale), k);
  ASSERT_FALSE(log.warnings.empty());
  EXPECT_EQ(log.warnings[0].rfind("DEPRECATED. Found kv_scale in the checkpoint.", 0), 0u);
}

TEST(KVCacheMethodModelLoad, Qwen2Fp8KAndVScales) {
  LogCapture quiet;
  // nm-testing/Qwen2-1.5B-Instruct-FP8-K-V stores self_attn.k_scale and self_attn.v_scale.
  Fp8Attention fp8("fp8");
  load_checkpoint_scales(
      *fp8.layer, {{"model.layers.0.self_attn.k_scale", 0.03125f}, {"model.layers.0.self_attn.v_scale", 0.0078125f}});
  fp8.process();
  const float k = value_of(fp8.layer->k_scale), v = value_of(fp8.layer->v_scale);
  EXPECT_TRUE(0.0f < k && k < 1.0f);
  EXPECT_TRUE(0.0f < v && v < 1.0f);
  EXPECT_EQ(k, 0.03125f);
  EXPECT_EQ(v, 0.0078125f);
}

TEST(KVCacheMethodModelLoad, Fp16ModelQuantizedOnline) {
  LogCapture quiet;
  // test_load_fp16_model: --quantization fp8 on opt-125m (online Fp8Config), no scales in the
  // checkpoint; with kv fp8 both scales are 1.0, and with auto they stay 1.0.
  for (const char* dtype : {"fp8", "auto"}) {
    Fp8Attention fp8(dtype, /*serialized=*/false);
    EXPECT_NE(dynamic_cast<Fp8KVCacheMethod*>(fp8.layer->quant_method()), nullptr);
    fp8.process();
    EXPECT_EQ(value_of(fp8.layer->k_scale), 1.0f) << dtype;
    EXPECT_EQ(value_of(fp8.layer->v_scale), 1.0f) << dtype;
    EXPECT_EQ(fp8.layer->k_scale_float, 1.0f);
    EXPECT_EQ(fp8.layer->v_scale_float, 1.0f);
  }
}

}  // namespace
}  // namespace fp8kit
