// load_model on checkpoints people publish besides what `fp8kit quantize` writes: static
// activation scales, a QKV projection fused on disk, shards with different scales (the
// requantized weight bit for bit against the spec's fp16 path), tensor-parallel slices against
// TP=1, and KV-cache scales under every naming scheme. Also runs the documented example program.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/quant.h"
#include "model_loader_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using namespace loader_test;
using testing::expect_error_containing;

const std::string kL0 = "model.layers.0.";

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.dtype() == cb.dtype() && ca.shape() == cb.shape() &&
         std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

float scalar(const Tensor& t) { return t.contiguous().item_f32(); }

TEST(ModelLoaderCheckpoints, StaticInputScalesTakeTheMaxOverShards) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kPerTensor);
  const std::map<std::string, float> input_scales = {
      {"self_attn.q_proj", 0.010f}, {"self_attn.k_proj", 0.012f}, {"self_attn.v_proj", 0.011f},
      {"self_attn.o_proj", 0.009f}, {"mlp.gate_proj", 0.008f},    {"mlp.up_proj", 0.0085f},
      {"mlp.down_proj", 0.02f}};
  rewrite_checkpoint(dir, [&](Tensors& tensors, nlohmann::ordered_json& config) {
    config["quantization_config"]["activation_scheme"] = "static";
    for (int layer = 0; layer < 2; ++layer) {
      for (const auto& [module, s] : input_scales) {
        tensors.push_back({"model.layers." + std::to_string(layer) + "." + module + ".input_scale",
                           Tensor::scalar_f32(s)});
      }
    }
  });
  const LoadedModel model = load_model(dir);
  LinearBase& qkv = model.linear(kL0 + "self_attn.qkv_proj");
  LinearBase& gate_up = model.linear(kL0 + "mlp.gate_up_proj");
  EXPECT_EQ(scalar(qkv.parameter("input_scale").data), 0.012f);
  EXPECT_EQ(scalar(gate_up.parameter("input_scale").data), 0.0085f);
  EXPECT_EQ(scalar(model.linear(kL0 + "mlp.down_proj").parameter("input_scale").data), 0.02f);
  // The forward is the static per-tensor quantization then the per-tensor GEMM, bit for bit.
  const Tensor x = random_bf16({7, 256}, 3);
  ops::ScaledFp8QuantOptions q;
  q.scale = qkv.parameter("input_scale").data;
  const ops::QuantResult xq = ops::scaled_fp8_quant(cpu_ctx(), x, q);
  const Tensor want =
      ops::scaled_mm(cpu_ctx(), xq.q, qkv.parameter("weight").data, xq.scale, qkv.parameter("weight_scale").data);
  EXPECT_TRUE(same_bytes(qkv.forward(cpu_ctx(), x), want));
  expect_layers_close(model, root + "/bf16", 0.06);
}

TEST(ModelLoaderCheckpoints, StaticSchemeWithoutInputScalesIsAnError) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kPerTensor);
  rewrite_checkpoint(dir, [&](Tensors&, nlohmann::ordered_json& config) {
    config["quantization_config"]["activation_scheme"] = "static";
  });
  expect_error_containing([&] { load_model(dir); }, ErrorCode::kInvalidArgument, "input_scale");
}

// The requantized QKV weight, built here from the public ops in the spec's order: each shard
// dequantized to fp16 with its own scale, then quantized with the largest one.
Tensor requantized_qkv(const Checkpoint& ckpt, float* max_scale) {
  std::vector<Tensor> q, s;
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
    q.push_back(ckpt.tensor(kL0 + "self_attn." + p + ".weight"));
    s.push_back(ckpt.tensor(kL0 + "self_attn." + p + ".weight_scale"));
  }
  *max_scale = std::max({scalar(s[0]), scalar(s[1]), scalar(s[2])});
  Tensor out = Tensor::empty({q[0].size(0) + q[1].size(0) + q[2].size(0), q[0].size(1)}, DType::kE4M3FN);
  int64_t row = 0;
  for (size_t i = 0; i < 3; ++i) {
    const Tensor dq = ops::per_tensor_dequantize(cpu_ctx(), q[i], s[i]);
    ops::ScaledFp8QuantOptions o;
    o.scale = Tensor::scalar_f32(*max_scale);
    out.narrow(0, row, q[i].size(0)).copy_(ops::scaled_fp8_quant(cpu_ctx(), dq, o).q);
    row += q[i].size(0);
  }
  return out;
}

