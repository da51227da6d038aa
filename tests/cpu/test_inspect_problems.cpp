// inspect_checkpoint and dequantize_checkpoint on hostile quantization configs and scales: every
// error of Fp8Config::from_config is a problem of inspect (the spec's text, prefixed with the
// file), dequantize refuses such a config and scales that are not finite and positive with the
// same text, block sizes of any value never divide by zero or overflow, non-string values name
// the key, and re: patterns match in linear time. The CLI side is in test_cli.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"
#include "fp8kit/safetensors.h"
#include "expect_error.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using nlohmann::ordered_json;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// One FP8 down_proj [256, 256] (every code 1.0) with a weight_scale_inv of `scale_shape` (every
// value `scale`), and config.json's quantization_config `qc`.
std::string write_fp8(const std::string& dir, const ordered_json& qc, const Shape& scale_shape, float scale = 1.0f) {
  std::filesystem::create_directories(dir);
  Tensor w = Tensor::empty({256, 256}, DType::kE4M3FN);
  for (int64_t i = 0; i < w.numel(); ++i) static_cast<uint8_t*>(w.data_ptr())[i] = 0x38;  // 1.0
  Tensor s = Tensor::empty(scale_shape, DType::kF32);
  for (int64_t i = 0; i < s.numel(); ++i) s.data<float>()[i] = scale;
  save_safetensors(dir + "/model.safetensors", {{"model.layers.0.mlp.down_proj.weight", w},
                                                {"model.layers.0.mlp.down_proj.weight_scale_inv", s}});
  write_json_file(dir + "/config.json", {{"architectures", {"Qwen3ForCausalLM"}}, {"quantization_config", qc}});
  return dir;
}

ordered_json block_config(const ordered_json& block) {
  return {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", block}};
}

bool has_problem(const InspectReport& r, const std::string& text) {
  for (const std::string& p : r.problems) {
    if (p == text) return true;
  }
  ADD_FAILURE() << "no problem '" << text << "' in:\n" << r.to_text();
  return false;
}

TEST(InspectProblems, ZeroBlockSizesAreProblemsNotDivisions) {
  const std::string root = testing::scratch_dir();
  for (const auto& [block, text] : std::vector<std::pair<ordered_json, std::string>>{
           {{0, 128}, "[0, 128]"}, {{128, 0}, "[128, 0]"}, {{0, 0}, "[0, 0]"}}) {
    const std::string dir = write_fp8(root + "/b" + text, block_config(block), {2, 2});
    const InspectReport r = inspect_checkpoint(dir);
    EXPECT_EQ(r.format, "fp8");
    EXPECT_TRUE(has_problem(r, "config.json: weight_block_size must hold positive integers, but got " + text));
    testing::expect_invalid([&] { dequantize_checkpoint(dir, dir + ".out", {}); },
                            dir + "/config.json: weight_block_size must hold positive integers, but got " + text);
    EXPECT_FALSE(std::filesystem::exists(dir + ".out"));
  }
}

TEST(InspectProblems, CompressedTensorsZeroBlockStructure) {
  const std::string root = testing::scratch_dir();
  const ordered_json group = {{"targets", {"Linear"}},
                              {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "block"},
                                           {"block_structure", {0, 128}}}}};
  const std::string dir = write_fp8(
      root + "/ct", {{"quant_method", "compressed-tensors"}, {"config_groups", {{"group_0", group}}}}, {2, 2});
  const InspectReport r = inspect_checkpoint(dir);
  EXPECT_TRUE(has_problem(r, "config.json: config_groups.group_0.weights.block_structure must hold two positive "
                             "integers, got [0,128]"));
  testing::expect_invalid([&] { dequantize_checkpoint(dir, root + "/out", {}); },
                          dir + "/config.json: config_groups.group_0.weights.block_structure must hold two positive "
                                "integers, got [0,128]");
}

