// quantize_checkpoint / dequantize_checkpoint / inspect_checkpoint on synthetic Qwen3-MoE-style
// checkpoints: the exact tensor names, dtypes, shapes and config keys of each vLLM format, shared
// scales of fused modules, sharded output, round trips, and every refusal with its message.
#include <gtest/gtest.h>

#include <cfloat>
#include <fstream>
#include <functional>
#include <filesystem>
#include <set>

#include "convert/quantization_error.h"
#include "convert/synthetic_checkpoint.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"
#include "fp8kit/half.h"
#include "expect_error.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

namespace fs = std::filesystem;
using convert::SyntheticModelSpec;

std::string make_model(const std::string& root, SyntheticModelSpec spec = {}) {
  const std::string dir = root + "/bf16";
  convert::write_synthetic_checkpoint(dir, spec);
  std::ofstream(dir + "/tokenizer.json") << "{}";
  return dir;
}

QuantizeOptions scheme(QuantScheme s) {
  QuantizeOptions o;
  o.scheme = s;
  return o;
}

bool is_quantized_linear(const std::string& name) {
  for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
    if (name.find(std::string(".") + p + ".weight") != std::string::npos) return true;
  }
  return false;
}

// The whole output, tensor by tensor, against the layout each format prescribes.
void expect_layout(const std::string& in, const std::string& out, QuantScheme s) {
  const Checkpoint src = Checkpoint::open(in);
  const Checkpoint dst = Checkpoint::open(out);
  std::set<std::string> expected;
  for (const std::string& name : src.tensor_names()) {
    expected.insert(name);
    const TensorInfo& info = src.info(name);
    if (!is_quantized_linear(name)) {
      EXPECT_EQ(dst.info(name).dtype, info.dtype) << name;
      EXPECT_EQ(dst.info(name).shape, info.shape) << name;
      continue;
    }
    EXPECT_EQ(dst.info(name).dtype, DType::kE4M3FN) << name;
    EXPECT_EQ(dst.info(name).shape, info.shape) << name;
    const std::string module = name.substr(0, name.size() - 7);
    const int64_t n = info.shape[0], k = info.shape[1];
    const std::string scale = module + (s == QuantScheme::kBlock ? ".weight_scale_inv" : ".weight_scale");
    expected.insert(scale);
    ASSERT_TRUE(dst.contains(scale)) << scale;
    EXPECT_EQ(dst.info(scale).dtype, DType::kF32) << scale;
    const Shape want = s == QuantScheme::kBlock      ? Shape{(n + 127) / 128, (k + 127) / 128}
                       : s == QuantScheme::kPerChannel ? Shape{n, 1}
                                                       : Shape{};
    EXPECT_EQ(dst.info(scale).shape, want) << scale;
  }
  const std::vector<std::string> names = dst.tensor_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
}

TEST(QuantizeCheckpoint, BlockLayoutAndConfig) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  const ConversionReport r = quantize_checkpoint(in, root + "/out", scheme(QuantScheme::kBlock));
  expect_layout(in, root + "/out", QuantScheme::kBlock);
  const auto config = read_json_file(root + "/out/config.json");
  const nlohmann::ordered_json want = {{"quant_method", "fp8"},
                                       {"activation_scheme", "dynamic"},
                                       {"fmt", "e4m3"},
                                       {"weight_block_size", {128, 128}},
                                       {"ignored_layers", {"lm_head", "model.layers.1.mlp.gate"}}};
  EXPECT_EQ(config["quantization_config"], want);
  EXPECT_EQ(config["model_type"], "qwen3_moe");  // the rest of the config is kept
  EXPECT_TRUE(fs::exists(root + "/out/tokenizer.json"));
  EXPECT_TRUE(fs::exists(root + "/out/generation_config.json"));
  EXPECT_FALSE(fs::exists(root + "/out.partial"));
  // 2 layers x 4 attention + 3 dense MLP + 8 experts x 3 = 35 weights.
  EXPECT_EQ(r.tensors_quantized, 35);
  EXPECT_EQ(r.ignored_layers, (std::vector<std::string>{"lm_head", "model.layers.1.mlp.gate"}));
  EXPECT_TRUE(inspect_checkpoint(root + "/out").problems.empty());
}

