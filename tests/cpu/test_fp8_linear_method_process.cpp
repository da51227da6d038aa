// Fp8LinearMethod::process_weights_after_loading (spec 1.3): (C) requantization to the max scale
// bit for bit against ops::requantize_with_max_scale called by hand, the [K, N] column-major
// weight, the 0-dim scales, static input_scale = max; fused-on-disk checkpoints left alone;
// (B) online quantization equal to scaled_fp8_quant of the fused weight; (A) block scales kept;
// (D) weight-only with per-shard scales mapped to rows by logical_widths (hazard H4 fixed); and
// the errors for scales never loaded, a second call, and apply before processing.
#include <gtest/gtest.h>

#include <cfloat>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/fp8_linear_method.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/ops/quant.h"
#include "gemm_test_util.h"
#include "layers/fp8_linear_method_internal.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

using linear_test::same_bits;
using linear_test::values;
using testing::expect_invalid;

using linear_test::kK;
using linear_test::kQ;
using linear_test::kV;
using linear_test::kNot;

LinearOptions fp8_options(const Fp8Config& config, DType dtype = DType::kBF16) {
  LinearOptions o;
  o.quant_config = &config;
  o.params_dtype = dtype;
  return o;
}

// q/k/v weights of a GQA layer (4 query heads, 2 kv heads of 8; hidden 32): 32, 16, 16 rows.
struct QkvFp8 {
  std::mt19937 rng{11};
  Tensor q = gemm_test::random_e4m3(32, 32, rng), k = gemm_test::random_e4m3(16, 32, rng),
         v = gemm_test::random_e4m3(16, 32, rng);
  Tensor fused() const {
    Tensor f = Tensor::empty({64, 32}, DType::kE4M3FN);
    f.narrow(0, 0, 32).copy_(q);
    f.narrow(0, 32, 16).copy_(k);
    f.narrow(0, 48, 16).copy_(v);
    return f;
  }
  void load(LinearBase& l, const std::vector<float>& scales) const {
    l.load_weight("weight", q, kQ);
    l.load_weight("weight", k, kK);
    l.load_weight("weight", v, kV);
    l.load_weight("weight_scale", Tensor::scalar_f32(scales[0]), kQ);
    l.load_weight("weight_scale", Tensor::scalar_f32(scales[1]), kK);
    l.load_weight("weight_scale", Tensor::scalar_f32(scales[2]), kV);
  }
};

TEST(Fp8LinearMethodProcess, RequantizesToTheMaxScaleBitForBit) {
  const Fp8Config config(true, "static");
  const QkvFp8 ck;
  const std::vector<float> scales = {0.02f, 0.05f, 0.0125f};
  QKVParallelLinear l("qkv_proj", 32, 8, 4, 2, fp8_options(config));
  ck.load(l, scales);
  l.load_weight("input_scale", Tensor::scalar_f32(0.5f), kQ);
  l.load_weight("input_scale", Tensor::scalar_f32(2.0f), kK);
  l.load_weight("input_scale", Tensor::scalar_f32(1.0f), kV);
  l.process_weights_after_loading(cpu_ctx());

  const ops::RequantizeResult want =
      ops::requantize_with_max_scale(cpu_ctx(), ck.fused(), Tensor::from_vector(scales), {32, 16, 16});
  const Tensor& w = l.parameter("weight").data;
  EXPECT_EQ(w.shape(), (Shape{32, 64}));  // [K, N]
  EXPECT_EQ(w.strides(), (Shape{1, 32}));  // column-major: the [N, K] rows stay contiguous
  EXPECT_TRUE(same_bits(w.t(), want.weight));
  EXPECT_FALSE(same_bits(w.t(), ck.fused()));  // shards with smaller scales did change
  const Tensor& s = l.parameter("weight_scale").data;
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item_f32(), 0.05f);
  EXPECT_EQ(s.item_f32(), want.max_scale.item_f32());
  const Tensor& is = l.parameter("input_scale").data;
  EXPECT_EQ(is.dim(), 0);
  EXPECT_EQ(is.item_f32(), 2.0f);
}