TEST(InspectProblems, HugeBlockSizesNeverOverflow) {
  const std::string root = testing::scratch_dir();
  // ceil(256 / (2^63 - 1)) is 1, not the 0 of (a + b - 1) / b: an empty scale fits no scheme.
  std::string dir = write_fp8(root + "/n", block_config({kMax, 128}), {0, 2});
  InspectReport r = inspect_checkpoint(dir);
  EXPECT_TRUE(has_problem(r, "model.layers.0.mlp.down_proj.weight_scale_inv has shape [0, 2], which fits no scheme "
                             "for weight [256, 256] and block size 9223372036854775807x128"));
  testing::expect_invalid([&] { dequantize_checkpoint(dir, root + "/n.out", {}); },
                          dir + ": cannot dequantize 'model.layers.0.mlp.down_proj.weight': its scale fits no known "
                                "scheme");
  dir = write_fp8(root + "/k", block_config({128, kMax}), {2, 0});
  r = inspect_checkpoint(dir);
  EXPECT_TRUE(has_problem(r, "model.layers.0.mlp.down_proj.weight_scale_inv has shape [2, 0], which fits no scheme "
                             "for weight [256, 256] and block size 128x9223372036854775807"));

  // A block larger than the weight is one partial block (legal, spec 1.12): the scale is [1, 2].
  dir = write_fp8(root + "/ok", block_config({kMax, 128}), {1, 2}, 0.5f);
  r = inspect_checkpoint(dir);
  EXPECT_TRUE(r.problems.empty()) << r.to_text();
  DequantizeOptions f32;
  f32.out_dtype = DType::kF32;
  dequantize_checkpoint(dir, root + "/ok.out", f32);
  const Tensor back = Checkpoint::open(root + "/ok.out").tensor("model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(back.data<float>()[0], 0.5f);
  EXPECT_EQ(back.data<float>()[back.numel() - 1], 0.5f);

  dir = write_fp8(root + "/neg", block_config({-128, 128}), {0, 2});
  r = inspect_checkpoint(dir);
  EXPECT_TRUE(has_problem(r, "config.json: weight_block_size must hold positive integers, but got [-128, 128]"));
}

// A weight of one block has a [1, 1] block scale: fp8kit's own quantize of a 128 x 128 weight
// writes it, and inspect called it "a per-tensor scale in a block-quantized checkpoint" (exit 3).
// A one-element scale of another shape in a block checkpoint is still that problem.
TEST(InspectProblems, OneBlockWeightHasABlockScale) {
  const std::string root = testing::scratch_dir();
  for (const ordered_json& block : {ordered_json{256, 256}, ordered_json{kMax, 256}}) {
    const std::string dir = write_fp8(root + "/one" + block[0].dump(), block_config(block), {1, 1}, 0.5f);
    const InspectReport r = inspect_checkpoint(dir);
    EXPECT_TRUE(r.problems.empty()) << r.to_text();
    DequantizeOptions f32;
    f32.out_dtype = DType::kF32;
    dequantize_checkpoint(dir, dir + ".out", f32);
    const Tensor back = Checkpoint::open(dir + ".out").tensor("model.layers.0.mlp.down_proj.weight");
    EXPECT_EQ(back.data<float>()[back.numel() - 1], 0.5f);
  }
  const std::string dir = write_fp8(root + "/scalar", block_config({128, 128}), {1});
  EXPECT_TRUE(has_problem(inspect_checkpoint(dir), "model.layers.0.mlp.down_proj.weight has a per-tensor scale in a "
                                                   "block-quantized checkpoint"));
}

TEST(InspectProblems, BadScalesAreRefusedByDequantize) {
  const std::string root = testing::scratch_dir();
  const std::vector<float> bad_values = {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY, -1.0f, 0.0f};
  for (size_t i = 0; i < bad_values.size(); ++i) {
    const float bad = bad_values[i];
    const std::string dir = write_fp8(root + "/s" + std::to_string(i), block_config({128, 128}), {2, 2}, bad);
    const std::string problem = "model.layers.0.mlp.down_proj.weight_scale_inv has 4 value(s) that are not finite and "
                                "positive";
    EXPECT_TRUE(has_problem(inspect_checkpoint(dir), problem)) << bad;
    testing::expect_invalid([&] { dequantize_checkpoint(dir, dir + ".out", {}); },
                            dir + ": cannot dequantize 'model.layers.0.mlp.down_proj.weight': " + problem);
    EXPECT_FALSE(std::filesystem::exists(dir + ".out"));
  }
}

// Every error vLLM's Fp8Config raises for the config, in the spec's words (spec 1.1).
TEST(InspectProblems, Fp8ConfigErrorsAreProblems) {
  const std::string root = testing::scratch_dir();
  const std::vector<std::pair<ordered_json, std::string>> cases = {
      {{{"quant_method", "fp8"}, {"activation_scheme", "foo"}}, "Unsupported activation scheme foo"},
      {{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128, 128}}},
       "The quantization block size of weight must have 2 dimensions, but got 3 dimensions"},
      {{{"quant_method", "fp8"}, {"activation_scheme", "static"}, {"weight_block_size", {128, 128}}},
       "The block-wise quantization only supports dynamic activation scheme for now, but got static activation "
       "scheme."},
      {{{"quant_method", "fp8"}}, "Cannot find any of ['activation_scheme'] in the model's quantization config."},
      {{{"activation_scheme", "dynamic"}}, "Cannot find any of ['quant_method'] in the model's quantization config."},
      {{{"quant_method", 5}, {"activation_scheme", "dynamic"}},
       "quantization config key 'quant_method' must be a string, got integer"},
      {{{"quant_method", "fp8"}, {"activation_scheme", 5}},
       "quantization config key 'activation_scheme' must be a string, got integer"},
      {{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"ignored_layers", "lm_head"}},
       "quantization config key 'ignored_layers' must be a list of strings, got string"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [qc, text] = cases[i];
    const std::string dir = write_fp8(root + "/c" + std::to_string(i), qc, {2, 2});
    EXPECT_TRUE(has_problem(inspect_checkpoint(dir), "config.json: " + text)) << qc.dump();
    testing::expect_invalid([&] { dequantize_checkpoint(dir, dir + ".out", {}); }, dir + "/config.json: " + text);
  }
}

