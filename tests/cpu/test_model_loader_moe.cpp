// The checkpoint loader on MoE models (include/fp8kit/model/model_loader.h): describe_hf_model for
// Qwen3-MoE, Mixtral and DeepSeek-V3; place_tensor for expert tensors (agreeing with
// make_expert_params_mapping); loading the synthetic Qwen3-MoE checkpoint written by
// quantize_checkpoint (per-tensor, block) and the BF16 one quantized online, the MoE layer's
// forward against the BF16 checkpoint in double; EP loading; a missing expert tensor; and
// `fp8kit inspect --loading` showing expert placements.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/layers/fp8_config.h"
#include "model_loader_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using namespace loader_test;
using json = nlohmann::ordered_json;

const char* const kMoE = "model.layers.1.mlp.experts";

// The BF16 synthetic Qwen3-MoE checkpoint and its per-tensor and block FP8 versions, written once.
struct MoECheckpoints {
  std::string bf16, per_tensor, block;
};
const MoECheckpoints& checkpoints() {
  static const MoECheckpoints c = [] {
    const std::string root = fp8kit::testing::process_dir("ModelLoaderMoE");
    MoECheckpoints out{root + "/bf16", root + "/fp8-tensor", root + "/fp8-block"};
    convert::write_synthetic_checkpoint(out.bf16, moe_spec());
    QuantizeOptions o;
    o.scheme = QuantScheme::kPerTensor;
    quantize_checkpoint(out.bf16, out.per_tensor, o);
    o.scheme = QuantScheme::kBlock;
    quantize_checkpoint(out.bf16, out.block, o);
    return out;
  }();
  return c;
}

// The MoE layer's output for random tokens and router logits against the BF16 experts in double
// (relative RMS). Measured: per-tensor and online 0.079 (the synthetic rows span e^-3..e^3, which
// a per-tensor scale resolves poorly), block 0.062; the bounds leave ~35% headroom.
double moe_error(const LoadedModel& model, const std::string& bf16_dir) {
  FusedMoE& layer = model.moe(kMoE);
  const Checkpoint bf16 = Checkpoint::open(bf16_dir);
  const Tensor x = random_bf16({6, layer.hidden_size()}, 5);
  Tensor logits = Tensor::empty({6, layer.global_num_experts()}, DType::kF32);
  const Tensor r = random_bf16(logits.shape(), 6);
  for (int64_t i = 0; i < logits.numel(); ++i) logits.data<float>()[i] = bf16_to_float(r.data<BFloat16>()[i]);
  const ops::TopkResult topk = FusedMoE::select_experts(cpu_ctx(), x, logits, layer.apply_options());
  const std::vector<double> ref = moe_reference(x, topk.weights, topk.ids, [&](int64_t e, const char* w) {
    const std::string proj = std::string(w) == "w1" ? "gate_proj" : std::string(w) == "w3" ? "up_proj" : "down_proj";
    return bf16.tensor(std::string(kMoE) + "." + std::to_string(e) + "." + proj + ".weight");
  });
  return rel_error(layer.forward(cpu_ctx(), x.clone(), logits), ref);
}

TEST(ModelLoaderMoE, DescribesQwen3Moe) {
  const Checkpoint ckpt = Checkpoint::open(checkpoints().bf16);
  json config = ckpt.config();
  ModelDescription d = describe_hf_model(config);
  ASSERT_EQ(d.moes.size(), 1u);
  const MoESpec& m = d.moes[0];
  EXPECT_EQ(m.prefix, kMoE);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.top_k, 2);
  EXPECT_EQ(m.intermediate_size, 256);
  EXPECT_TRUE(m.renormalize);  // norm_topk_prob
  EXPECT_EQ(m.router, "model.layers.1.mlp.gate.weight");
  EXPECT_NE(std::find(d.plain_tensors.begin(), d.plain_tensors.end(), m.router), d.plain_tensors.end());
  // Layer 0 is in mlp_only_layers: a dense MLP of intermediate_size.
  EXPECT_TRUE(std::any_of(d.linears.begin(), d.linears.end(), [](const LinearSpec& l) {
    return l.prefix == "model.layers.0.mlp.gate_up_proj" && l.output_sizes == std::vector<int64_t>{768, 768};
  }));
  // decoder_sparse_step 2 and no mlp_only_layers: layers 1 and 3 of 4 are sparse.
  config["num_hidden_layers"] = 4;
  config["decoder_sparse_step"] = 2;
  config["mlp_only_layers"] = json::array();
  d = describe_hf_model(config);
  ASSERT_EQ(d.moes.size(), 2u);
  EXPECT_EQ(d.moes[1].prefix, "model.layers.3.mlp.experts");
}

