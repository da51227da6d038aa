// parse_rope_config (src/ops/rope/rope_config.cpp): the RoPE fields of real config.json shapes
// (Llama 3.1, Qwen2.5 yarn with the legacy `type` key, Llama 2 defaults, linear, dynamic, partial
// rotary, GPT-J's rotary_dim, transformers v5 rope_parameters, DeepSeek-style mscale) and every
// bad value with the error that names its field.
#include <gtest/gtest.h>

#include <string>

#include "expect_error.h"
#include "fp8kit/ops/rope.h"

namespace fp8kit {
namespace {

using ops::parse_rope_config;
using ops::RopeType;
using testing::expect_invalid;

TEST(RopeConfig, Llama31) {
  const auto c =
      parse_rope_config(R"({"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  EXPECT_EQ(c.type, RopeType::kLlama3);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rotary_dim, 128);
  EXPECT_EQ(c.theta, 500000.0);
  EXPECT_EQ(c.factor, 8.0);
  EXPECT_EQ(c.low_freq_factor, 1.0);
  EXPECT_EQ(c.high_freq_factor, 4.0);
  EXPECT_EQ(c.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_TRUE(c.is_neox_style);
}

TEST(RopeConfig, QwenYarnWithLegacyTypeKey) {
  const auto c = parse_rope_config(R"({"hidden_size": 5120, "num_attention_heads": 40, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})");
  EXPECT_EQ(c.type, RopeType::kYarn);
  EXPECT_EQ(c.factor, 4.0);  // as configured (vLLM, transformers v5), not max_pos / original
  EXPECT_EQ(c.original_max_position_embeddings, 32768);
  EXPECT_EQ(c.beta_fast, 32.0);
  EXPECT_EQ(c.beta_slow, 1.0);
  EXPECT_FALSE(c.attention_factor.has_value());
  EXPECT_TRUE(c.truncate);
}

TEST(RopeConfig, DefaultsLinearDynamic) {
  auto c =
      parse_rope_config(R"({"head_dim": 128, "hidden_size": 5120, "num_attention_heads": 32, "rope_scaling": null})");
  EXPECT_EQ(c.type, RopeType::kDefault);
  EXPECT_EQ(c.head_dim, 128);  // head_dim wins over hidden_size / heads (Mistral Nemo)
  EXPECT_EQ(c.theta, 10000.0);
  c = parse_rope_config(R"({"head_dim": 64, "rope_scaling": {"type": "linear", "factor": 2.0}})");
  EXPECT_EQ(c.type, RopeType::kLinear);
  EXPECT_EQ(c.factor, 2.0);
  c = parse_rope_config(
      R"({"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "dynamic", "factor": 2}})");
  EXPECT_EQ(c.type, RopeType::kDynamic);
  EXPECT_EQ(c.factor, 2.0);
  c = parse_rope_config(R"({"head_dim": 64, "rope_scaling": {"rope_type": "default"}})");
  EXPECT_EQ(c.type, RopeType::kDefault);
}

TEST(RopeConfig, PartialRotaryAndRotaryDim) {
  auto c = parse_rope_config(R"({"hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4})");
  EXPECT_EQ(c.head_dim, 80);
  EXPECT_EQ(c.rotary_dim, 32);  // int(80 * 0.4)
  c = parse_rope_config(R"({"head_dim": 256, "rotary_dim": 64})");
  EXPECT_EQ(c.rotary_dim, 64);
  // transformers v5: rope_parameters holds rope_theta and partial_rotary_factor.
  c = parse_rope_config(R"({"head_dim": 128, "rope_theta": 1.0, "rope_parameters": {"rope_type": "default",
    "rope_theta": 500000.0, "partial_rotary_factor": 0.25}})");
  EXPECT_EQ(c.theta, 500000.0);
  EXPECT_EQ(c.rotary_dim, 32);
}

TEST(RopeConfig, YarnOptionalFields) {
  const auto c =
      parse_rope_config(R"({"head_dim": 64, "max_position_embeddings": 163840, "rope_scaling": {"type": "yarn",
    "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": null, "mscale": 1.0,
    "mscale_all_dim": 1.0, "truncate": false}})");
  EXPECT_EQ(c.beta_fast, 32.0);
  EXPECT_EQ(c.beta_slow, 1.0);  // null: HF's `or 1`
  EXPECT_EQ(c.mscale, 1.0);
  EXPECT_EQ(c.mscale_all_dim, 1.0);
  EXPECT_FALSE(c.truncate);
  const auto d = parse_rope_config(R"({"head_dim": 64, "max_position_embeddings": 8192,
    "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "attention_factor": 1.5}})");
  EXPECT_EQ(d.original_max_position_embeddings, 8192);  // defaults to max_position_embeddings
  EXPECT_EQ(d.attention_factor, 1.5);
  EXPECT_EQ(ops::rope_frequencies(d).attention_factor, 1.5f);
}

