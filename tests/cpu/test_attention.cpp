// Attention (spec 1.13, 2.4): kv_cache_dtype validation, default scales, the ranges of the dynamic
// scales and their environment variables, the KV-cache method chosen by the config (and the e5m2
// error), calc_kv_scales values, and process_weights_after_loading delegating to the method.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/half.h"
#include "fp8kit/layers/attention.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/log.h"

namespace fp8kit {
namespace {

using testing::expect_error;
using testing::expect_invalid;

const std::string kPrefix = "model.layers.0.self_attn.attn";

AttentionOptions options_for(const std::string& kv_cache_dtype, const QuantizationConfig* config = nullptr) {
  AttentionOptions options;
  options.kv_cache_dtype = kv_cache_dtype;
  options.quant_config = config;
  return options;
}

float value_of(const Tensor& t) { return t.to(Device::cpu()).item_f32(); }

void expect_default_scale(const Tensor& t) {
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.dim(), 0);
  EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_EQ(value_of(t), 1.0f);
}


// A config that gives attention a method of our choosing.
class FixedMethodConfig : public QuantizationConfig {
 public:
  enum class Kind { kNone, kBaseKv, kMoE };
  explicit FixedMethodConfig(Kind kind) : kind_(kind) {}
  std::string get_name() const override { return "fixed"; }
  std::vector<DType> get_supported_act_dtypes() const override { return {DType::kBF16}; }
  int get_min_capability() const override { return 80; }
  std::vector<std::string> get_config_filenames() const override { return {}; }
  std::unique_ptr<QuantizeMethod> get_quant_method(const Layer& layer, const std::string& prefix) const override {
    last_prefix = prefix;
    switch (kind_) {
      case Kind::kNone:
        return nullptr;
      case Kind::kBaseKv:
        return std::make_unique<BaseKVCacheMethod>();
      case Kind::kMoE:
        return std::make_unique<Fp8MoEMethod>(std::make_shared<const Fp8Config>(fp8_));
    }
    return nullptr;
  }
  mutable std::string last_prefix;

