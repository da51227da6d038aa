// The checkpoint loader end to end on Mixtral and DeepSeek-V3 (include/fp8kit/model/model_loader.h):
// synthetic checkpoints (src/convert/synthetic_checkpoint.h) in BF16, loaded with online FP8, and
// as block FP8 written by quantize_checkpoint; every MoE layer's forward against the BF16
// experts in double with routing recomputed from the architecture's rules; DeepSeek's shared
// experts and MLA projections against BF16; what quantize keeps in BF16; `fp8kit inspect
// --loading`; an expert-parallel DeepSeek load.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "fp8kit/ops/moe_routing.h"
#include "model_loader_test_util.h"
#include "test_context.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using namespace loader_test;
using convert::SyntheticArchitecture;
using json = nlohmann::ordered_json;

struct ArchCheckpoints {
  std::string bf16, block;
};

// The BF16 checkpoint of `spec` and its block FP8 version, written once per architecture.
const ArchCheckpoints& checkpoints(const convert::SyntheticModelSpec& spec) {
  static std::map<SyntheticArchitecture, ArchCheckpoints> written;
  const auto it = written.find(spec.architecture);
  if (it != written.end()) return it->second;
  const std::string root = fp8kit::testing::process_dir(
      std::string("ModelLoaderMoEArchs.") +
      (spec.architecture == SyntheticArchitecture::kMixtral ? "mixtral" : "deepseek_v3"));
  ArchCheckpoints c{root + "/bf16", root + "/fp8-block"};
  convert::write_synthetic_checkpoint(c.bf16, spec);
  QuantizeOptions o;
  o.scheme = QuantScheme::kBlock;
  quantize_checkpoint(c.bf16, c.block, o);
  return written.emplace(spec.architecture, c).first->second;
}

const ArchCheckpoints& mixtral() { return checkpoints(mixtral_spec()); }
const ArchCheckpoints& deepseek() { return checkpoints(deepseek_v3_spec()); }

// The sparse layers and how their routing works, written from the architectures' definitions
// (not from describe_hf_model, which is under test).
struct SparseLayer {
  std::string experts;  // the FusedMoE prefix
  std::string router;   // [E, H] weight
  std::string bias;     // DeepSeek's e_score_correction_bias, or empty
  std::string gate, up, down;
};

std::vector<SparseLayer> sparse_layers(SyntheticArchitecture arch) {
  std::vector<SparseLayer> out;
  if (arch == SyntheticArchitecture::kMixtral) {
    for (const char* l : {"0", "1"}) {
      const std::string b = std::string("model.layers.") + l + ".block_sparse_moe";
      out.push_back({b + ".experts", b + ".gate.weight", "", "w1", "w3", "w2"});
    }
  } else {
    for (const char* l : {"1", "2"}) {  // layer 0 is below first_k_dense_replace
      const std::string b = std::string("model.layers.") + l + ".mlp";
      out.push_back({b + ".experts", b + ".gate.weight", b + ".gate.e_score_correction_bias", "gate_proj", "up_proj",
                     "down_proj"});
    }
  }
  return out;
}

// Mixtral: softmax top-2, renormalized. DeepSeek-V3: sigmoid scores, the correction bias added
// for the choice only, 4 groups scored by their two best, the best 2 groups eligible, top 4,
// renormalized (norm_topk_prob). routed_scaling_factor (2.5) is not applied: as in vLLM, the
// DeepSeek model multiplies the MoE layer's output by it, outside FusedMoE.
ops::SelectExpertsOptions routing(SyntheticArchitecture arch, const Checkpoint& bf16, const SparseLayer& s) {
  ops::SelectExpertsOptions o;
  o.renormalize = true;
  if (arch == SyntheticArchitecture::kMixtral) {
    o.top_k = 2;
    return o;
  }
  o.top_k = 4;
  o.use_grouped_topk = true;
  o.num_expert_group = 4;
  o.topk_group = 2;
  o.scoring_func = "sigmoid";
  o.e_score_correction_bias = bf16.tensor(s.bias).clone();
  return o;
}