TEST(Fp8LinearMethodProcess, FusedOnDiskIsNotRequantized) {
  // One scale in slot 0, the sentinel in the others: requantize_with_max_scale skips the weight.
  const Fp8Config config(true, "dynamic");
  const QkvFp8 ck;
  QKVParallelLinear l("qkv_proj", 32, 8, 4, 2, fp8_options(config));
  l.load_weight("weight", ck.fused(), std::nullopt);
  l.load_weight("weight_scale", Tensor::scalar_f32(0.03f), std::nullopt);
  l.process_weights_after_loading(cpu_ctx());
  EXPECT_TRUE(same_bits(l.parameter("weight").data.t(), ck.fused()));
  EXPECT_EQ(l.parameter("weight_scale").data.item_f32(), 0.03f);
}

TEST(Fp8LinearMethodProcess, OnlineQuantizesTheWholeFusedWeight) {
  const Fp8Config config(false, "static");  // the scheme does not matter for online linear layers
  std::mt19937 rng(5);
  const Tensor gate = linear_test::random_16bit({48, 40}, DType::kBF16, rng);
  const Tensor up = linear_test::random_16bit({48, 40}, DType::kBF16, rng, 3.0f);
  MergedColumnParallelLinear l("gate_up_proj", 40, {48, 48}, fp8_options(config));
  l.load_weight("weight", gate, ShardId{int64_t(0)});
  l.load_weight("weight", up, ShardId{int64_t(1)});
  l.process_weights_after_loading(cpu_ctx());

  Tensor fused = Tensor::empty({96, 40}, DType::kBF16);
  fused.narrow(0, 0, 48).copy_(gate);
  fused.narrow(0, 48, 48).copy_(up);
  const ops::QuantResult want = ops::scaled_fp8_quant(cpu_ctx(), fused);  // dynamic per-tensor, no floor
  const Tensor& w = l.parameter("weight").data;
  EXPECT_EQ(w.dtype(), DType::kE4M3FN);
  EXPECT_EQ(w.shape(), (Shape{40, 96}));
  EXPECT_EQ(w.strides(), (Shape{1, 40}));
  EXPECT_TRUE(same_bits(w.t(), want.q));
  EXPECT_EQ(l.parameter("weight_scale").data.shape(), (Shape{1}));
  EXPECT_EQ(values(l.parameter("weight_scale").data), values(want.scale));
  EXPECT_EQ(l.find_parameter("input_scale"), nullptr);
}

TEST(Fp8LinearMethodProcess, BlockKeepsWeightAndScales) {
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{16, 16});
  std::mt19937 rng(2);
  const Tensor w = gemm_test::random_e4m3(32, 48, rng);
  const Tensor s = gemm_test::random_scales({2, 3}, rng);
  ColumnParallelLinear l("c", 48, 32, fp8_options(config));
  l.load_weight("weight", w, std::nullopt);
  l.load_weight("weight_scale_inv", s, std::nullopt);
  l.process_weights_after_loading(cpu_ctx());
  EXPECT_TRUE(same_bits(l.parameter("weight").data, w));
  EXPECT_EQ(l.parameter("weight").data.shape(), (Shape{32, 48}));  // [N, K], not transposed
  EXPECT_TRUE(same_bits(l.parameter("weight_scale_inv").data, s));
}

TEST(Fp8LinearMethodProcess, ScalesNeverLoadedAreErrors) {
  const Fp8Config per_tensor(true, "static"), block(true, "dynamic", {}, std::vector<int64_t>{16, 16});
  ColumnParallelLinear no_weight_scale("model.c", 32, 32, fp8_options(per_tensor));
  expect_invalid([&] { no_weight_scale.process_weights_after_loading(cpu_ctx()); }, "model.c: weight_scale was not loaded");
  ColumnParallelLinear no_input_scale("model.c", 32, 32, fp8_options(per_tensor));
  no_input_scale.load_weight("weight_scale", Tensor::scalar_f32(1.0f), std::nullopt);
  expect_invalid([&] { no_input_scale.process_weights_after_loading(cpu_ctx()); },
                 "model.c: input_scale was not loaded (static activation scheme)");
  ColumnParallelLinear partial("model.c", 48, 32, fp8_options(block));
  Tensor s = Tensor::zeros({2, 3}, DType::kF32);
  partial.load_weight("weight_scale_inv", s, std::nullopt);
  partial.parameter("weight_scale_inv").data.narrow(0, 1, 1).narrow(1, 2, 1).copy_(Tensor::scalar_f32(kNot).view({1, 1}));
  expect_invalid([&] { partial.process_weights_after_loading(cpu_ctx()); },
                 "model.c: 1 of 6 block scales of weight_scale_inv were not loaded");
}