TEST(QuantizeCheckpoint, PerTensorSharesScalesAcrossFusedShards) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  quantize_checkpoint(in, root + "/out", scheme(QuantScheme::kPerTensor));
  expect_layout(in, root + "/out", QuantScheme::kPerTensor);
  const Checkpoint out = Checkpoint::open(root + "/out");
  auto scale = [&](const std::string& module) { return out.tensor(module + ".weight_scale").item_f32(); };
  const std::string attn = "model.layers.0.self_attn.";
  EXPECT_EQ(scale(attn + "q_proj"), scale(attn + "k_proj"));
  EXPECT_EQ(scale(attn + "q_proj"), scale(attn + "v_proj"));
  EXPECT_NE(scale(attn + "q_proj"), scale(attn + "o_proj"));
  EXPECT_EQ(scale("model.layers.0.mlp.gate_proj"), scale("model.layers.0.mlp.up_proj"));
  const std::string e3 = "model.layers.1.mlp.experts.3.";
  EXPECT_EQ(scale(e3 + "gate_proj"), scale(e3 + "up_proj"));
  EXPECT_NE(scale(e3 + "gate_proj"), scale("model.layers.1.mlp.experts.4.gate_proj"));
  const auto config = read_json_file(root + "/out/config.json");
  const nlohmann::ordered_json want = {{"quant_method", "fp8"},
                                       {"activation_scheme", "dynamic"},
                                       {"ignored_layers", {"lm_head", "model.layers.1.mlp.gate"}}};
  EXPECT_EQ(config["quantization_config"], want);
  EXPECT_TRUE(inspect_checkpoint(root + "/out").problems.empty());
}

TEST(QuantizeCheckpoint, PerChannelIsCompressedTensors) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  quantize_checkpoint(in, root + "/out", scheme(QuantScheme::kPerChannel));
  expect_layout(in, root + "/out", QuantScheme::kPerChannel);
  const auto qc = read_json_file(root + "/out/config.json")["quantization_config"];
  std::vector<std::string> keys;
  for (const auto& [k, v] : qc.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"config_groups", "format", "global_compression_ratio", "ignore",
                                            "kv_cache_scheme", "quant_method", "quantization_status"}));
  EXPECT_EQ(qc["config_groups"]["group_0"]["weights"]["strategy"], "channel");
  EXPECT_EQ(qc["config_groups"]["group_0"]["input_activations"]["strategy"], "token");
  EXPECT_EQ(qc["ignore"], nlohmann::ordered_json({"lm_head", "model.layers.1.mlp.gate"}));
  EXPECT_TRUE(inspect_checkpoint(root + "/out").problems.empty());
}

TEST(QuantizeCheckpoint, ShardedInputGivesShardedOutput) {
  const std::string root = testing::scratch_dir();
  SyntheticModelSpec spec;
  spec.max_shard_bytes = 1 << 20;
  const std::string in = make_model(root, spec);
  ASSERT_TRUE(Checkpoint::open(in).sharded());
  std::vector<ConversionProgress> seen;
  QuantizeOptions o = scheme(QuantScheme::kBlock);
  o.progress = [&](const ConversionProgress& p) { seen.push_back(p); };
  const ConversionReport r = quantize_checkpoint(in, root + "/out", o);
  const Checkpoint out = Checkpoint::open(root + "/out");
  EXPECT_TRUE(out.sharded());
  EXPECT_EQ(out.shard_files(), Checkpoint::open(in).shard_files());
  const SafetensorsIndex index = read_safetensors_index(root + "/out/model.safetensors.index.json");
  EXPECT_EQ(index.weight_map.size(), out.tensor_names().size());
  uint64_t total = 0;
  for (const std::string& name : out.tensor_names()) {
    EXPECT_EQ(index.weight_map.at(name), out.shard_of(name)) << name;
    total += out.info(name).data_end - out.info(name).data_begin;
  }
  EXPECT_EQ(index.total_size, total);
  EXPECT_EQ(r.output_tensor_bytes, total);
  ASSERT_FALSE(seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].bytes_done, seen[i - 1].bytes_done);
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
  // The scale of each weight sits in the weight's shard.
  for (const std::string& name : out.tensor_names()) {
    if (name.size() > 17 && name.compare(name.size() - 17, 17, ".weight_scale_inv") == 0) {
      EXPECT_EQ(out.shard_of(name), out.shard_of(name.substr(0, name.size() - 10))) << name;
    }
  }
}

