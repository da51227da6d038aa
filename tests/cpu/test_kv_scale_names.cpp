// remap_kv_scale_name (spec 1.13 maybe_remap_kv_scale_name; FORMATS.md 1f): every naming scheme of
// KV-cache and q/prob scales, the deprecated kv_scale warning, names left alone, and the
// composition with Fp8Config::get_cache_scale that a model loader performs.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "fp8kit/layers/attention.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/log.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

const std::string kDeprecatedWarning =
    "DEPRECATED. Found kv_scale in the checkpoint. This format is deprecated in favor of separate k_scale and "
    "v_scale tensors and will be removed in a future release. Functionally, we will remap kv_scale to k_scale and "
    "duplicate k_scale to v_scale";

using linear_test::LogCapture;

TEST(KvScaleName, DeprecatedKvScaleGoesToKScale) {
  LogCapture log;
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.kv_scale"), "model.layers.0.self_attn.attn.k_scale");
  EXPECT_EQ(log.warnings, std::vector<std::string>{kDeprecatedWarning});
  // Every occurrence warns (an engine's sink may de-duplicate).
  EXPECT_EQ(remap_kv_scale_name("model.layers.31.self_attn.kv_scale"), "model.layers.31.self_attn.attn.k_scale");
  EXPECT_EQ(log.warnings.size(), 2u);
  // Quark and other modules named otherwise: ".attn" is inserted the same way.
  EXPECT_EQ(remap_kv_scale_name("transformer.h.3.attn.kv_scale"), "transformer.h.3.attn.attn.k_scale");
}

TEST(KvScaleName, PlainScalesGetAttnInserted) {
  LogCapture log;
  // AutoFP8 (later versions), current compressed-tensors, Quark q/prob scales.
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.k_scale"), "model.layers.0.self_attn.attn.k_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.v_scale"), "model.layers.0.self_attn.attn.v_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.5.self_attn.q_scale"), "model.layers.5.self_attn.attn.q_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.5.self_attn.prob_scale"), "model.layers.5.self_attn.attn.prob_scale");
  // GPT-2 style models whose attention module is "attn" hold the Attention at "attn.attn".
  EXPECT_EQ(remap_kv_scale_name("transformer.h.0.attn.k_scale"), "transformer.h.0.attn.attn.k_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attention.v_scale"),
            "model.layers.0.self_attention.attn.v_scale");
  EXPECT_TRUE(log.warnings.empty());
}

TEST(KvScaleName, ModelOptScalesOnTheirProjection) {
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.k_proj.k_scale"), "model.layers.0.self_attn.attn.k_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.v_proj.v_scale"), "model.layers.0.self_attn.attn.v_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.9.self_attn.q_proj.q_scale"), "model.layers.9.self_attn.attn.q_scale");
  EXPECT_EQ(remap_kv_scale_name("self_attn.k_proj.k_scale"), "self_attn.attn.k_scale");
}

TEST(KvScaleName, FusedQkvProjScales) {
  // Qwen3-MoE / llm-compressor exports (vllm#25047).
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.qkv_proj.k_scale"), "model.layers.0.self_attn.attn.k_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.qkv_proj.v_scale"), "model.layers.0.self_attn.attn.v_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.qkv_proj.q_scale"), "model.layers.0.self_attn.attn.q_scale");
}

TEST(KvScaleName, EngineNamesAreUnchanged) {
  for (const char* name : {"model.layers.0.self_attn.attn.k_scale", "model.layers.0.self_attn.attn.v_scale",
                           "model.layers.0.self_attn.attn.q_scale", "model.layers.0.self_attn.attn.prob_scale"}) {
    EXPECT_EQ(remap_kv_scale_name(name), name);
  }
}

TEST(KvScaleName, MismatchedProjectionFollowsTheGenericRule) {
  // As the reference: only k_proj.k_scale / v_proj.v_scale are ModelOpt's; anything else gets
  // ".attn" inserted and names no attention parameter, so a loader skips it.
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.k_proj.v_scale"),
            "model.layers.0.self_attn.k_proj.attn.v_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.qkv_proj.prob_scale"),
            "model.layers.0.self_attn.qkv_proj.attn.prob_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.attention.k_proj.k_scale"),
            "model.layers.0.attention.k_proj.attn.k_scale");
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.mlp.down_proj.k_scale"), "model.layers.0.mlp.down_proj.attn.k_scale");
}

TEST(KvScaleName, NonMatchingNames) {
  LogCapture log;
  for (const char* name : {"model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.k_proj.weight_scale",
                           "model.layers.0.self_attn.k_proj.input_scale",
                           "model.layers.0.self_attn.qkv_proj.weight_scale_inv",
                           "model.layers.0.self_attn.k_proj.output_scale", "model.layers.0.self_attn.prob_output_scale",
                           "model.layers.0.self_attn.k_scales", "model.layers.0.self_attn.xk_scale",
                           "model.layers.0.self_attn.kv_scale.bias", "model.embed_tokens.weight", "k_scale", "kv_scale",
                           ""}) {
    EXPECT_EQ(remap_kv_scale_name(name), std::nullopt) << name;
  }
  EXPECT_TRUE(log.warnings.empty());
}

TEST(KvScaleName, ComposedWithGetCacheScale) {
  // A model loader asks the config first (compressed-tensors output_scale names), then
  // remap_kv_scale_name; every scheme of FORMATS.md 1f lands on a parameter of the layer.
  Fp8Config config;
  AttentionOptions options;
  options.kv_cache_dtype = "fp8";
  options.quant_config = &config;
  Attention attn("model.layers.0.self_attn.attn", 8, 64, 2, options);
  auto target_of = [&](const std::string& name) -> std::optional<std::string> {
    std::optional<std::string> target = config.get_cache_scale(name);
    if (!target) target = remap_kv_scale_name(name);
    return target;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model.layers.0.self_attn.kv_scale", "k_scale"},
      {"model.layers.0.self_attn.k_scale", "k_scale"},
      {"model.layers.0.self_attn.v_scale", "v_scale"},
      {"model.layers.0.self_attn.q_scale", "q_scale"},
      {"model.layers.0.self_attn.prob_scale", "prob_scale"},
      {"model.layers.0.self_attn.k_proj.k_scale", "k_scale"},
      {"model.layers.0.self_attn.v_proj.v_scale", "v_scale"},
      {"model.layers.0.self_attn.qkv_proj.k_scale", "k_scale"},
      {"model.layers.0.self_attn.qkv_proj.v_scale", "v_scale"},
      {"model.layers.0.self_attn.k_proj.output_scale", "k_scale"},
      {"model.layers.0.self_attn.v_proj.output_scale", "v_scale"},
      {"model.layers.0.self_attn.q_proj.output_scale", "q_scale"},
      {"model.layers.0.self_attn.prob_output_scale", "prob_scale"},
  };
  LogCapture log;  // the deprecated kv_scale warns
  for (const auto& [name, parameter] : cases) {
    const std::optional<std::string> target = target_of(name);
    ASSERT_TRUE(target.has_value()) << name;
    EXPECT_EQ(*target, "model.layers.0.self_attn.attn." + parameter) << name;
    EXPECT_NE(attn.find_parameter(parameter), nullptr) << name;
  }
  // compressed-tensors names are the config's alone.
  EXPECT_EQ(remap_kv_scale_name("model.layers.0.self_attn.k_proj.output_scale"), std::nullopt);
}

}  // namespace
}  // namespace fp8kit
