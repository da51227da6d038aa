// parse_decoder_config (src/model/runner/decoder_config.h): the architectures the runner runs,
// sliding windows per layer as each architecture places them, vLLM's derived max_model_len, EOS
// ids, and the errors for what it does not run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "model/runner/decoder_config.h"

namespace fp8kit::runner {
namespace {

nlohmann::ordered_json base(const std::string& arch) {
  return {{"architectures", {arch}}, {"hidden_size", 64}, {"num_hidden_layers", 4}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"vocab_size", 100}, {"max_position_embeddings", 1024}};
}

DecoderConfig parse(const nlohmann::ordered_json& c) { return parse_decoder_config(c.dump()); }

TEST(RunnerConfig, ReadsTheLlamaFields) {
  auto c = base("LlamaForCausalLM");
  c["rms_norm_eps"] = 1e-5;
  c["eos_token_id"] = {2, 7};
  c["tie_word_embeddings"] = true;
  c["sliding_window"] = 16;  // Llama has none, whatever the config says
  const DecoderConfig d = parse(c);
  EXPECT_EQ(d.head_dim, 16);
  EXPECT_EQ(d.num_kv_heads, 2);
  EXPECT_FLOAT_EQ(d.rms_norm_eps, 1e-5f);
  EXPECT_TRUE(d.tie_word_embeddings);
  EXPECT_FALSE(d.qk_norm);
  EXPECT_TRUE(d.rope.is_neox_style);
  EXPECT_EQ(d.max_model_len, 1024);
  EXPECT_EQ(d.eos_token_ids, (std::vector<int32_t>{2, 7}));
  EXPECT_EQ(d.sliding_window, std::vector<std::optional<int64_t>>(4));
  EXPECT_TRUE(parse(base("Qwen3ForCausalLM")).qk_norm);
  EXPECT_TRUE(parse(base("Qwen3MoeForCausalLM")).qk_norm);
}

TEST(RunnerConfig, PlacesSlidingWindowsPerArchitecture) {
  auto c = base("MistralForCausalLM");
  c["sliding_window"] = 8;
  EXPECT_EQ(parse(c).sliding_window, std::vector<std::optional<int64_t>>(4, 8));
  c["sliding_window"] = nullptr;
  EXPECT_EQ(parse(c).sliding_window, std::vector<std::optional<int64_t>>(4));
  c = base("Qwen2ForCausalLM");
  c["sliding_window"] = 8;
  EXPECT_EQ(parse(c).sliding_window, std::vector<std::optional<int64_t>>(4));  // use_sliding_window is off
  c["use_sliding_window"] = true;
  c["max_window_layers"] = 2;
  EXPECT_EQ(parse(c).sliding_window, (std::vector<std::optional<int64_t>>{std::nullopt, std::nullopt, 8, 8}));
  c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  EXPECT_EQ(parse(c).sliding_window, (std::vector<std::optional<int64_t>>{8, std::nullopt, 8, std::nullopt}));
  c["layer_types"] = {"sliding_attention"};
  testing::expect_invalid([&] { parse(c); }, "config.json: `layer_types` has 1 entries for 4 layers");
}

TEST(RunnerConfig, DerivesTheMaximumLengthAsVllm) {
  auto c = base("LlamaForCausalLM");
  c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  EXPECT_EQ(parse(c).max_model_len, 2048);
  c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  EXPECT_EQ(parse(c).max_model_len, 4096);
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 256}};
  EXPECT_EQ(parse(c).max_model_len, 1024);
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"original_max_position_embeddings", 256},
                       {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}};
  EXPECT_EQ(parse(c).max_model_len, 1024);
  c.erase("max_position_embeddings");
  c.erase("rope_scaling");
  EXPECT_EQ(parse(c).max_model_len, 2048);
}

TEST(RunnerConfig, RefusesWhatItDoesNotRun) {
  testing::expect_error([] { parse(base("GPT2LMHeadModel")); }, ErrorCode::kUnsupported,
                        "model architecture 'GPT2LMHeadModel' is not supported by the model runner (supported: "
                        "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, "
                        "MixtralForCausalLM)");
  auto c = base("LlamaForCausalLM");
  c["hidden_act"] = "gelu";
  testing::expect_error([&] { parse(c); }, ErrorCode::kUnsupported,
                        "config.json: hidden_act 'gelu' is not supported (only silu)");
  c = base("LlamaForCausalLM");
  c.erase("vocab_size");
  testing::expect_invalid([&] { parse(c); }, "config.json: `vocab_size` must be a positive integer");
  c = base("LlamaForCausalLM");
  c["eos_token_id"] = "x";
  testing::expect_invalid([&] { parse(c); }, "config.json: `eos_token_id` must be a token id or a list of them");
  testing::expect_invalid([] { parse_decoder_config("{"); },
                          "config.json is not valid JSON: [json.exception.parse_error.101] parse error at line 1, "
                          "column 2: syntax error while parsing object key - unexpected end of input; expected string "
                          "literal");
}

}  // namespace
}  // namespace fp8kit::runner
