// Fp8MoEMethod::process_weights_after_loading and apply (spec 1.8, 1.14): online per-expert
// quantization equal to scaled_fp8_quant per expert; the serialized per-tensor w13
// requantization bit for bit against per_tensor_dequantize + scaled_fp8_quant composed here;
// static input scales (max, the once-warning, the None error); block weights kept; the
// weight-only branch (FP8KIT_FORCE_WEIGHT_ONLY=1) with its apply errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/half.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/fused_moe.h"
#include "fp8kit/log.h"
#include "fp8kit/ops/quant.h"

namespace fp8kit {
namespace {

using testing::expect_invalid;

constexpr int64_t kExperts = 3, kHidden = 32, kInter = 16;

FusedMoEOptions moe_options(const Fp8Config& config) {
  FusedMoEOptions o;
  o.num_experts = kExperts;
  o.top_k = 2;
  o.hidden_size = kHidden;
  o.intermediate_size = kInter;
  o.quant_config = &config;
  return o;
}

void fill_random_bf16(Tensor& t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<BFloat16>()[i] = float_to_bf16(nd(rng));
}

// Random finite e4m3fn codes (0x7f / 0xff are NaN).
void fill_random_fp8(Tensor& t, uint32_t seed) {
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint8_t b = uint8_t(rng());
    p[i] = (b & 0x7f) == 0x7f ? uint8_t(b ^ 1) : b;
  }
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == cb.nbytes() && std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}


struct LogCapture {
  LogCapture() {
    previous_ = set_log_sink([this](LogLevel, const std::string& m) { messages.push_back(m); });
  }
  ~LogCapture() { set_log_sink(previous_); }
  std::vector<std::string> messages;
  LogSink previous_;
};

const char* const kUnequal =
    "Found input_scales that are not equal for fp8 MoE layer. Using the maximum across experts for each layer.";

TEST(Fp8MoEMethodProcess, OnlineQuantizesEachExpert) {
  Fp8Config config;
  FusedMoE layer("moe", moe_options(config));
  Tensor& w13 = layer.parameter("w13_weight").data;
  Tensor& w2 = layer.parameter("w2_weight").data;
  fill_random_bf16(w13, 1);
  fill_random_bf16(w2, 2);
  const Tensor w13_in = w13.clone(), w2_in = w2.clone();
  layer.process_weights_after_loading(cpu_ctx());
  const Tensor& s13 = layer.parameter("w13_weight_scale").data;
  const Tensor& s2 = layer.parameter("w2_weight_scale").data;
  ASSERT_EQ(s13.shape(), (Shape{kExperts}));  // re-created: one scale per expert over w1 and w3
  ASSERT_EQ(s2.shape(), (Shape{kExperts}));
  for (int64_t e = 0; e < kExperts; ++e) {
    const ops::QuantResult q13 = ops::scaled_fp8_quant(cpu_ctx(), w13_in.select(0, e));
    const ops::QuantResult q2 = ops::scaled_fp8_quant(cpu_ctx(), w2_in.select(0, e));
    EXPECT_TRUE(same_bytes(layer.parameter("w13_weight").data.select(0, e), q13.q)) << e;
    EXPECT_TRUE(same_bytes(layer.parameter("w2_weight").data.select(0, e), q2.q)) << e;
    EXPECT_EQ(s13.data<float>()[e], q13.scale.item_f32());
    EXPECT_EQ(s2.data<float>()[e], q2.scale.item_f32());
  }
  EXPECT_EQ(layer.parameter("w13_weight").data.dtype(), DType::kE4M3FN);
}

TEST(Fp8MoEMethodProcess, SerializedPerTensorRequantizesW13BitExact) {
  Fp8Config config(true, "dynamic");
  FusedMoE layer("moe", moe_options(config));
  Tensor& w13 = layer.parameter("w13_weight").data;
  fill_random_fp8(w13, 3);
  fill_random_fp8(layer.parameter("w2_weight").data, 4);
  const Tensor w13_in = w13.clone(), w2_in = layer.parameter("w2_weight").data.clone();
  // Expert 0: w3 has the larger scale; expert 1: w1; expert 2: equal scales.
  const std::vector<float> scales = {0.5f, 0.75f, 1.5f, 0.25f, 0.3f, 0.3f};
  for (int64_t e = 0; e < kExperts; ++e) {
    layer.weight_loader("w13_weight_scale", Tensor::scalar_f32(scales[size_t(2 * e)]), "w13_weight_scale", "w1", e);
    layer.weight_loader("w13_weight_scale", Tensor::scalar_f32(scales[size_t(2 * e + 1)]), "w13_weight_scale", "w3", e);
  }
  layer.process_weights_after_loading(cpu_ctx());
  const Tensor& s13 = layer.parameter("w13_weight_scale").data;
  ASSERT_EQ(s13.shape(), (Shape{kExperts}));
  for (int64_t e = 0; e < kExperts; ++e) {
    const float max_scale = std::max(scales[size_t(2 * e)], scales[size_t(2 * e + 1)]);
    EXPECT_EQ(s13.data<float>()[e], max_scale);
    for (int64_t s = 0; s < 2; ++s) {
      // The spec's composition: per_tensor_dequantize (f16), then static scaled_fp8_quant with the max.
      const Tensor rows = w13_in.select(0, e).narrow(0, s * kInter, kInter);
      const Tensor dq = ops::per_tensor_dequantize(cpu_ctx(), rows, Tensor::scalar_f32(scales[size_t(2 * e + s)]));
      ASSERT_EQ(dq.dtype(), DType::kF16);
      ops::ScaledFp8QuantOptions o;
      o.scale = Tensor::scalar_f32(max_scale);
      const Tensor want = ops::scaled_fp8_quant(cpu_ctx(), dq, o).q;
      EXPECT_TRUE(same_bytes(w13.select(0, e).narrow(0, s * kInter, kInter), want)) << "expert " << e << " shard " << s;
    }
  }
  // Expert 0's w1 rows really changed (scale 0.5 -> 0.75), and w2 is untouched.
  EXPECT_FALSE(same_bytes(w13.select(0, 0).narrow(0, 0, kInter), w13_in.select(0, 0).narrow(0, 0, kInter)));
  EXPECT_TRUE(same_bytes(layer.parameter("w2_weight").data, w2_in));
}

TEST(Fp8MoEMethodProcess, StaticInputScalesTakeTheMaxAndWarnOnce) {
  Fp8Config config(true, "static");
  detail::reset_moe_input_scale_warning();
  LogCapture log;
  FusedMoE equal("moe.equal", moe_options(config));
  for (int64_t e = 0; e < kExperts; ++e) {
    equal.weight_loader("w13_input_scale", Tensor::scalar_f32(0.5f), "w13_input_scale", "w1", e);
    equal.weight_loader("w2_input_scale", Tensor::scalar_f32(0.25f), "w2_input_scale", "w2", e);
  }
  equal.process_weights_after_loading(cpu_ctx());
  EXPECT_TRUE(log.messages.empty());
  EXPECT_EQ(equal.parameter("w13_input_scale").data.dim(), 0);
  EXPECT_EQ(equal.parameter("w13_input_scale").data.item_f32(), 0.5f);

  for (int i = 0; i < 2; ++i) {
    FusedMoE layer("moe.unequal", moe_options(config));
    layer.weight_loader("w2_input_scale", Tensor::scalar_f32(0.125f), "w2_input_scale", "w2", 1);
    layer.weight_loader("w13_input_scale", Tensor::scalar_f32(2.5f), "w13_input_scale", "w3", 2);
    layer.process_weights_after_loading(cpu_ctx());
    EXPECT_EQ(layer.parameter("w13_input_scale").data.item_f32(), 2.5f);
    EXPECT_EQ(layer.parameter("w2_input_scale").data.item_f32(), 1.0f);  // the untouched 1.0 defaults win
  }
  ASSERT_EQ(log.messages.size(), 1u);  // warning_once: one per process
  EXPECT_EQ(log.messages[0], kUnequal);
}

TEST(Fp8MoEMethodProcess, StaticWithoutInputScales) {
  Fp8Config config(true, "static");
  FusedMoE layer("moe", moe_options(config));
  layer.remove_parameter("w2_input_scale");
  expect_invalid([&] { layer.process_weights_after_loading(cpu_ctx()); },
                 "QuantConfig has static quantization, but found activation scales are None.");
}

TEST(Fp8MoEMethodProcess, BlockWeightsAreKept) {
  Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{8, 8});
  FusedMoE layer("moe", moe_options(config));
  fill_random_fp8(layer.parameter("w13_weight").data, 5);
  const Tensor before = layer.parameter("w13_weight").data.clone();
  layer.process_weights_after_loading(cpu_ctx());
  EXPECT_TRUE(same_bytes(layer.parameter("w13_weight").data, before));
  EXPECT_EQ(layer.parameter("w13_weight_scale_inv").data.shape(), (Shape{kExperts, 4, 4}));
  expect_invalid([&] { layer.process_weights_after_loading(cpu_ctx()); }, "moe: process_weights_after_loading already ran");
}