// Router logits [M, E] f32 = x [M, H] times the BF16 router, in double.
Tensor router_logits(const Tensor& x, const Checkpoint& bf16, const std::string& router) {
  const std::vector<double> l = reference(x, bf16, {router});
  Tensor out = Tensor::empty({x.size(0), int64_t(l.size()) / x.size(0)}, DType::kF32);
  for (size_t i = 0; i < l.size(); ++i) out.data<float>()[i] = float(l[i]);
  return out;
}

// Relative RMS error of the sum of the ranks' MoE outputs (one rank without EP) against the BF16
// experts in double, for 6 random tokens routed by `arch`'s rules.
double moe_error(SyntheticArchitecture arch, const std::vector<const LoadedModel*>& ranks, const std::string& bf16_dir,
                 const SparseLayer& s) {
  const Checkpoint bf16 = Checkpoint::open(bf16_dir);
  const int64_t hidden = ranks[0]->moe(s.experts).hidden_size();
  const Tensor x = random_bf16({6, hidden}, 11);
  const Tensor logits = router_logits(x, bf16, s.router);
  const ops::TopkResult topk = ops::select_experts(cpu_ctx(), x, logits, routing(arch, bf16, s));
  const std::vector<double> ref = moe_reference(x, topk.weights, topk.ids, [&](int64_t e, const char* w) {
    const std::string& proj = std::string(w) == "w1" ? s.gate : std::string(w) == "w3" ? s.up : s.down;
    return bf16.tensor(s.experts + "." + std::to_string(e) + "." + proj + ".weight");
  });
  std::vector<double> y(ref.size(), 0.0);
  for (const LoadedModel* model : ranks) {
    const Tensor out = model->moe(s.experts).forward(cpu_ctx(), x.clone(), logits);  // the rank's partial sum
    for (int64_t i = 0; i < out.numel(); ++i) y[size_t(i)] += to_float(out, i);
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

double linear_error(const LoadedModel& model, const Checkpoint& bf16, const std::string& layer,
                    const std::vector<std::string>& parts) {
  LinearBase& linear = model.linear(layer);
  const Tensor x = random_bf16({5, linear.input_size()}, 7);
  return rel_error(linear.forward(cpu_ctx(), x), reference(x, bf16, parts));
}

// Relative RMS errors measured against BF16 (block FP8 and online FP8 alike; the dynamic FP8
// activations dominate at these sizes): MoE layers 0.035-0.065, linear layers 0.032-0.041. The
// bounds leave ~35% headroom.
constexpr double kMoETolerance = 0.09;
constexpr double kLinearTolerance = 0.055;

void expect_moe_layers_close(SyntheticArchitecture arch, const LoadedModel& model, const std::string& bf16_dir,
                             double tolerance) {
  for (const SparseLayer& s : sparse_layers(arch)) {
    const double err = moe_error(arch, {&model}, bf16_dir, s);
    EXPECT_TRUE(err <= tolerance) << s.experts << " error " << err;
  }
}

// DeepSeek's MLA projections of every layer, the dense MLP of layer 0 and the shared experts of
// the sparse layers, against the BF16 weights.
void expect_deepseek_linears_close(const LoadedModel& model, double tolerance) {
  const Checkpoint bf16 = Checkpoint::open(deepseek().bf16);
  for (int l = 0; l < 3; ++l) {
    const std::string a = "model.layers." + std::to_string(l) + ".self_attn.";
    for (const char* proj : {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"}) {
      const double err = linear_error(model, bf16, a + proj, {a + proj + ".weight"});
      EXPECT_TRUE(err <= tolerance) << a << proj << " error " << err;
    }
    // The MLA cache: the latent kv and the rope key, one KV head (vLLM's MLA attention).
    const Attention& attn = model.attention(a + "attn");
    EXPECT_EQ(attn.head_size(), 128 + 16) << a;
    EXPECT_EQ(attn.num_kv_heads(), 1) << a;
    const std::string mlp = "model.layers." + std::to_string(l) + (l == 0 ? ".mlp." : ".mlp.shared_experts.");
    const double gate_up =
        linear_error(model, bf16, mlp + "gate_up_proj", {mlp + "gate_proj.weight", mlp + "up_proj.weight"});
    const double down = linear_error(model, bf16, mlp + "down_proj", {mlp + "down_proj.weight"});
    EXPECT_TRUE(gate_up <= tolerance) << mlp << "gate_up_proj error " << gate_up;
    EXPECT_TRUE(down <= tolerance) << mlp << "down_proj error " << down;
  }
}

TEST(ModelLoaderMoEArchs, MixtralLoadsBlockCheckpoint) {
  const LoadedModel model = load_model(mixtral().block);
  ASSERT_EQ(model.moes.size(), 2u);  // every Mixtral layer is sparse
  FusedMoE& layer = model.moe("model.layers.1.block_sparse_moe.experts");
  EXPECT_EQ(layer.quant_method()->name(), "Fp8MoEMethod");
  EXPECT_EQ(layer.parameter("w13_weight_scale_inv").data.shape(), (Shape{8, 2, 2}));
  EXPECT_EQ(model.plain.at("model.layers.1.block_sparse_moe.gate.weight").dtype(), DType::kBF16);
  expect_moe_layers_close(SyntheticArchitecture::kMixtral, model, mixtral().bf16, kMoETolerance);
  // Llama attention: q/k/v stacked into qkv_proj.
  const Checkpoint bf16 = Checkpoint::open(mixtral().bf16);
  const std::string a = "model.layers.1.self_attn.";
  const double qkv =
      linear_error(model, bf16, a + "qkv_proj", {a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"});
  const double o = linear_error(model, bf16, a + "o_proj", {a + "o_proj.weight"});
  EXPECT_TRUE(qkv <= kLinearTolerance) << "qkv_proj error " << qkv;
  EXPECT_TRUE(o <= kLinearTolerance) << "o_proj error " << o;
}

TEST(ModelLoaderMoEArchs, MixtralQuantizesBf16CheckpointOnline) {
  const LoadedModel model = load_model(mixtral().bf16);
  EXPECT_EQ(model.moe("model.layers.0.block_sparse_moe.experts").parameter("w2_weight").data.dtype(), DType::kE4M3FN);
  expect_moe_layers_close(SyntheticArchitecture::kMixtral, model, mixtral().bf16, kMoETolerance);
}

TEST(ModelLoaderMoEArchs, DeepSeekV3LoadsBlockCheckpoint) {
  const LoadedModel model = load_model(deepseek().block);
  ASSERT_EQ(model.moes.size(), 2u);  // layer 0 is dense
  FusedMoE& layer = model.moe("model.layers.1.mlp.experts");
  EXPECT_EQ(layer.parameter("w13_weight_scale_inv").data.shape(), (Shape{16, 2, 2}));
  // The correction bias reaches the layer's routing as the checkpoint's F32 tensor.
  ASSERT_TRUE(layer.e_score_correction_bias.defined());
  EXPECT_EQ(layer.e_score_correction_bias.dtype(), DType::kF32);
  EXPECT_EQ(layer.apply_options().scoring_func, "sigmoid");
  // kv_a_proj_with_mqa has 128 + 16 rows: the last scale block is partial, as DeepSeek's 576 rows.
  EXPECT_EQ(model.linear("model.layers.0.self_attn.kv_a_proj_with_mqa").parameter("weight_scale_inv").data.shape(),
            (Shape{2, 2}));
  expect_moe_layers_close(SyntheticArchitecture::kDeepseekV3, model, deepseek().bf16, kMoETolerance);
  expect_deepseek_linears_close(model, kLinearTolerance);
}

TEST(ModelLoaderMoEArchs, DeepSeekV3QuantizesBf16CheckpointOnline) {
  const LoadedModel model = load_model(deepseek().bf16);
  EXPECT_EQ(model.moe("model.layers.2.mlp.experts").parameter("w13_weight").data.dtype(), DType::kE4M3FN);
  expect_moe_layers_close(SyntheticArchitecture::kDeepseekV3, model, deepseek().bf16, kMoETolerance);
  expect_deepseek_linears_close(model, kLinearTolerance);
}

// The correction bias must change which experts the test tokens pick, or a loader that dropped
// it would still pass the forward checks above.
TEST(ModelLoaderMoEArchs, DeepSeekV3CorrectionBiasChangesRouting) {
  const Checkpoint bf16 = Checkpoint::open(deepseek().bf16);
  const SparseLayer s = sparse_layers(SyntheticArchitecture::kDeepseekV3)[0];
  const Tensor x = random_bf16({6, 256}, 11);
  const Tensor logits = router_logits(x, bf16, s.router);
  ops::SelectExpertsOptions o = routing(SyntheticArchitecture::kDeepseekV3, bf16, s);
  const Tensor with_bias = ops::select_experts(cpu_ctx(), x, logits, o).ids;
  o.e_score_correction_bias = Tensor();
  const Tensor without_bias = ops::select_experts(cpu_ctx(), x, logits, o).ids;
  bool differs = false;
  for (int64_t i = 0; i < with_bias.numel(); ++i) {
    differs |= with_bias.data<int32_t>()[i] != without_bias.data<int32_t>()[i];
  }
  EXPECT_TRUE(differs);
}

// quantize_checkpoint keeps routers, the correction bias and every norm (q_a_layernorm,
// kv_a_layernorm included) in their input dtype and lists the routers as ignored layers.
TEST(ModelLoaderMoEArchs, QuantizeKeepsRoutersBiasAndNormsUnquantized) {
  for (const ArchCheckpoints* c : {&mixtral(), &deepseek()}) {
    const Checkpoint fp8 = Checkpoint::open(c->block);
    int64_t routers = 0;
    for (const std::string& name : fp8.tensor_names()) {
      const DType dtype = fp8.info(name).dtype;
      if (name.find("e_score_correction_bias") != std::string::npos) {
        EXPECT_EQ(dtype, DType::kF32) << name;
      } else if (name.ends_with(".gate.weight") || name.find("norm.weight") != std::string::npos ||
                 name.find("embed_tokens") != std::string::npos || name == "lm_head.weight") {
        EXPECT_EQ(dtype, DType::kBF16) << name;
        routers += name.ends_with(".gate.weight");
      } else if (name.ends_with(".weight")) {
        EXPECT_EQ(dtype, DType::kE4M3FN) << name;
      }
    }
    EXPECT_EQ(routers, 2) << c->block;
    const json& ignored = fp8.config()["quantization_config"]["ignored_layers"];
    int64_t ignored_routers = 0;
    for (const json& m : ignored) ignored_routers += m.get<std::string>().ends_with(".gate");
    EXPECT_EQ(ignored_routers, 2) << ignored.dump();
  }
}

TEST(ModelLoaderMoEArchs, InspectLoadingReportsNoProblem) {
  for (const std::string& dir : {mixtral().bf16, mixtral().block, deepseek().bf16, deepseek().block}) {
    const fp8kit::testing::CommandResult r = fp8kit::testing::run_cli("inspect --loading " + dir);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("problems (0): none"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("unplaced"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("\nloading: "), std::string::npos) << r.output;  // describe_hf_model failed
  }
}

// EP = 2: rank r holds routed experts [8r, 8r + 8) of each sparse layer; the shared experts and
// the router stay whole on every rank, and the two ranks' partial sums make the full output.
TEST(ModelLoaderMoEArchs, DeepSeekV3ExpertParallelRanks) {
  std::vector<LoadedModel> ranks;
  for (int64_t r = 0; r < 2; ++r) {
    LoadOptions options;
    options.ep_size = 2;
    options.ep_rank = r;
    ranks.push_back(load_model(deepseek().block, options));
    for (const SparseLayer& s : sparse_layers(SyntheticArchitecture::kDeepseekV3)) {
      const FusedMoE& layer = ranks.back().moe(s.experts);
      EXPECT_EQ(layer.local_num_experts(), 8);
      const auto& loaded = layer.parameter("w13_weight").loaded_shards;
      for (int64_t e = 0; e < 16; ++e) {
        const bool local = e / 8 == r;
        for (const char* shard : {"w1", "w3"}) {
          EXPECT_EQ(loaded.count(FusedMoE::loaded_shard_key(shard, e)) == 1, local)
              << s.experts << " rank " << r << " " << shard << " of expert " << e;
        }
      }
    }
    EXPECT_EQ(ranks.back().linears.count("model.layers.1.mlp.shared_experts.gate_up_proj"), 1u);
  }
  for (const SparseLayer& s : sparse_layers(SyntheticArchitecture::kDeepseekV3)) {
    const double err = moe_error(SyntheticArchitecture::kDeepseekV3, {&ranks[0], &ranks[1]}, deepseek().bf16, s);
    EXPECT_TRUE(err <= kMoETolerance) << s.experts << " error " << err;
  }
}

}  // namespace
}  // namespace fp8kit
