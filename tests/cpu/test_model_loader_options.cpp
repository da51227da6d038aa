// LoadOptions of the model runner (include/fp8kit/model/model_loader.h): unquantized loads of a
// 16-bit checkpoint, the model-dtype override and its casts, the spec's f32 gate, and layers
// post-processed as soon as their last tensor is in (a tensor arriving after that is an error).
#include <gtest/gtest.h>

#include "expect_error.h"
#include "model_loader_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using namespace loader_test;

TEST(ModelLoaderOptions, UnquantizedLoadsKeepSixteenBitMethods) {
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/moe", moe_spec());
  LoadOptions o;
  o.quantize = false;
  o.kv_cache_dtype = "fp8";
  const LoadedModel m = load_model(root + "/moe", o);
  EXPECT_EQ(m.quant_config, nullptr);
  EXPECT_EQ(m.linear("model.layers.0.self_attn.qkv_proj").quant_method()->name(), "UnquantizedLinearMethod");
  EXPECT_EQ(m.moe("model.layers.1.mlp.experts").quant_method()->name(), "UnquantizedFusedMoEMethod");
  EXPECT_EQ(m.attention("model.layers.0.self_attn.attn").quant_method(), nullptr);
  EXPECT_EQ(m.attention("model.layers.0.self_attn.attn").k_scale.item_f32(), 1.0f);
}

TEST(ModelLoaderOptions, TheDtypeOverrideCastsEveryTensor) {
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/moe", moe_spec());
  LoadOptions o;
  o.quantize = false;
  o.dtype = DType::kF32;
  const LoadedModel m = load_model(root + "/moe", o);
  EXPECT_EQ(m.linear("model.layers.0.mlp.gate_up_proj").parameter("weight").data.dtype(), DType::kF32);
  EXPECT_EQ(m.plain.at("model.embed_tokens.weight").dtype(), DType::kF32);
  EXPECT_EQ(m.plain.at("model.layers.1.mlp.gate.weight").dtype(), DType::kF32);
  const Checkpoint ckpt = Checkpoint::open(root + "/moe");
  const Tensor bf16 = ckpt.tensor("model.norm.weight");
  const Tensor f32 = m.plain.at("model.norm.weight");
  for (int64_t i = 0; i < bf16.numel(); ++i) EXPECT_EQ(f32.data<float>()[i], bf16_to_float(bf16.data<BFloat16>()[i]));
}

TEST(ModelLoaderOptions, Fp8LayersWithF32ActivationsNeedTheTestSwitch) {
  const std::string root = testing::scratch_dir();
  const std::string bf16 = make_bf16(root);
  LoadOptions o;
  o.dtype = DType::kF32;
  testing::expect_invalid([&] { load_model(bf16, o); },
                          "torch.float32 is not supported for quantization method fp8. Supported dtypes: "
                          "[torch.bfloat16, torch.float16]");
  o.allow_f32_quantized = true;
  const LoadedModel m = load_model(bf16, o);
  EXPECT_EQ(m.linear("model.layers.0.self_attn.qkv_proj").quant_method()->name(), "Fp8LinearMethod");
  o.quantize = false;
  const std::string fp8 = make_fp8(testing::scratch_dir() + "/x", QuantScheme::kPerTensor);
  testing::expect_invalid([&] { load_model(fp8, o); },
                          fp8 + ": the checkpoint is quantized (fp8): it cannot be loaded unquantized");
}

TEST(ModelLoaderOptions, ATensorAfterItsLayerIsCompleteIsAnError) {
  // Layers are processed when their last tensor arrives (a checkpoint quantized online then holds
  // one layer in 16 bits at a time); a fused qkv_proj.weight next to the q/k/v shards completes the
  // layer before v_proj (sorted names), which then has nowhere to go.
  const std::string root = testing::scratch_dir();
  const std::string bf16 = make_bf16(root);
  rewrite_checkpoint(bf16, [](Tensors& tensors, nlohmann::ordered_json&) {
    const std::string p = "model.layers.0.self_attn.";
    const Tensor q = find_tensor(tensors, p + "q_proj.weight"), k = find_tensor(tensors, p + "k_proj.weight"),
                 v = find_tensor(tensors, p + "v_proj.weight");
    Tensor fused = Tensor::empty({q.size(0) + k.size(0) + v.size(0), q.size(1)}, DType::kBF16);
    fused.narrow(0, 0, q.size(0)).copy_(q);
    fused.narrow(0, q.size(0), k.size(0)).copy_(k);
    fused.narrow(0, q.size(0) + k.size(0), v.size(0)).copy_(v);
    tensors.push_back({p + "qkv_proj.weight", fused});
  });
  testing::expect_invalid([&] { load_model(bf16); },
                          bf16 + ": tensor 'model.layers.0.self_attn.v_proj.weight': layer "
                                 "model.layers.0.self_attn.qkv_proj already received all its tensors");
}

}  // namespace
}  // namespace fp8kit