TEST(ModelLoaderMoE, DescribesMixtral) {
  const json config = {{"architectures", {"MixtralForCausalLM"}}, {"hidden_size", 64}, {"intermediate_size", 96},
                       {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                       {"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"torch_dtype", "bfloat16"}};
  const ModelDescription d = describe_hf_model(config);
  ASSERT_EQ(d.moes.size(), 2u);
  EXPECT_EQ(d.moes[0].prefix, "model.layers.0.block_sparse_moe.experts");
  EXPECT_EQ(d.moes[0].intermediate_size, 96);
  const Fp8Config fp8(true);
  const auto p = place_tensor(d, fp8, "model.layers.1.block_sparse_moe.experts.7.w2.weight_scale");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->target, TensorPlacement::Target::kMoE);
  EXPECT_EQ(p->module, "model.layers.1.block_sparse_moe.experts");
  EXPECT_EQ(p->parameter, "w2_weight_scale");
  EXPECT_EQ(shard_id_string(p->shard), "w2");
  EXPECT_EQ(p->expert_id, 7);
  EXPECT_EQ(place_tensor(d, fp8, "model.layers.1.block_sparse_moe.experts.7.w3.input_scale")->parameter,
            "w13_input_scale");
  EXPECT_EQ(place_tensor(d, fp8, "model.layers.0.block_sparse_moe.gate.weight")->target, TensorPlacement::Target::kPlain);
  EXPECT_FALSE(place_tensor(d, fp8, "model.layers.0.block_sparse_moe.experts.8.w1.weight").has_value());
  EXPECT_FALSE(place_tensor(d, fp8, "model.layers.0.block_sparse_moe.experts.1.gate_proj.weight").has_value());
  EXPECT_FALSE(place_tensor(d, fp8, "model.layers.0.block_sparse_moe.experts.1.w1.bias").has_value());
}

TEST(ModelLoaderMoE, DescribesDeepSeekV3) {
  const json config = {{"architectures", {"DeepseekV3ForCausalLM"}}, {"hidden_size", 128}, {"intermediate_size", 256},
                       {"moe_intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                       {"q_lora_rank", 96}, {"kv_lora_rank", 32}, {"qk_nope_head_dim", 16}, {"qk_rope_head_dim", 8},
                       {"v_head_dim", 16}, {"n_routed_experts", 16}, {"n_shared_experts", 1}, {"num_experts_per_tok", 4},
                       {"n_group", 4}, {"topk_group", 2}, {"first_k_dense_replace", 1}, {"moe_layer_freq", 1},
                       {"norm_topk_prob", true}, {"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"},
                       {"routed_scaling_factor", 2.5}, {"num_nextn_predict_layers", 1}, {"torch_dtype", "bfloat16"}};
  const ModelDescription d = describe_hf_model(config);
  ASSERT_EQ(d.moes.size(), 1u);  // layer 0 is dense (first_k_dense_replace)
  const MoESpec& m = d.moes[0];
  EXPECT_EQ(m.prefix, kMoE);
  EXPECT_TRUE(m.use_grouped_topk);
  EXPECT_EQ(m.num_expert_group, 4);
  EXPECT_EQ(m.topk_group, 2);
  EXPECT_EQ(m.scoring_func, "sigmoid");
  EXPECT_EQ(m.e_score_correction_bias, "model.layers.1.mlp.gate.e_score_correction_bias");
  EXPECT_EQ(m.routed_scaling_factor, 2.5);
  const Fp8Config fp8(true, "dynamic", {}, std::vector<int64_t>{128, 128});
  auto place = [&](const std::string& name) { return place_tensor(d, fp8, name); };
  EXPECT_EQ(place("model.layers.1.mlp.gate.e_score_correction_bias")->target, TensorPlacement::Target::kPlain);
  const auto shared = place("model.layers.1.mlp.shared_experts.up_proj.weight_scale_inv");
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(shared->target, TensorPlacement::Target::kLinear);
  EXPECT_EQ(shared->module, "model.layers.1.mlp.shared_experts.gate_up_proj");
  EXPECT_EQ(shard_id_string(shared->shard), "1");
  EXPECT_EQ(place("model.layers.1.mlp.experts.15.down_proj.weight")->expert_id, 15);
  // MLA: vLLM's projections as linear layers; q_proj is not stacked into a qkv_proj.
  for (const char* linear : {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"}) {
    const auto p = place(std::string("model.layers.0.self_attn.") + linear + ".weight");
    ASSERT_TRUE(p.has_value()) << linear;
    EXPECT_EQ(p->module, std::string("model.layers.0.self_attn.") + linear);
  }
  EXPECT_EQ(place("model.layers.0.self_attn.kv_a_layernorm.weight")->target, TensorPlacement::Target::kPlain);
  EXPECT_EQ(d.attentions[0].head_size, 32 + 8);
  // The multi-token-prediction layer (index num_hidden_layers) is skipped.
  EXPECT_EQ(place("model.layers.2.eh_proj.weight")->target, TensorPlacement::Target::kSkipped);
}

TEST(ModelLoaderMoE, PlacementAgreesWithExpertParamsMapping) {
  const ModelDescription d = describe_hf_model(Checkpoint::open(checkpoints().bf16).config());
  const Fp8Config fp8(true);
  for (const ExpertParamsMapping& m : FusedMoE::make_expert_params_mapping("gate_proj", "down_proj", "up_proj", 8)) {
    for (const char* param : {"weight", "weight_scale", "input_scale", "weight_scale_inv"}) {
      // vLLM's load_weights: name.replace(weight_name, param_prefix) on "...mlp.experts.{e}.{proj}.{param}".
      const std::string name = "model.layers.1.mlp." + m.weight_name + param;
      const auto p = place_tensor(d, fp8, name);
      ASSERT_TRUE(p.has_value()) << name;
      EXPECT_EQ(p->module + "." + p->parameter, "model.layers.1.mlp." + m.param_prefix + param);
      EXPECT_EQ(p->expert_id, m.expert_id);
      EXPECT_EQ(shard_id_string(p->shard), m.shard_id);
    }
  }
}

TEST(ModelLoaderMoE, LoadsPerTensorCheckpoint) {
  const LoadedModel model = load_model(checkpoints().per_tensor);
  FusedMoE& layer = model.moe(kMoE);
  EXPECT_EQ(layer.quant_method()->name(), "Fp8MoEMethod");
  EXPECT_EQ(layer.parameter("w13_weight_scale").data.shape(), (Shape{8}));
  EXPECT_EQ(layer.parameter("w13_weight").data.dtype(), DType::kE4M3FN);
  EXPECT_EQ(model.plain.at("model.layers.1.mlp.gate.weight").dtype(), DType::kBF16);  // the router stays BF16
  const double err = moe_error(model, checkpoints().bf16);
  EXPECT_TRUE(err <= 0.11) << err;
  expect_layers_close(model, checkpoints().bf16, 0.08);
}

TEST(ModelLoaderMoE, LoadsBlockCheckpoint) {
  const LoadedModel model = load_model(checkpoints().block);
  FusedMoE& layer = model.moe(kMoE);
  EXPECT_EQ(layer.parameter("w13_weight_scale_inv").data.shape(), (Shape{8, 4, 2}));
  const double err = moe_error(model, checkpoints().bf16);
  EXPECT_TRUE(err <= 0.085) << err;
}

TEST(ModelLoaderMoE, QuantizesBf16CheckpointOnline) {
  const LoadedModel model = load_model(checkpoints().bf16);
  FusedMoE& layer = model.moe(kMoE);
  EXPECT_EQ(layer.quant_method()->name(), "Fp8MoEMethod");
  EXPECT_EQ(layer.parameter("w2_weight").data.dtype(), DType::kE4M3FN);
  const double err = moe_error(model, checkpoints().bf16);
  EXPECT_TRUE(err <= 0.11) << err;
}

TEST(ModelLoaderMoE, LoadsOneExpertParallelRank) {
  LoadOptions options;
  options.ep_size = 2;
  options.ep_rank = 1;
  const LoadedModel model = load_model(checkpoints().block, options);
  FusedMoE& layer = model.moe(kMoE);
  EXPECT_EQ(layer.local_num_experts(), 4);
  const auto& loaded = layer.parameter("w13_weight").loaded_shards;
  EXPECT_TRUE(loaded.count("w1 of expert 4") && loaded.count("w3 of expert 7"));
  EXPECT_FALSE(loaded.count("w1 of expert 3"));
}

TEST(ModelLoaderMoE, MissingExpertTensorIsAnError) {
  const std::string dir = fp8kit::testing::scratch_dir() + "/fp8";
  std::filesystem::copy(checkpoints().per_tensor, dir, std::filesystem::copy_options::recursive);
  rewrite_checkpoint(dir, [](Tensors& tensors, json&) {
    std::erase_if(tensors, [](const auto& t) { return t.first == "model.layers.1.mlp.experts.2.up_proj.weight_scale"; });
  });
  fp8kit::testing::expect_error_containing(
      [&] { load_model(dir); }, ErrorCode::kInvalidArgument,
      "no checkpoint tensor filled model.layers.1.mlp.experts.w13_weight_scale (Fp8MoEMethod; shard w3 of expert 2)");
}

TEST(ModelLoaderMoE, InspectShowsExpertPlacements) {
  const fp8kit::testing::CommandResult r = fp8kit::testing::run_cli("inspect --loading " + checkpoints().per_tensor);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The row of the loading table (the tensor table above it starts with the same name).
  auto line_of = [&](const std::string& tensor, const std::string& target) {
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(tensor + " ", 0) == 0 && line.find(target) != std::string::npos) return line;
    }
    return std::string();
  };
  const std::string expert = line_of("model.layers.1.mlp.experts.3.up_proj.weight_scale", " moe ");
  for (const char* part : {" moe ", " model.layers.1.mlp.experts ", " w13_weight_scale ", " w3:e3 ", " Fp8MoEMethod"}) {
    EXPECT_NE(expert.find(part), std::string::npos) << part << "\n" << r.output;
  }
  EXPECT_FALSE(line_of("model.layers.1.mlp.gate.weight", " plain ").empty()) << r.output;
}

}  // namespace
}  // namespace fp8kit