TEST(ModelLoaderCheckpoints, ShardsWithDifferentScalesAreRequantizedBitForBit) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kPerTensor);
  // Scale the k and v shards so that the three scales differ (the synthetic shards share one
  // absmax): codes quantized with one scale requantized to a larger one lose low bits.
  rewrite_checkpoint(dir, [&](Tensors& tensors, nlohmann::ordered_json&) {
    Tensor& k = find_tensor(tensors, kL0 + "self_attn.k_proj.weight_scale");
    Tensor& v = find_tensor(tensors, kL0 + "self_attn.v_proj.weight_scale");
    k = Tensor::scalar_f32(scalar(k) * 3.0f);
    v = Tensor::scalar_f32(scalar(v) * 0.7f);
  });
  const Checkpoint ckpt = Checkpoint::open(dir);
  float max_scale = 0;
  const Tensor want = requantized_qkv(ckpt, &max_scale);
  const std::set<float> distinct = {scalar(ckpt.tensor(kL0 + "self_attn.q_proj.weight_scale")),
                                    scalar(ckpt.tensor(kL0 + "self_attn.k_proj.weight_scale")),
                                    scalar(ckpt.tensor(kL0 + "self_attn.v_proj.weight_scale"))};
  ASSERT_EQ(distinct.size(), 3u);
  // The q and v codes change: the test compares real requantization, not a copy.
  EXPECT_FALSE(same_bytes(want.narrow(0, 0, 256), ckpt.tensor(kL0 + "self_attn.q_proj.weight")));
  const LoadedModel model = load_model(dir);
  const LinearBase& qkv = model.linear(kL0 + "self_attn.qkv_proj");
  EXPECT_EQ(scalar(qkv.parameter("weight_scale").data), max_scale);
  EXPECT_TRUE(same_bytes(qkv.parameter("weight").data.t(), want));
}

TEST(ModelLoaderCheckpoints, QkvFusedOnDiskLoadsLikeItsShards) {
  for (const bool fp8 : {false, true}) {
    SCOPED_TRACE(fp8 ? "fp8 per-tensor" : "bf16 online");
    const std::string root = fp8kit::testing::scratch_dir();
    const std::string split = fp8 ? make_fp8(root, QuantScheme::kPerTensor) : make_bf16(root);
    const std::string fused = root + "/fused";
    std::filesystem::copy(split, fused);
    float max_scale = 0;
    const Tensor requantized = fp8 ? requantized_qkv(Checkpoint::open(split), &max_scale) : Tensor();
    rewrite_checkpoint(fused, [&](Tensors& tensors, nlohmann::ordered_json&) {
      Tensors kept;
      std::vector<Tensor> parts;
      for (auto& [name, t] : tensors) {
        const bool shard = name.rfind(kL0 + "self_attn.", 0) == 0 &&
                           (name.find("q_proj.") != std::string::npos || name.find("k_proj.") != std::string::npos ||
                            name.find("v_proj.") != std::string::npos);
        if (!shard) kept.push_back({name, t});
      }
      // An exporter that fuses FP8 shards requantizes them to one scale first.
      Tensor w = requantized;
      if (!fp8) {
        const Checkpoint c = Checkpoint::open(split);
        const Tensor q = c.tensor(kL0 + "self_attn.q_proj.weight"), k = c.tensor(kL0 + "self_attn.k_proj.weight"),
                     v = c.tensor(kL0 + "self_attn.v_proj.weight");
        w = Tensor::empty({q.size(0) + k.size(0) + v.size(0), q.size(1)}, DType::kBF16);
        w.narrow(0, 0, q.size(0)).copy_(q);
        w.narrow(0, q.size(0), k.size(0)).copy_(k);
        w.narrow(0, q.size(0) + k.size(0), v.size(0)).copy_(v);
      }
      kept.push_back({kL0 + "self_attn.qkv_proj.weight", w});
      if (fp8) kept.push_back({kL0 + "self_attn.qkv_proj.weight_scale", Tensor::scalar_f32(max_scale)});
      tensors = kept;
    });
    const LoadedModel a = load_model(split), b = load_model(fused);
    LinearBase& qa = a.linear(kL0 + "self_attn.qkv_proj");
    LinearBase& qb = b.linear(kL0 + "self_attn.qkv_proj");
    EXPECT_TRUE(same_bytes(qa.parameter("weight").data, qb.parameter("weight").data));
    EXPECT_EQ(scalar(qa.parameter("weight_scale").data), scalar(qb.parameter("weight_scale").data));
    const Tensor x = random_bf16({4, 256}, 5);
    EXPECT_TRUE(same_bytes(qa.forward(cpu_ctx(), x), qb.forward(cpu_ctx(), x)));
  }
}