 private:
  Kind kind_;
  Fp8Config fp8_;
};

// ---- construction ----

TEST(Attention, DefaultsWithoutQuantConfig) {
  Attention attn(kPrefix, 32, 128, 8);
  EXPECT_EQ(attn.prefix(), kPrefix);
  EXPECT_EQ(attn.num_heads(), 32);
  EXPECT_EQ(attn.head_size(), 128);
  EXPECT_EQ(attn.num_kv_heads(), 8);
  EXPECT_EQ(attn.kv_cache_dtype(), "auto");
  EXPECT_FALSE(attn.calculate_kv_scales);
  expect_default_scale(attn.k_scale);
  expect_default_scale(attn.v_scale);
  expect_default_scale(attn.q_scale);
  expect_default_scale(attn.prob_scale);
  EXPECT_EQ(attn.k_scale_float, 1.0f);
  EXPECT_EQ(attn.v_scale_float, 1.0f);
  EXPECT_EQ(attn.q_range, 200);
  EXPECT_EQ(attn.k_range, 200);
  EXPECT_EQ(attn.v_range, 100);
  EXPECT_EQ(attn.quant_method(), nullptr);
  EXPECT_TRUE(attn.parameters().empty());
  attn.process_weights_after_loading();  // nothing to do without a method
  EXPECT_EQ(value_of(attn.k_scale), 1.0f);
}

TEST(Attention, ScalesAreSeparateTensors) {
  Attention attn(kPrefix, 4, 64, 4);
  attn.k_scale.copy_(Tensor::scalar_f32(0.5f));
  EXPECT_EQ(value_of(attn.k_scale), 0.5f);
  EXPECT_EQ(value_of(attn.v_scale), 1.0f);
  EXPECT_EQ(value_of(attn.q_scale), 1.0f);
  EXPECT_EQ(value_of(attn.prob_scale), 1.0f);
}

TEST(Attention, KnownKvCacheDtypes) {
  for (const char* dtype : {"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}) {
    AttentionOptions options = options_for(dtype);
    options.calculate_kv_scales = true;
    Attention attn(kPrefix, 8, 64, 2, options);
    EXPECT_EQ(attn.kv_cache_dtype(), dtype);
    EXPECT_TRUE(attn.calculate_kv_scales);
  }
}

TEST(Attention, UnknownKvCacheDtype) {
  for (const char* dtype : {"fp8_e4m3fn", "FP8", "", "int8", "bf16", "fp8_e5m2 "}) {
    expect_invalid([&] { Attention attn(kPrefix, 8, 64, 2, options_for(dtype)); },
                   std::string("Unknown kv cache dtype: ") + dtype);
  }
  // Checked before the quant method is asked for.
  Fp8Config config(true, "static");
  expect_invalid([&] { Attention attn(kPrefix, 8, 64, 2, options_for("fp8_e4m3fnuz", &config)); },
                 "Unknown kv cache dtype: fp8_e4m3fnuz");
}

TEST(Attention, HeadCountErrors) {
  expect_invalid([] { Attention attn(kPrefix, 0, 64, 1); },
                 "attention model.layers.0.self_attn.attn: num_heads (0), head_size (64) and num_kv_heads (1) must be "
                 "positive");
  expect_invalid([] { Attention attn(kPrefix, 8, -1, 1); },
                 "attention model.layers.0.self_attn.attn: num_heads (8), head_size (-1) and num_kv_heads (1) must be "
                 "positive");
  expect_invalid([] { Attention attn(kPrefix, 8, 64, 0); },
                 "attention model.layers.0.self_attn.attn: num_heads (8), head_size (64) and num_kv_heads (0) must be "
                 "positive");
  expect_invalid([] { Attention attn(kPrefix, 12, 64, 5); },
                 "attention model.layers.0.self_attn.attn: num_heads (12) is not a multiple of num_kv_heads (5)");
}

// ---- the quant method ----

TEST(Attention, Fp8ConfigGivesKvCacheMethod) {
  for (bool serialized : {true, false}) {
    Fp8Config config(serialized, serialized ? "static" : "dynamic");
    Attention attn(kPrefix, 32, 128, 8, options_for("fp8", &config));
    auto* method = dynamic_cast<Fp8KVCacheMethod*>(attn.quant_method());
    ASSERT_NE(method, nullptr);
    EXPECT_EQ(method->name(), "Fp8KVCacheMethod");
    EXPECT_EQ(method->quant_config().activation_scheme, config.activation_scheme);  // its own copy
    // create_weights ran: the four "not loaded" scales.
    ASSERT_EQ(attn.parameters().size(), 4u);
    for (const char* name : {"q_scale", "k_scale", "v_scale", "prob_scale"}) {
      const Parameter* p = attn.find_parameter(name);
      ASSERT_NE(p, nullptr) << name;
      EXPECT_EQ(p->kind, ParameterKind::kPlain);
      EXPECT_EQ(p->data.dim(), 0);
      EXPECT_EQ(p->data.dtype(), DType::kF32);
      EXPECT_EQ(value_of(p->data), -1.0f);
    }
    // The layer's own scales keep their defaults until processing.
    expect_default_scale(attn.k_scale);
    expect_default_scale(attn.q_scale);
  }
}

TEST(Attention, KvCacheAutoStillGetsTheMethod) {
  // vLLM attaches the method whatever the dtype; it ignores the k/v scales under "auto".
  Fp8Config config(true, "static");
  Attention attn(kPrefix, 32, 128, 8, options_for("auto", &config));
  EXPECT_NE(dynamic_cast<Fp8KVCacheMethod*>(attn.quant_method()), nullptr);
  EXPECT_EQ(attn.parameters().size(), 4u);
}

TEST(Attention, E5m2WithKvCacheMethod) {
  // Any FP8 config, serialized or online (the gate of vllm#39137 over-fires the same way).
  Fp8Config serialized(true, "static");
  Fp8Config online;
  for (const Fp8Config* config : {&serialized, &online}) {
    expect_invalid([&] { Attention attn(kPrefix, 8, 64, 2, options_for("fp8_e5m2", config)); },
                   "fp8_e5m2 kv-cache is not supported with fp8 checkpoints.");
  }
  FixedMethodConfig base(FixedMethodConfig::Kind::kBaseKv);
  expect_invalid([&] { Attention attn(kPrefix, 8, 64, 2, options_for("fp8_e5m2", &base)); },
                 "fp8_e5m2 kv-cache is not supported with fp8 checkpoints.");
  // Without a KV-cache method e5m2 is fine.
  FixedMethodConfig none(FixedMethodConfig::Kind::kNone);
  Attention attn(kPrefix, 8, 64, 2, options_for("fp8_e5m2", &none));
  EXPECT_EQ(attn.quant_method(), nullptr);
}

TEST(Attention, ConfigWithoutMethodForAttention) {
  FixedMethodConfig config(FixedMethodConfig::Kind::kNone);
  Attention attn(kPrefix, 8, 64, 2, options_for("fp8", &config));
  EXPECT_EQ(config.last_prefix, kPrefix);
  EXPECT_EQ(attn.quant_method(), nullptr);
  EXPECT_TRUE(attn.parameters().empty());
}

TEST(Attention, BaseKvCacheMethodFromAnotherConfig) {
  FixedMethodConfig config(FixedMethodConfig::Kind::kBaseKv);
  Attention attn(kPrefix, 8, 64, 2, options_for("fp8_e4m3", &config));
  ASSERT_NE(attn.quant_method(), nullptr);
  EXPECT_EQ(attn.quant_method()->name(), "BaseKVCacheMethod");
  EXPECT_EQ(attn.parameters().size(), 4u);
}

TEST(Attention, NonKvMethodIsAnInternalError) {
  FixedMethodConfig config(FixedMethodConfig::Kind::kMoE);
  expect_error([&] { Attention attn(kPrefix, 8, 64, 2, options_for("fp8", &config)); }, ErrorCode::kInternal,
               "attention model.layers.0.self_attn.attn: the quantization config gave it Fp8MoEMethod, which is not "
               "a KV-cache method");
}

TEST(Attention, ProcessWeightsAfterLoadingDelegates) {
  std::vector<std::string> warnings;
  const LogSink previous = set_log_sink([&](LogLevel, const std::string& m) { warnings.push_back(m); });
  Fp8Config config;
  Attention attn(kPrefix, 8, 64, 2, options_for("fp8_e4m3", &config));
  attn.load_weight("k_scale", Tensor::scalar_f32(0.25f), std::nullopt);
  attn.load_weight("v_scale", Tensor::scalar_f32(0.125f), std::nullopt);
  attn.process_weights_after_loading();
  EXPECT_EQ(value_of(attn.k_scale), 0.25f);
  EXPECT_EQ(value_of(attn.v_scale), 0.125f);
  EXPECT_EQ(attn.k_scale_float, 0.25f);
  EXPECT_EQ(attn.v_scale_float, 0.125f);
  EXPECT_TRUE(attn.parameters().empty());
  EXPECT_EQ(value_of(attn.q_scale), 0.25f);  // no q_scale loaded: k_scale (hazard H6 fixed)
  attn.process_weights_after_loading();      // the parameters are gone: nothing changes
  EXPECT_EQ(value_of(attn.k_scale), 0.25f);
  set_log_sink(previous);
  EXPECT_EQ(warnings.size(), 1u);  // the q fallback, once
}

// ---- ranges (Overrides::q/k/v_scale_constant, parsed in tests/cpu/test_overrides.cpp) ----

TEST(AttentionRanges, FromOptions) {
  AttentionOptions o;
  o.q_range = 64;
  o.k_range = 448;
  o.v_range = 1;
  Attention attn(kPrefix, 8, 64, 2, o);
  EXPECT_EQ(attn.q_range, 64);
  EXPECT_EQ(attn.k_range, 448);
  EXPECT_EQ(attn.v_range, 1);
}

TEST(AttentionRanges, NotPositive) {
  AttentionOptions o;
  o.v_range = 0;
  expect_invalid([&] { Attention attn(kPrefix, 8, 64, 2, o); },
                 "attention model.layers.0.self_attn.attn: the scale ranges must be positive, got q 200, k 200, v 0");
}

// ---- calc_kv_scales ----

TEST(AttentionCalcKvScales, MaxAbsOverRange) {
  Attention attn(kPrefix, 2, 2, 1, options_for("fp8"));
  attn.calculate_kv_scales = true;
  const Tensor q = Tensor::from_vector<float>({1.0f, -3.0f, 2.0f, 0.5f}, {2, 2});
  const Tensor k = Tensor::from_vector<float>({0.0f, 7.5f, -100.0f, 3.0f}, {1, 2, 2});
  const Tensor v = Tensor::from_vector<float>({-0.25f, 0.125f}, {2});
  attn.calc_kv_scales(q, k, v);
  EXPECT_EQ(value_of(attn.q_scale), 3.0f / 200.0f);
  EXPECT_EQ(value_of(attn.k_scale), 100.0f / 200.0f);
  EXPECT_EQ(value_of(attn.v_scale), 0.25f / 100.0f);
  EXPECT_EQ(attn.k_scale_float, 0.5f);
  EXPECT_EQ(attn.v_scale_float, 0.25f / 100.0f);
  EXPECT_EQ(value_of(attn.prob_scale), 1.0f);  // not a dynamic scale
  EXPECT_FALSE(attn.calculate_kv_scales);
  // Still shapes and dtypes of the defaults.
  EXPECT_EQ(attn.q_scale.dim(), 0);
  EXPECT_EQ(attn.q_scale.dtype(), DType::kF32);
}

TEST(AttentionCalcKvScales, HalfPrecisionInputsAndRangesFromOptions) {
  AttentionOptions o = options_for("fp8");
  o.q_range = 3;
  o.k_range = 7;
  o.v_range = 448;
  Attention attn(kPrefix, 2, 2, 1, o);
  Tensor q = Tensor::empty({3}, DType::kBF16);
  Tensor k = Tensor::empty({3}, DType::kF16);
  Tensor v = Tensor::empty({3}, DType::kBF16);
  const float qv[] = {0.1f, -1.7f, 1.5f}, kv[] = {65504.0f, -2.0f, 0.0f}, vv[] = {-1e-3f, 2e-3f, 0.0f};
  for (int i = 0; i < 3; ++i) {
    q.data<BFloat16>()[i] = float_to_bf16(qv[i]);
    k.data<Float16>()[i] = float_to_f16(kv[i]);
    v.data<BFloat16>()[i] = float_to_bf16(vv[i]);
  }
  attn.calc_kv_scales(q, k, v);
  // max|x| is exact in the input dtype; the division is in f32.
  EXPECT_EQ(value_of(attn.q_scale), bf16_to_float(float_to_bf16(-1.7f)) * -1.0f / 3.0f);
  EXPECT_EQ(value_of(attn.k_scale), 65504.0f / 7.0f);
  EXPECT_EQ(value_of(attn.v_scale), bf16_to_float(float_to_bf16(2e-3f)) / 448.0f);
}

TEST(AttentionCalcKvScales, StridedInputs) {
  Attention attn(kPrefix, 2, 2, 1, options_for("fp8"));
  // [[1, 2, 3], [4, 5, 6]] transposed, and a narrowed view that leaves the maximum out.
  const Tensor base = Tensor::from_vector<float>({1, 2, 3, 4, 5, -6}, {2, 3});
  attn.calc_kv_scales(base.t(), base.narrow(1, 0, 2), base.select(0, 0));
  EXPECT_EQ(value_of(attn.q_scale), 6.0f / 200.0f);
  EXPECT_EQ(value_of(attn.k_scale), 5.0f / 200.0f);
  EXPECT_EQ(value_of(attn.v_scale), 3.0f / 100.0f);
}

TEST(AttentionCalcKvScales, NanPropagatesAsInTorch) {
  Attention attn(kPrefix, 2, 2, 1, options_for("fp8"));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor ones = Tensor::from_vector<float>({1.0f, 1.0f});
  attn.calc_kv_scales(ones, Tensor::from_vector<float>({1.0f, nan, 1e30f}), ones);
  EXPECT_TRUE(std::isnan(value_of(attn.k_scale)));
  EXPECT_TRUE(std::isnan(attn.k_scale_float));
  EXPECT_EQ(value_of(attn.q_scale), 1.0f / 200.0f);
}

TEST(AttentionCalcKvScales, ZeroInputGivesZeroScale) {
  Attention attn(kPrefix, 2, 2, 1, options_for("fp8"));
  const Tensor zeros = Tensor::zeros({4}, DType::kF32);
  attn.calc_kv_scales(zeros, zeros, zeros);
  EXPECT_EQ(value_of(attn.k_scale), 0.0f);
}

TEST(AttentionCalcKvScales, Errors) {
  Attention attn(kPrefix, 2, 2, 1, options_for("fp8"));
  attn.calculate_kv_scales = true;
  const Tensor ok = Tensor::from_vector<float>({2.0f});
  expect_invalid([&] { attn.calc_kv_scales(Tensor::empty({0, 4}, DType::kF32), ok, ok); },
                 "calc_kv_scales: query is empty");
  expect_invalid([&] { attn.calc_kv_scales(ok, Tensor(), ok); }, "calc_kv_scales: key is empty");
  expect_invalid([&] { attn.calc_kv_scales(ok, ok, Tensor::from_vector<int32_t>({1, 2})); },
                 "calc_kv_scales: value must be f32, f16 or bf16, got i32[2] on cpu");
  // Nothing was written, and the flag is still set.
  EXPECT_EQ(value_of(attn.q_scale), 1.0f);
  EXPECT_EQ(value_of(attn.k_scale), 1.0f);
  EXPECT_TRUE(attn.calculate_kv_scales);
}

}  // namespace
}  // namespace fp8kit