TEST(QuantizeCheckpoint, RoundTripThroughDequantizeIsClose) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  for (QuantScheme s : {QuantScheme::kPerTensor, QuantScheme::kPerChannel, QuantScheme::kBlock}) {
    const std::string q = root + "/" + quant_scheme_name(s), d = q + "-bf16";
    quantize_checkpoint(in, q, scheme(s));
    const ConversionReport r = dequantize_checkpoint(q, d, {});
    EXPECT_EQ(r.tensors_quantized, 35);
    const Checkpoint a = Checkpoint::open(in), b = Checkpoint::open(d);
    EXPECT_EQ(a.tensor_names(), b.tensor_names());
    for (const std::string& name : a.tensor_names()) {
      EXPECT_EQ(a.info(name).dtype, b.info(name).dtype) << name;
      EXPECT_EQ(a.info(name).shape, b.info(name).shape) << name;
    }
    EXPECT_FALSE(read_json_file(d + "/config.json").contains("quantization_config"));
    // FP8 e4m3 keeps 3 mantissa bits: relative error per element <= 2^-4, far less in norm.
    for (const auto& e : convert::measure_quantization_error(in, q)) {
      EXPECT_TRUE(e.weight_rel_error <= 0.04) << e.name << " " << e.weight_rel_error;
      EXPECT_TRUE(e.product_rel_error <= 0.04) << e.name << " " << e.product_rel_error;
      EXPECT_TRUE(e.weight_rel_error > 0.0) << e.name;
    }
  }
}

using testing::expect_error_containing;

TEST(QuantizeCheckpoint, RefusesToOverwriteWithoutForce) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  fs::create_directories(root + "/out");
  std::ofstream(root + "/out/keep.txt") << "precious";
  expect_error_containing([&] { quantize_checkpoint(in, root + "/out", scheme(QuantScheme::kBlock)); },
               ErrorCode::kInvalidArgument, "already exists; pass --force to replace it");
  EXPECT_TRUE(fs::exists(root + "/out/keep.txt"));
  QuantizeOptions o = scheme(QuantScheme::kBlock);
  o.force = true;
  quantize_checkpoint(in, root + "/out", o);
  EXPECT_FALSE(fs::exists(root + "/out/keep.txt"));
  EXPECT_TRUE(fs::exists(root + "/out/config.json"));
  expect_error_containing([&] { quantize_checkpoint(in, in, o); }, ErrorCode::kInvalidArgument, "is the input directory");
}

TEST(QuantizeCheckpoint, NonFiniteWeightIsRefusedAndNothingIsLeftBehind) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  // Rewrite the checkpoint with a NaN in one weight.
  const Checkpoint src = Checkpoint::open(in);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : src.tensor_names()) tensors.push_back({name, src.tensor(name).clone()});
  for (auto& [name, t] : tensors) {
    if (name == "model.layers.0.mlp.down_proj.weight") t.data<BFloat16>()[5] = float_to_bf16(NAN);
  }
  save_safetensors(in + "/model.safetensors", tensors);
  expect_error_containing([&] { quantize_checkpoint(in, root + "/out", scheme(QuantScheme::kBlock)); },
               ErrorCode::kInvalidArgument, "tensor 'model.layers.0.mlp.down_proj.weight' holds a NaN or infinity at flat index 5");
  EXPECT_FALSE(fs::exists(root + "/out"));
  EXPECT_FALSE(fs::exists(root + "/out.partial"));
}

TEST(QuantizeCheckpoint, BlockShapesVllmCannotLoadAreRefused) {
  const std::string root = testing::scratch_dir();
  SyntheticModelSpec spec;
  spec.num_kv_heads = 1;  // k_proj / v_proj get 64 rows: not a multiple of 128
  const std::string in = make_model(root, spec);
  expect_error_containing([&] { quantize_checkpoint(in, root + "/out", scheme(QuantScheme::kBlock)); },
               ErrorCode::kInvalidArgument,
               "model.layers.0.self_attn.k_proj.weight has 64 output rows, not a multiple of block_n 128, and vLLM "
               "stacks it into qkv_proj");
  QuantizeOptions o = scheme(QuantScheme::kBlock);
  o.block_n = 64;
  o.block_k = 64;
  quantize_checkpoint(in, root + "/out", o);
  EXPECT_EQ(read_json_file(root + "/out/config.json")["quantization_config"]["weight_block_size"],
            nlohmann::ordered_json({64, 64}));
  EXPECT_TRUE(inspect_checkpoint(root + "/out").problems.empty());
}