TEST(InspectProblems, QuantizationConfigThatIsNoObject) {
  const std::string root = testing::scratch_dir();
  const std::string dir = write_fp8(root + "/list", {1, 2}, {1});
  const InspectReport r = inspect_checkpoint(dir);
  EXPECT_EQ(r.format, "unknown");
  EXPECT_TRUE(has_problem(r, "config.json: key 'quantization_config' must be a JSON object, got array"));
  testing::expect_invalid([&] { dequantize_checkpoint(dir, dir + ".out", {}); },
                          dir + "/config.json: key 'quantization_config' must be a JSON object, got array");
}

TEST(InspectProblems, NonStringQuantAlgoNamesTheKey) {
  const std::string root = testing::scratch_dir();
  const std::string dir = write_fp8(root + "/m", {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}}, {1});
  std::filesystem::remove(dir + "/config.json");
  write_json_file(dir + "/config.json", {{"architectures", {"Qwen3ForCausalLM"}}});
  write_json_file(dir + "/hf_quant_config.json", {{"quantization", {{"quant_algo", 7}}}});
  const InspectReport r = inspect_checkpoint(dir);
  EXPECT_EQ(r.format, "modelopt");
  EXPECT_TRUE(has_problem(r, "hf_quant_config.json: quantization config key 'quant_algo' must be a string, got "
                             "integer"));
}

TEST(InspectProblems, RegexPatternsMatchInLinearTime) {
  const std::string root = testing::scratch_dir();
  // 2^16 backtracking paths per position with std::regex (84 s in the probe); the DFA matcher
  // does not backtrack.
  std::string pattern = "re:";
  for (int i = 0; i < 64; ++i) pattern += "(a*)*";
  pattern += "b";
  ordered_json qc = block_config({128, 128});
  qc["ignored_layers"] = {pattern, "re:model\\.layers\\.0\\.mlp\\.down"};
  const std::string dir = write_fp8(root + "/redos", qc, {2, 2});
  const auto start = std::chrono::steady_clock::now();
  const InspectReport r = inspect_checkpoint(dir);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  // The second pattern matches at the start of the module name (Python's re.match), so the FP8
  // weight is in an ignored module.
  EXPECT_TRUE(has_problem(r, "model.layers.0.mlp.down_proj.weight is FP8 but its module is listed as ignored"));
}

TEST(InspectProblems, PatternsFp8kitCannotMatchAreProblems) {
  const std::string root = testing::scratch_dir();
  ordered_json qc = block_config({128, 128});
  qc["ignored_layers"] = {"re:(a)\\1", "re:(a"};
  const std::string dir = write_fp8(root + "/backref", qc, {2, 2});
  const InspectReport r = inspect_checkpoint(dir);
  EXPECT_TRUE(has_problem(r, "config.json: ignored layer pattern '(a)\\x5c1' is not a regular expression fp8kit can "
                             "match (a backreference); fp8kit matches re: patterns without backtracking, which rules "
                             "out backreferences and recursion"));
  EXPECT_TRUE(has_problem(r, "config.json: ignored layer pattern '(a' is not a regular expression fp8kit can match "
                             "(missing closing parenthesis at offset 2); fp8kit matches re: patterns without "
                             "backtracking, which rules out backreferences and recursion"));
  // Not a loader's refusal (vLLM compares ignored_layers as strings): dequantize goes on.
  dequantize_checkpoint(dir, root + "/out", {});
}

}  // namespace
}  // namespace fp8kit
