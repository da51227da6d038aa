// The layers and the checkpoint loader on the GPU: checkpoints written by `fp8kit quantize`
// (per-tensor, block) and a BF16 one quantized online, loaded onto CUDA and onto the CPU. The
// post-processed weights and scales are bit-identical (the quantization kernels are), each
// layer's output agrees with the CPU layer within the GEMM tolerance and with the BF16 weights
// within FP8's error; the weight-only path forced with FP8KIT_FORCE_WEIGHT_ONLY=1; dynamic KV
// scales.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "fp8kit/layers/fused_moe.h"
#include "gpu_test_util.h"
#include "model_loader_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using namespace loader_test;

const char* const kLayers[] = {"model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj",
                               "model.layers.1.mlp.gate_up_proj", "model.layers.1.mlp.down_proj"};

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.to(Device::cpu()).contiguous(), cb = b.to(Device::cpu()).contiguous();
  return ca.dtype() == cb.dtype() && ca.shape() == cb.shape() && std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<double> v(size_t(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i) v[size_t(i)] = to_float(c, i);
  return v;
}

// GPU and CPU loads of `dir`: same processed parameters, outputs within `tolerance` of each other
// (different GEMM accumulation orders, one bf16 rounding each) and every layer within FP8's error
// of the BF16 weights.
void expect_gpu_matches_cpu(const std::string& dir, const std::string& bf16_dir, double tolerance,
                            const Overrides& overrides = {}) {
  LoadOptions on_gpu;
  on_gpu.device = Device::cuda(0);
  on_gpu.overrides = overrides;
  LoadOptions on_cpu;
  on_cpu.overrides = overrides;
  const LoadedModel gpu = load_model(dir, on_gpu);
  const LoadedModel cpu = load_model(dir, on_cpu);
  for (const char* name : kLayers) {
    SCOPED_TRACE(name);
    LinearBase& g = gpu.linear(name);
    LinearBase& c = cpu.linear(name);
    ASSERT_EQ(g.quant_method()->name(), c.quant_method()->name());
    for (const auto& [pname, param] : c.parameters()) {
      ASSERT_NE(g.find_parameter(pname), nullptr) << pname;
      EXPECT_TRUE(g.parameter(pname).data.device().is_cuda()) << pname;
      EXPECT_TRUE(same_bytes(g.parameter(pname).data, param.data)) << pname;
    }
    for (const int64_t m : {1, 5, 64, 200}) {
      const Tensor x = random_bf16({m, c.input_size()}, uint32_t(m));
      const Tensor yc = c.forward(gpu_test::ctx_of(x), x);
      const Tensor yg = g.forward(gpu_test::ctx_of(x.to(Device::cuda(0))), x.to(Device::cuda(0)));
      EXPECT_TRUE(yg.device().is_cuda());
      EXPECT_LE(rel_error(yg.to(Device::cpu()), values(yc)), tolerance) << "m " << m;
    }
  }
  expect_layers_close(gpu, bf16_dir, 0.06);
}

// bf16 outputs: each side rounds once (2^-9 relative), the accumulation orders differ in f32.
constexpr double kGpuVsCpu = 4e-3;

TEST(LayersCuda, PerTensorCheckpoint) {
  const std::string root = fp8kit::testing::scratch_dir();
  expect_gpu_matches_cpu(make_fp8(root, QuantScheme::kPerTensor), root + "/bf16", kGpuVsCpu);
}

TEST(LayersCuda, BlockCheckpoint) {
  const std::string root = fp8kit::testing::scratch_dir();
  expect_gpu_matches_cpu(make_fp8(root, QuantScheme::kBlock), root + "/bf16", kGpuVsCpu);
}

TEST(LayersCuda, Bf16CheckpointQuantizedOnline) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_bf16(root);
  expect_gpu_matches_cpu(dir, dir, kGpuVsCpu);
}

TEST(LayersCuda, ForcedWeightOnly) {
  Overrides force;
  force.force_weight_only = true;
  const std::string root = fp8kit::testing::scratch_dir();
  for (const QuantScheme scheme : {QuantScheme::kPerTensor, QuantScheme::kBlock}) {
    const std::string dir = make_fp8(root + (scheme == QuantScheme::kBlock ? "/b" : "/t"), scheme);
    LoadOptions on_gpu;
    on_gpu.device = Device::cuda(0);
    on_gpu.overrides = force;
    const LoadedModel gpu = load_model(dir, on_gpu);
    EXPECT_EQ(gpu.linear(kLayers[0]).find_parameter("input_scale"), nullptr);
    expect_gpu_matches_cpu(dir, root + (scheme == QuantScheme::kBlock ? "/b" : "/t") + "/bf16", kGpuVsCpu, force);
  }
}