// Column j of a TP=1 QKV output that column c of rank r's output holds (heads of 64, 4 query
// heads, 2 KV heads replicated when tp > 2).
int64_t qkv_tp1_column(int64_t r, int64_t tp, int64_t c) {
  const int64_t head = 64, nq = 4, nkv = 2;
  const int64_t q_cols = nq / tp * head, kv_heads = std::max<int64_t>(1, nkv / tp), kv_cols = kv_heads * head;
  const int64_t kv_start = (r * nkv) / tp * head;
  if (c < q_cols) return r * q_cols + c;
  if (c < q_cols + kv_cols) return nq * head + kv_start + (c - q_cols);
  return (nq + nkv) * head + kv_start + (c - q_cols - kv_cols);
}

// Column j of a TP=1 gate_up output that column c of rank r's output holds.
int64_t gate_up_tp1_column(int64_t r, int64_t tp, int64_t c) {
  const int64_t inter = 768, per = inter / tp;
  return c < per ? r * per + c : inter + r * per + (c - per);
}

TEST(ModelLoaderCheckpoints, TensorParallelSlicesMatchTp1) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kPerTensor);
  const LoadedModel tp1 = load_model(dir);
  const Tensor x = random_bf16({6, 256}, 11), h = random_bf16({6, 768}, 12);
  const Tensor qkv1 = tp1.linear(kL0 + "self_attn.qkv_proj").forward(cpu_ctx(), x);
  const Tensor gu1 = tp1.linear(kL0 + "mlp.gate_up_proj").forward(cpu_ctx(), x);
  const Tensor down1 = tp1.linear(kL0 + "mlp.down_proj").forward(cpu_ctx(), h);
  const Checkpoint bf16 = Checkpoint::open(root + "/bf16");
  const std::vector<double> down_ref = reference(h, bf16, {kL0 + "mlp.down_proj.weight"});
  for (const int tp : {2, 4}) {
    std::vector<double> down_sum(size_t(down1.numel()), 0.0);
    for (int r = 0; r < tp; ++r) {
      SCOPED_TRACE("tp " + std::to_string(tp) + " rank " + std::to_string(r));
      LoadOptions o;
      o.parallel = {r, tp};
      const LoadedModel m = load_model(dir, o);
      // Column parallel: every rank's columns are the TP=1 columns, bit for bit (same activation
      // quantization, same requantized weight rows).
      const Tensor qkv = m.linear(kL0 + "self_attn.qkv_proj").forward(cpu_ctx(), x);
      const Tensor gu = m.linear(kL0 + "mlp.gate_up_proj").forward(cpu_ctx(), x);
      int64_t bad = 0;
      for (int64_t i = 0; i < 6; ++i) {
        for (int64_t c = 0; c < qkv.size(1); ++c) {
          bad += to_float(qkv, i * qkv.size(1) + c) == to_float(qkv1, i * 512 + qkv_tp1_column(r, tp, c)) ? 0 : 1;
        }
        for (int64_t c = 0; c < gu.size(1); ++c) {
          bad += to_float(gu, i * gu.size(1) + c) == to_float(gu1, i * 1536 + gate_up_tp1_column(r, tp, c)) ? 0 : 1;
        }
      }
      EXPECT_EQ(bad, 0);
      // Row parallel: rank r takes columns [r * 768 / tp, ...) of h; the outputs sum to TP=1's.
      const int64_t per = 768 / tp;
      const Tensor part = m.linear(kL0 + "mlp.down_proj").forward(cpu_ctx(), h.narrow(1, r * per, per).contiguous());
      for (int64_t i = 0; i < part.numel(); ++i) down_sum[size_t(i)] += to_float(part, i);
    }
    // Each rank quantizes its own slice of h, so the sum differs from TP=1 by FP8 rounding only.
    Tensor sum = Tensor::empty(down1.shape(), DType::kF32);
    for (int64_t i = 0; i < sum.numel(); ++i) sum.data<float>()[i] = float(down_sum[size_t(i)]);
    EXPECT_LE(rel_error(sum, down_ref), 0.06) << "tp " << tp;
    std::vector<double> tp1_values(size_t(down1.numel()));
    for (int64_t i = 0; i < down1.numel(); ++i) tp1_values[size_t(i)] = to_float(down1, i);
    EXPECT_LE(rel_error(sum, tp1_values), 0.06) << "tp " << tp;
  }
}