TEST(RopeConfig, Errors) {
  auto bad = [](const std::string& text, const std::string& message) {
    expect_invalid([&] { parse_rope_config(text); }, message);
  };
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 0.5}})",
      "config.json: `rope_scaling.factor` must be a number >= 1, got 0.5");
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear"}})",
      "config.json: `rope_scaling.factor` must be a number >= 1, got nothing");
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "longrope", "factor": 2}})",
      "config.json: rope_scaling.rope_type `longrope` is not supported (supported: default, linear, dynamic, llama3, "
      "yarn)");
  bad(R"({"head_dim": 64, "rope_scaling": {"type": "su"}})",
      "config.json: rope_scaling.type `su` is not supported (supported: default, linear, dynamic, llama3, yarn)");
  bad(R"({"head_dim": 64, "rope_parameters": {"rope_type": "mrope"}})",
      "config.json: rope_parameters.rope_type `mrope` is not supported (supported: default, linear, dynamic, llama3, "
      "yarn)");
  bad(R"({"head_dim": 64, "partial_rotary_factor": 1.5})",
      "config.json: `partial_rotary_factor` must be in (0, 1], got 1.5");
  bad(R"({"head_dim": 64, "partial_rotary_factor": 0.3})",
      "config.json: `partial_rotary_factor` = 0.3 gives rotary_dim 19 (head_dim 64), which must be even and at least "
      "2");
  bad(R"({"head_dim": 64, "rotary_dim": 65})",
      "config.json: `rotary_dim` must be even and at most head_dim 64, got 65");
  bad(R"({"head_dim": 64, "rope_theta": "big"})", "config.json: `rope_theta` must be a number, got \"big\"");
  bad(R"({"head_dim": 64, "rope_theta": -1})", "config.json: `rope_theta` must be a positive number, got -1");
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 8192,
      "low_freq_factor": 1}})",
      "config.json: llama3 RoPE needs `rope_scaling.low_freq_factor` and `rope_scaling.high_freq_factor`");
  bad(R"({"head_dim": 64,
      "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}})",
      "config.json: llama3 RoPE needs `rope_scaling.original_max_position_embeddings`");
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 8192,
      "low_freq_factor": 4, "high_freq_factor": 1}})",
      "config.json: `rope_scaling.high_freq_factor` 1 must be greater than `rope_scaling.low_freq_factor` 4");
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 0}})",
      "config.json: `rope_scaling.original_max_position_embeddings` must be a positive integer, got 0");
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": 4}})",
      "config.json: yarn RoPE needs `rope_scaling.original_max_position_embeddings` or `max_position_embeddings`");
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 64,
      "truncate": "yes"}})",
      "config.json: `rope_scaling.truncate` must be true or false, got \"yes\"");
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 64,
      "attention_factor": 0}})",
      "config.json: `rope_scaling.attention_factor` must be a positive number, got 0");
  bad(R"({"head_dim": 64, "rope_scaling": {"rope_type": "dynamic", "factor": 2}})",
      "config.json: dynamic RoPE needs `max_position_embeddings`");
  bad(R"({"head_dim": 64, "rope_scaling": [1, 2]})",
      "config.json: `rope_scaling` must be an object or null, got [1,2]");
  bad(R"({"hidden_size": 100, "num_attention_heads": 3})",
      "config.json: `hidden_size` 100 is not a multiple of `num_attention_heads` 3");
  bad(R"({"num_attention_heads": 3})", "config.json: needs `head_dim`, or `hidden_size` and `num_attention_heads`");
  bad(R"({"head_dim": -4})", "config.json: `head_dim` must be a positive integer, got -4");
  bad("[1]", "config.json: expected a JSON object, got array");
  bad(std::string(100, '[') + std::string(100, ']'), "config.json: nested deeper than 64 levels");
  testing::expect_error_containing([] { parse_rope_config("{\"head_dim\": 64,"); }, ErrorCode::kInvalidArgument,
                                   "config.json: not valid JSON: ");
}

}  // namespace
}  // namespace fp8kit