// The MoE layer of a Qwen3-MoE checkpoint on the GPU against the same layer on the CPU: the same
// routing and post-processed experts (online quantization included, byte for byte); the grouped
// FP8 GEMMs accumulate in another order.
TEST(LayersCuda, MoeLayerMatchesTheCpu) {
  const std::string root = fp8kit::testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", moe_spec());
  // The checkpoints quantize writes (per-tensor, block) and the BF16 one, quantized online.
  for (const char* kind : {"tensor", "block", "bf16"}) {
    SCOPED_TRACE(kind);
    const std::string dir = root + "/" + kind;
    if (std::string(kind) != "bf16") {
      QuantizeOptions q;
      q.scheme = std::string(kind) == "block" ? QuantScheme::kBlock : QuantScheme::kPerTensor;
      quantize_checkpoint(root + "/bf16", dir, q);
    }
    LoadOptions on_gpu;
    on_gpu.device = Device::cuda(0);
    const LoadedModel gpu = load_model(dir, on_gpu);
    const LoadedModel cpu = load_model(dir);
    const std::string name = "model.layers.1.mlp.experts";
    FusedMoE& g = gpu.moe(name);
    FusedMoE& c = cpu.moe(name);
    for (const auto& [pname, param] : c.parameters()) {
      ASSERT_NE(g.find_parameter(pname), nullptr) << pname;
      EXPECT_TRUE(same_bytes(g.parameter(pname).data, param.data)) << pname;
    }
    for (const int64_t m : {1, 7, 300}) {
      const Tensor x = random_bf16({m, 256}, uint32_t(m));
      const Tensor logits = random_bf16({m, 8}, uint32_t(100 + m));
      const Tensor yc = c.forward(gpu_test::ctx_of(x.clone()), x.clone(), logits);
      const Tensor yg = g.forward(gpu_test::ctx_of(x.to(Device::cuda(0))), x.to(Device::cuda(0)), logits.to(Device::cuda(0)));
      // A one-ulp difference in the bf16 intermediate can move a dynamic activation scale and with
      // it many FP8 codes: the bound is FP8's rounding, far below a wrong expert or weight (~1).
      EXPECT_LE(rel_error(yg.to(Device::cpu()), values(yc)), 0.03) << "m " << m;
    }
  }
}

// Mixtral and DeepSeek-V3 (grouped top-k with sigmoid scores and the correction bias) checkpoints
// in block FP8 on the GPU: every MoE layer against the same layer loaded on the CPU.
TEST(LayersCuda, MixtralAndDeepSeekMoeLayersMatchTheCpu) {
  for (const convert::SyntheticModelSpec& spec : {mixtral_spec(), deepseek_v3_spec()}) {
    const bool mixtral = spec.architecture == convert::SyntheticArchitecture::kMixtral;
    SCOPED_TRACE(mixtral ? "mixtral" : "deepseek-v3");
    const std::string root = fp8kit::testing::scratch_dir();
    convert::write_synthetic_checkpoint(root + "/bf16", spec);
    QuantizeOptions q;
    q.scheme = QuantScheme::kBlock;
    quantize_checkpoint(root + "/bf16", root + "/block", q);
    LoadOptions on_gpu;
    on_gpu.device = Device::cuda(0);
    const LoadedModel gpu = load_model(root + "/block", on_gpu);
    const LoadedModel cpu = load_model(root + "/block");
    ASSERT_FALSE(cpu.moes.empty());
    for (const auto& [name, layer] : cpu.moes) {
      SCOPED_TRACE(name);
      FusedMoE& g = gpu.moe(name);
      for (const int64_t m : {1, 16, 129}) {
        const Tensor x = random_bf16({m, layer->hidden_size()}, uint32_t(m));
        const Tensor logits = random_bf16({m, layer->global_num_experts()}, uint32_t(7 + m));
        const Tensor yc = layer->forward(gpu_test::ctx_of(x.clone()), x.clone(), logits);
        const Tensor yg = g.forward(gpu_test::ctx_of(x.to(Device::cuda(0))), x.to(Device::cuda(0)), logits.to(Device::cuda(0)));
        EXPECT_LE(rel_error(yg.to(Device::cpu()), values(yc)), 0.03) << "m " << m;
      }
    }
  }
}

TEST(LayersCuda, DynamicKvScalesMatchTheCpu) {
  const std::string root = fp8kit::testing::scratch_dir();
  const std::string dir = make_fp8(root, QuantScheme::kPerTensor);
  LoadOptions o;
  o.kv_cache_dtype = "fp8";
  o.calculate_kv_scales = true;
  const LoadedModel cpu = load_model(dir, o);
  o.device = Device::cuda(0);
  const LoadedModel gpu = load_model(dir, o);
  Attention& ac = cpu.attention("model.layers.0.self_attn.attn");
  Attention& ag = gpu.attention("model.layers.0.self_attn.attn");
  const Tensor q = random_bf16({33, 256}, 1), k = random_bf16({33, 128}, 2), v = random_bf16({33, 128}, 3);
  ac.calc_kv_scales(q, k, v);
  ag.calc_kv_scales(q.to(Device::cuda(0)), k.to(Device::cuda(0)), v.to(Device::cuda(0)));
  EXPECT_TRUE(same_bytes(ag.k_scale, ac.k_scale));
  EXPECT_TRUE(same_bytes(ag.v_scale, ac.v_scale));
  EXPECT_TRUE(same_bytes(ag.q_scale, ac.q_scale));
  EXPECT_EQ(ag.k_scale_float, ac.k_scale_float);
}

}  // namespace
}  // namespace fp8kit