TEST(ModelLoaderCheckpoints, BlockScalesRefuseQkvSlicesSmallerThanABlock) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kBlock);
  LoadOptions o;
  o.parallel = {0, 2};  // k and v: one 64-row head per rank, half a 128-row block
  expect_error_containing([&] { load_model(dir, o); }, ErrorCode::kInvalidArgument,
                          "is not divisible by weight quantization block_n = 128.");
}

TEST(ModelLoaderCheckpoints, KvScalesUnderEveryNamingScheme) {
  struct Scheme {
    const char* what;
    std::vector<std::string> names;  // k then v (one name: the deprecated kv_scale)
  };
  const std::vector<Scheme> schemes = {
      {"plain (Qwen2, AutoFP8)", {"self_attn.k_scale", "self_attn.v_scale"}},
      {"deprecated kv_scale", {"self_attn.kv_scale"}},
      {"ModelOpt on the projections", {"self_attn.k_proj.k_scale", "self_attn.v_proj.v_scale"}},
      {"fused qkv_proj", {"self_attn.qkv_proj.k_scale", "self_attn.qkv_proj.v_scale"}},
      {"compressed-tensors output scales", {"self_attn.k_proj.output_scale", "self_attn.v_proj.output_scale"}},
      {"engine names", {"self_attn.attn.k_scale", "self_attn.attn.v_scale"}},
  };
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string base = make_fp8(root, QuantScheme::kPerTensor);
  for (const Scheme& s : schemes) {
    SCOPED_TRACE(s.what);
    const std::string dir = root + "/kv-" + std::to_string(&s - schemes.data());
    std::filesystem::copy(base, dir);
    rewrite_checkpoint(dir, [&](Tensors& tensors, nlohmann::ordered_json&) {
      for (int layer = 0; layer < 2; ++layer) {
        for (size_t i = 0; i < s.names.size(); ++i) {
          const float v = i == 0 ? 0.5f : 0.25f;
          tensors.push_back({"model.layers." + std::to_string(layer) + "." + s.names[i],
                             Tensor::scalar_f32(v)});
        }
      }
    });
    LoadOptions o;
    o.kv_cache_dtype = "fp8";
    const LoadedModel m = load_model(dir, o);
    for (const char* layer : {"model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"}) {
      const Attention& a = m.attention(layer);
      EXPECT_EQ(a.k_scale_float, 0.5f) << layer;
      EXPECT_EQ(a.v_scale_float, s.names.size() == 1 ? 0.5f : 0.25f) << layer;
      EXPECT_EQ(scalar(a.k_scale), 0.5f) << layer;
    }
    // With the KV cache in the model dtype the scales are read but not used.
    const LoadedModel plain = load_model(dir);
    EXPECT_EQ(plain.attention("model.layers.0.self_attn.attn").k_scale_float, 1.0f);
  }
}

TEST(ModelLoaderCheckpoints, InspectShowsHowEachTensorLoads) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kPerTensor);
  const fp8kit::testing::CommandResult r = fp8kit::testing::run_cli("inspect --loading " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* row : {"model.layers.0.self_attn.k_proj.weight_scale    linear     model.layers.0.self_attn.qkv_proj   "
                          "            weight_scale      k      Fp8LinearMethod",
                          "model.layers.1.mlp.up_proj.weight               linear     model.layers.1.mlp.gate_up_proj   "
                          "              weight            1      Fp8LinearMethod",
                          "model.embed_tokens.weight                       plain"}) {
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
  }
  // A tensor no layer takes is a problem (exit code 3), named in the table.
  rewrite_checkpoint(dir, [&](Tensors& tensors, nlohmann::ordered_json&) {
    tensors.push_back({"model.layers.0.mlp.mystery.weight", Tensor::zeros({4, 4}, DType::kBF16)});
  });
  const fp8kit::testing::CommandResult bad = fp8kit::testing::run_cli("inspect --loading " + dir);
  EXPECT_EQ(bad.exit_code, 3) << bad.output;
  EXPECT_NE(bad.output.find("the model loader has no place for tensor model.layers.0.mlp.mystery.weight"), std::string::npos)
      << bad.output;
}

#ifdef FP8KIT_EXAMPLE_LOAD_AND_RUN
TEST(ModelLoaderCheckpoints, DocumentedExampleRuns) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kBlock);
  const std::string out = root + "/example.txt";
  const std::string cmd = std::string(FP8KIT_EXAMPLE_LOAD_AND_RUN) + " " + dir + " > " + out + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("model.layers.0.mlp.gate_up_proj: Fp8LinearMethod"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("y[4, 1536]"), std::string::npos) << text.str();
}
#endif

}  // namespace
}  // namespace fp8kit
