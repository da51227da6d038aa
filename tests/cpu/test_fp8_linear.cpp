// fp8_linear: each activation scheme equals the quantization op and scaled_mm called by hand, bit
// for bit; leading dimensions are kept; the errors name the missing argument.
#include <gtest/gtest.h>

#include <cstring>

#include "expect_error.h"
#include "test_context.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/linear.h"
#include "fp8kit/ops/quant.h"
#include "gemm_test_util.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

using namespace gemm_test;
using ops::ActivationQuant;

Tensor random_bf16(const Shape& shape, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor t = Tensor::empty(shape, DType::kBF16);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<BFloat16>()[i] = float_to_bf16(nd(rng));
  return t;
}

using linear_test::same_bits;

TEST(Fp8Linear, EachSchemeIsQuantThenScaledMm) {
  std::mt19937 rng(3);
  const Tensor x = random_bf16({2, 3, 256}, rng);  // leading dims [2, 3]
  const Tensor w = random_bf16({96, 256}, rng);
  const ops::QuantResult wt = ops::quantize_weight_per_tensor(cpu_ctx(), w);
  const ops::QuantResult wb = ops::quantize_weight_block(cpu_ctx(), w, 32, 128);
  const Tensor x2d = x.view({6, 256});

  ops::Fp8LinearOptions o;
  o.out_dtype = DType::kBF16;
  // Per token.
  ops::ScaledFp8QuantOptions pt;
  pt.use_per_token_if_dynamic = true;
  ops::QuantResult q = ops::scaled_fp8_quant(cpu_ctx(), x2d, pt);
  Tensor want = ops::scaled_mm(cpu_ctx(), q.q, wt.q, q.scale, wt.scale);
  Tensor got = ops::fp8_linear(cpu_ctx(), x, wt.q, wt.scale, o);
  EXPECT_EQ(got.shape(), (Shape{2, 3, 96}));
  EXPECT_TRUE(same_bits(got.view({6, 96}), want));
  // Per tensor.
  o.activation = ActivationQuant::kDynamicPerTensor;
  q = ops::scaled_fp8_quant(cpu_ctx(), x2d);
  EXPECT_TRUE(same_bits(ops::fp8_linear(cpu_ctx(), x, wt.q, wt.scale, o).view({6, 96}), ops::scaled_mm(cpu_ctx(), q.q, wt.q, q.scale, wt.scale)));
  // Static.
  o.activation = ActivationQuant::kStatic;
  o.input_scale = Tensor::scalar_f32(0.02f);
  ops::ScaledFp8QuantOptions st;
  st.scale = o.input_scale;
  q = ops::scaled_fp8_quant(cpu_ctx(), x2d, st);
  EXPECT_TRUE(same_bits(ops::fp8_linear(cpu_ctx(), x, wt.q, wt.scale, o).view({6, 96}), ops::scaled_mm(cpu_ctx(), q.q, wt.q, q.scale, wt.scale)));
  // Block.
  o.activation = ActivationQuant::kGroup;
  o.weight_block = std::make_pair(32, 128);
  ops::PerTokenGroupQuantOptions go;
  go.column_major_scales = true;
  q = ops::per_token_group_quant(cpu_ctx(), x2d, go);
  ops::ScaledMmOptions mm;
  mm.block = o.weight_block;
  EXPECT_TRUE(same_bits(ops::fp8_linear(cpu_ctx(), x, wb.q, wb.scale, o).view({6, 96}), ops::scaled_mm(cpu_ctx(), q.q, wb.q, q.scale, wb.scale, mm)));
}

TEST(Fp8Linear, Errors) {
  const Tensor x = Tensor::zeros({2, 128}, DType::kBF16), w = Tensor::zeros({8, 128}, DType::kE4M3FN);
  ops::Fp8LinearOptions o;
  o.activation = ActivationQuant::kStatic;
  testing::expect_invalid([&] { ops::fp8_linear(cpu_ctx(), x, w, Tensor::scalar_f32(1), o); },
                          "fp8_linear: static activations need `input_scale`");
  o.activation = ActivationQuant::kGroup;
  testing::expect_invalid([&] { ops::fp8_linear(cpu_ctx(), x, w, Tensor::scalar_f32(1), o); },
                          "fp8_linear: grouped activations need `weight_block`");
}

}  // namespace
}  // namespace fp8kit