TEST(QuantizeCheckpoint, IgnoreRules) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  QuantizeOptions o = scheme(QuantScheme::kBlock);
  o.ignore = {"model.layers.0.self_attn.q_proj"};
  expect_error_containing([&] { quantize_checkpoint(in, root + "/a", o); }, ErrorCode::kInvalidArgument,
               "are stacked into one fused module by vLLM but only one of them is ignored");
  o.ignore = {"model.layers.1.mlp.experts.2.down_proj"};
  expect_error_containing([&] { quantize_checkpoint(in, root + "/b", o); }, ErrorCode::kInvalidArgument,
               "vLLM quantizes every expert of a fused MoE layer");
  o.ignore = {"re:model\\.layers\\.0\\.self_attn\\.[qkv]_proj", "model.layers.0.mlp.down_proj", "re:nothing.*"};
  const ConversionReport r = quantize_checkpoint(in, root + "/c", o);
  EXPECT_EQ(r.ignored_layers,
            (std::vector<std::string>{"lm_head", "model.layers.0.mlp.down_proj", "model.layers.0.self_attn.k_proj",
                                      "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
                                      "model.layers.1.mlp.gate"}));
  EXPECT_EQ(r.notes.front(), "--ignore re:nothing.* matched no linear layer");
  const Checkpoint out = Checkpoint::open(root + "/c");
  EXPECT_EQ(out.info("model.layers.0.self_attn.q_proj.weight").dtype, DType::kBF16);
  EXPECT_FALSE(out.contains("model.layers.0.self_attn.q_proj.weight_scale_inv"));
  EXPECT_TRUE(inspect_checkpoint(root + "/c").problems.empty());
  o.ignore = {"re:("};
  expect_error_containing([&] { quantize_checkpoint(in, root + "/d", o); }, ErrorCode::kInvalidArgument,
               "--ignore pattern '(' is not a regular expression fp8kit can match (missing closing parenthesis at offset 1)");
}

TEST(QuantizeCheckpoint, LmHeadOnRequest) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  QuantizeOptions o = scheme(QuantScheme::kBlock);
  o.quantize_lm_head = true;
  const ConversionReport r = quantize_checkpoint(in, root + "/out", o);
  EXPECT_EQ(r.tensors_quantized, 36);
  EXPECT_EQ(r.ignored_layers, (std::vector<std::string>{"model.layers.1.mlp.gate"}));
  EXPECT_EQ(Checkpoint::open(root + "/out").info("lm_head.weight").dtype, DType::kE4M3FN);
}

TEST(QuantizeCheckpoint, AlreadyQuantizedInputIsRefused) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  quantize_checkpoint(in, root + "/fp8", scheme(QuantScheme::kBlock));
  expect_error_containing([&] { quantize_checkpoint(root + "/fp8", root + "/again", scheme(QuantScheme::kBlock)); },
               ErrorCode::kInvalidArgument, "already has a quantization_config");
}

TEST(InspectCheckpoint, FindsProblems) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_model(root);
  quantize_checkpoint(in, root + "/fp8", scheme(QuantScheme::kBlock));
  // Drop one scale, make another negative, and keep one weight in BF16 without listing it.
  const Checkpoint src = Checkpoint::open(root + "/fp8");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : src.tensor_names()) {
    if (name == "model.layers.0.mlp.up_proj.weight_scale_inv") continue;
    Tensor t = src.tensor(name).clone();
    if (name == "model.layers.0.self_attn.o_proj.weight_scale_inv") t.data<float>()[0] = -1.0f;
    if (name == "model.layers.0.mlp.down_proj.weight") t = Checkpoint::open(in).tensor(name).clone();
    if (name == "model.layers.0.mlp.down_proj.weight_scale_inv") continue;
    tensors.push_back({name, t});
  }
  save_safetensors(root + "/fp8/model.safetensors", tensors);
  const InspectReport report = inspect_checkpoint(root + "/fp8");
  const std::vector<std::string> want = {
      "model.layers.0.mlp.down_proj.weight is BF16 but its module is not listed as ignored: a loader will expect FP8 "
      "weights",
      "model.layers.0.mlp.up_proj.weight is FP8 but has no weight_scale or weight_scale_inv",
      "model.layers.0.self_attn.o_proj.weight_scale_inv has 1 value(s) that are not finite and positive"};
  EXPECT_EQ(report.problems, want);
  EXPECT_EQ(report.format, "fp8-block");
  const auto json = report.to_json();
  EXPECT_EQ(json["problems"].size(), 3u);
  EXPECT_NE(report.to_text().find("problems (3):"), std::string::npos);
}

}  // namespace
}  // namespace fp8kit