TEST(Fp8LinearMethodProcess, OnceAndBeforeApply) {
  const Fp8Config config(true, "dynamic");
  ColumnParallelLinear l("c", 32, 32, fp8_options(config));
  l.load_weight("weight", Tensor::zeros({32, 32}, DType::kE4M3FN), std::nullopt);
  l.load_weight("weight_scale", Tensor::scalar_f32(1.0f), std::nullopt);
  expect_invalid([&] { l.forward(cpu_ctx(), Tensor::zeros({1, 32}, DType::kBF16)); },
                 "c: process_weights_after_loading must run before the forward pass");
  l.process_weights_after_loading(cpu_ctx());
  expect_invalid([&] { l.process_weights_after_loading(cpu_ctx()); }, "c: process_weights_after_loading already ran");
}

TEST(Fp8LinearMethodProcess, WeightOnlyMapsShardScalesToRowsByLogicalWidths) {
  detail::reset_weight_only_warning();
  linear_test::LogCapture log;
  const Fp8Config config(true, "static");
  const QkvFp8 ck;
  QKVParallelLinear l("qkv_proj", 32, 8, 4, 2, with_forced_weight_only(fp8_options(config), true));
  ck.load(l, {0.02f, 0.05f, 0.0125f});
  for (const ShardId& id : {kQ, kK, kV}) l.load_weight("input_scale", Tensor::scalar_f32(1.0f), id);
  l.process_weights_after_loading(cpu_ctx());
  // q rows 0-31 take 0.02, k rows 32-47 0.05, v rows 48-63 0.0125 (the spec's
  // repeat_interleave(64 / 3) would have misplaced them).
  std::vector<float> rows(32, 0.02f);
  rows.insert(rows.end(), 16, 0.05f);
  rows.insert(rows.end(), 16, 0.0125f);
  EXPECT_EQ(values(l.parameter("weight_scale").data), rows);
  EXPECT_TRUE(same_bits(l.parameter("weight").data.t(), ck.fused()));  // not requantized
  EXPECT_EQ(l.find_parameter("input_scale"), nullptr);                 // activations stay 16-bit
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_EQ(log.warnings[0],
            "Your GPU does not have native support for FP8 computation but FP8 quantization is being used. "
            "Weight-only FP8 compression will be used leveraging the Marlin kernel. This may degrade performance "
            "for compute-heavy workloads.");
  // Once per process.
  ColumnParallelLinear other("c", 32, 32, with_forced_weight_only(fp8_options(config), true));
  other.load_weight("weight_scale", Tensor::scalar_f32(0.5f), std::nullopt);
  other.load_weight("input_scale", Tensor::scalar_f32(0.5f), std::nullopt);
  other.process_weights_after_loading(cpu_ctx());
  EXPECT_EQ(log.warnings.size(), 1u);
  EXPECT_EQ(values(other.parameter("weight_scale").data), (std::vector<float>{0.5f}));
}

TEST(Fp8LinearMethodProcess, WeightOnlyFusedOnDiskAndBlock) {
  linear_test::LogCapture log;
  const Fp8Config per_tensor(true, "dynamic");
  const QkvFp8 ck;
  QKVParallelLinear fused("qkv_proj", 32, 8, 4, 2, with_forced_weight_only(fp8_options(per_tensor), true));
  fused.load_weight("weight", ck.fused(), std::nullopt);
  fused.load_weight("weight_scale", Tensor::scalar_f32(0.03f), std::nullopt);
  fused.process_weights_after_loading(cpu_ctx());
  EXPECT_EQ(values(fused.parameter("weight_scale").data), (std::vector<float>{0.03f}));  // per tensor

  const Fp8Config block(true, "dynamic", {}, std::vector<int64_t>{16, 16});
  std::mt19937 rng(8);
  const Tensor s = gemm_test::random_scales({2, 2}, rng);
  ColumnParallelLinear l("c", 32, 32, with_forced_weight_only(fp8_options(block), true));
  l.load_weight("weight_scale_inv", s, std::nullopt);
  l.process_weights_after_loading(cpu_ctx());
  EXPECT_TRUE(same_bits(l.parameter("weight_scale_inv").data, s));
}

}  // namespace
}  // namespace fp8kit