TEST(Fp8MoEMethodProcess, WeightOnlyDropsInputScales) {
  Fp8Config config(true, "static");
  FusedMoEOptions o = moe_options(config);
  o.force_weight_only = true;
  FusedMoE layer("moe", o);
  auto& method = dynamic_cast<Fp8MoEMethod&>(*layer.quant_method());
  EXPECT_TRUE(method.weight_only());
  fill_random_fp8(layer.parameter("w13_weight").data, 6);
  fill_random_fp8(layer.parameter("w2_weight").data, 7);
  layer.weight_loader("w13_weight_scale", Tensor::scalar_f32(0.01f), "w13_weight_scale", "w1", 0);
  layer.process_weights_after_loading(cpu_ctx());
  EXPECT_EQ(layer.find_parameter("w13_input_scale"), nullptr);
  EXPECT_EQ(layer.find_parameter("w2_input_scale"), nullptr);
  EXPECT_EQ(layer.parameter("w13_weight_scale").data.shape(), (Shape{kExperts}));  // requantized, then kept
  const Tensor x = Tensor::zeros({2, kHidden}, DType::kBF16);
  const Tensor logits = Tensor::zeros({2, kExperts}, DType::kF32);
  const Tensor y = layer.forward(cpu_ctx(), x, logits);  // 16-bit activations, a new tensor
  EXPECT_NE(y.data_ptr(), x.data_ptr());

  o.activation = "gelu";
  FusedMoE gelu("moe", o);
  gelu.process_weights_after_loading(cpu_ctx());
  expect_invalid([&] { gelu.forward(cpu_ctx(), x, logits); }, "gelu not supported for Marlin MoE.");
  o.activation = "silu";
  o.apply_router_weight_on_input = true;
  FusedMoE on_input("moe", o);
  on_input.process_weights_after_loading(cpu_ctx());
  expect_invalid([&] { on_input.forward(cpu_ctx(), x, logits); }, "apply_router_weight_on_input is not supported for Marlin MoE.");
}

}  // namespace
}  // namespace fp8kit
