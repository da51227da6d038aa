// Weight quantization (per-tensor, per-channel, block; ue8m0 scales) and dequantization: goldens,
// zero and NaN blocks, partial edge blocks, strided weights, random shapes against an independent
// per-element re-implementation in double (exact here: a float quotient or product computed in
// double and rounded once to float is the correctly rounded float result), and round trips.
#include <cfloat>

#include "fp8kit/ops/quant.h"
#include "test_quant_util.h"

namespace fp8kit {
namespace {

using namespace quant_test;
using ops::WeightQuantOptions;

enum class Scheme { kPerTensor, kPerChannel, kBlock };

struct ExpectedWeight {
  std::vector<uint8_t> q;
  std::vector<float> scale;  // row-major over blocks
};

// w row-major [n, k]; blocks of bn x bk (per-tensor: n x k, per-channel: 1 x k).
ExpectedWeight spec_weight_quant(const std::vector<float>& w, int64_t n, int64_t k, Scheme scheme, int64_t bn, int64_t bk,
                           DType fp8, bool ue8m0) {
  if (scheme == Scheme::kPerTensor) bn = std::max<int64_t>(n, 1), bk = std::max<int64_t>(k, 1);
  if (scheme == Scheme::kPerChannel) bn = 1, bk = std::max<int64_t>(k, 1);
  const int64_t blocks_n = (n + bn - 1) / bn, blocks_k = scheme == Scheme::kBlock ? (k + bk - 1) / bk : 1;
  ExpectedWeight e;
  e.scale.assign(size_t(blocks_n * blocks_k), 0.0f);
  std::vector<double> amax(e.scale.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const double a = std::fabs(double(w[size_t(i * k + j)]));
      double& m = amax[size_t((i / bn) * blocks_k + j / bk)];
      if (a > m) m = a;  // NaN never compares greater: ignored
    }
  }
  for (size_t b = 0; b < amax.size(); ++b) {
    float s = std::max(float(amax[b] / double(quant_max(fp8))), FLT_MIN);
    e.scale[b] = ue8m0 ? pow2_ceil(s) : s;
  }
  e.q.resize(size_t(n * k));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const double x = w[size_t(i * k + j)];
      const double s = e.scale[size_t((i / bn) * blocks_k + j / bk)];
      const float v = scheme == Scheme::kPerTensor ? float(x * double(float(1.0 / s))) : float(x / s);
      e.q[size_t(i * k + j)] = spec_cvt(v, fp8);
    }
  }
  return e;
}

ops::QuantResult quantize(const Tensor& w, Scheme scheme, int64_t bn, int64_t bk, DType fp8, bool ue8m0) {
  WeightQuantOptions o;
  o.out_dtype = fp8;
  o.ue8m0_scales = ue8m0;
  switch (scheme) {
    case Scheme::kPerTensor:
      return ops::quantize_weight_per_tensor(cpu_ctx(), w, o);
    case Scheme::kPerChannel:
      return ops::quantize_weight_per_channel(cpu_ctx(), w, o);
    case Scheme::kBlock:
      return ops::quantize_weight_block(cpu_ctx(), w, bn, bk, o);
  }
  return {};
}

void expect_matches_spec(const Tensor& w, Scheme scheme, int64_t bn, int64_t bk, DType fp8, bool ue8m0) {
  const int64_t n = w.size(0), k = w.size(1);
  const ExpectedWeight e = spec_weight_quant(to_floats(w), n, k, scheme, bn, bk, fp8, ue8m0);
  const ops::QuantResult r = quantize(w, scheme, bn, bk, fp8, ue8m0);
  ASSERT_EQ(r.q.shape(), (Shape{n, k}));
  const Shape scale_shape = scheme == Scheme::kPerTensor    ? Shape{}
                            : scheme == Scheme::kPerChannel ? Shape{n, 1}
                                                            : Shape{(n + bn - 1) / bn, (k + bk - 1) / bk};
  ASSERT_EQ(r.scale.shape(), scale_shape);
  EXPECT_EQ(to_bytes(r.q), e.q) << "[" << n << ", " << k << "] scheme " << int(scheme) << " block " << bn << "x" << bk
                                << " " << dtype_name(w.dtype()) << " -> " << dtype_name(fp8) << " ue8m0 " << ue8m0;
  const std::vector<float> s = to_floats(r.scale);
  ASSERT_EQ(s.size(), e.scale.size());
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(float_to_bits(s[i]), float_to_bits(e.scale[i])) << "scale " << i;
}

// |w - dq| <= half an fp8 step of w / s, times s, plus the two fp32 roundings (w / s and q * s).
void expect_round_trip(const Tensor& w, const ops::QuantResult& r, std::optional<std::pair<int64_t, int64_t>> block,
                       DType fp8) {
  const std::vector<float> x = to_floats(w);
  const std::vector<float> dq = to_floats(ops::dequantize_weight(cpu_ctx(), r.q, r.scale, DType::kF32, block));
  const std::vector<float> s = to_floats(r.scale);
  const int64_t n = w.size(0), k = w.size(1);
  const int min_exp = fp8 == DType::kE4M3FNUZ ? -7 : -6;
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      double scale = s[0];
      if (r.scale.numel() == n && n > 1) scale = s[size_t(i)];
      if (block && r.scale.dim() == 2 && r.scale.numel() > 1) {
        scale = s[size_t((i / block->first) * r.scale.size(1) + j / block->second)];
      }
      const double a = std::fabs(x[size_t(i * k + j)]) / scale;
      int e = 0;
      std::frexp(a, &e);  // a in [2^(e-1), 2^e)
      const double step = std::ldexp(1.0, std::max(e - 1, min_exp) - 3);
      const double tol = 0.5 * step * scale * (1.0 + 1e-6) + 4e-7 * std::fabs(x[size_t(i * k + j)]);
      const double err = std::fabs(double(x[size_t(i * k + j)]) - double(dq[size_t(i * k + j)]));
      EXPECT_TRUE(err <= tol) << "at (" << i << ", " << j << "): w " << x[size_t(i * k + j)] << " dq "
                              << dq[size_t(i * k + j)] << " scale " << scale;
      worst = std::max(worst, err / tol);
    }
  }
  EXPECT_TRUE(worst <= 1.0);
}

// ---- goldens ---------------------------------------------------------------------------------

TEST(QuantWeight, PerTensorGolden) {
  // amax 896 -> s = 2, inv = 0.5: [1, -2, 896, 0] -> [0.5, -1, 448, 0] = [0x30, 0xB8, 0x7E, 0x00].
  const ops::QuantResult r = ops::quantize_weight_per_tensor(cpu_ctx(), make_tensor({1, -2, 896, 0}, {2, 2}));
  EXPECT_EQ(r.scale.dim(), 0);
  EXPECT_EQ(r.scale.item_f32(), 2.0f);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x30, 0xB8, 0x7E, 0x00}));
}

TEST(QuantWeight, PerChannelGolden) {
  // row 0: amax 896 -> s = 2 -> [0x30, 0xB8, 0x7E]; row 1: amax 4 -> s = 4/448;
  // 4 / s = 448 -> 0x7E, 1 / s = 112 -> 0x6E, -0.25 / s = -28 -> 0xDE.
  const ops::QuantResult r = ops::quantize_weight_per_channel(cpu_ctx(), make_tensor({1, -2, 896, 4, 1, -0.25f}, {2, 3}));
  EXPECT_EQ(r.scale.shape(), (Shape{2, 1}));
  EXPECT_EQ(to_floats(r.scale), (std::vector<float>{2.0f, 4.0f / 448.0f}));
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x30, 0xB8, 0x7E, 0x7E, 0x6E, 0xDE}));
}

TEST(QuantWeight, BlockGoldenWithPartialEdgeBlocks) {
  // [3, 3] in 2x2 blocks: scale [2, 2]. Block (0,0) = {1, 2, 4, 8} -> s = 8/448;
  // block (0,1) = {16, 32} -> s = 32/448; block (1,0) = {64, 128} -> s = 128/448;
  // block (1,1) = {0} -> s = FLT_MIN (zero block), q = 0. Each block's max maps to 448 = 0x7E,
  // half of it to 224 = 0x76, a quarter to 112 = 0x6E, an eighth to 56 = 0x66.
  const ops::QuantResult r = ops::quantize_weight_block(cpu_ctx(), make_tensor({1, 2, 16, 4, 8, 32, 64, 128, 0}, {3, 3}), 2, 2);
  EXPECT_EQ(r.scale.shape(), (Shape{2, 2}));
  EXPECT_EQ(to_floats(r.scale), (std::vector<float>{8.0f / 448.0f, 32.0f / 448.0f, 128.0f / 448.0f, FLT_MIN}));
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x66, 0x6E, 0x76, 0x76, 0x7E, 0x7E, 0x76, 0x7E, 0x00}));
}

TEST(QuantWeight, ZeroAndNaNBlocks) {
  for (Scheme scheme : {Scheme::kPerTensor, Scheme::kPerChannel, Scheme::kBlock}) {
    for (bool ue8m0 : {false, true}) {
      const ops::QuantResult z =
          quantize(make_tensor(std::vector<float>(6, 0.0f), {2, 3}), scheme, 2, 2, DType::kE4M3FN, ue8m0);
      for (float s : to_floats(z.scale)) EXPECT_EQ(s, FLT_MIN);  // 2^-126 is its own ue8m0 rounding
      EXPECT_EQ(to_bytes(z.q), std::vector<uint8_t>(6, 0));
    }
  }
  // NaN is ignored by the amax and quantizes to +MAX.
  const ops::QuantResult n = ops::quantize_weight_per_channel(cpu_ctx(), make_tensor({NAN, 1, 2}, {1, 3}));
  EXPECT_EQ(n.scale.item_f32(), 2.0f / 448.0f);
  EXPECT_EQ(to_bytes(n.q)[0], 0x7E);
}

TEST(QuantWeight, Ue8m0Scales) {
  // amax 900 -> 900/448 = 2.0089 -> 4; 900 / 4 = 225 -> 224 (0x76).
  const ops::QuantResult r = quantize(make_tensor({900, 1}, {1, 2}), Scheme::kPerChannel, 0, 0, DType::kE4M3FN, true);
  EXPECT_EQ(r.scale.item_f32(), 4.0f);
  EXPECT_EQ(to_bytes(r.q)[0], 0x76);
}

// ---- random shapes against the independent version ------------------------------------------

TEST(QuantWeight, RandomShapesMatchSpec) {
  struct Case {
    int64_t n, k, bn, bk;
  };
  uint32_t seed = 300;
  for (const Case c : {Case{1, 1, 128, 128}, Case{3, 5, 2, 2}, Case{127, 129, 128, 128}, Case{256, 384, 128, 128},
                       Case{300, 200, 128, 128}, Case{20, 4097, 16, 1024}, Case{9, 7, 1, 3}}) {
    for (DType in : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (DType fp8 : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
        const bool ue8m0 = (seed % 2) == 0;
        const Tensor w = make_tensor(random_values(size_t(c.n * c.k), ++seed, in, 0.02f), {c.n, c.k}, in);
        for (Scheme scheme : {Scheme::kPerTensor, Scheme::kPerChannel, Scheme::kBlock}) {
          expect_matches_spec(w, scheme, c.bn, c.bk, fp8, ue8m0);
        }
      }
    }
  }
}

TEST(QuantWeight, AnyStrides) {
  const Tensor base = make_tensor(random_values(200 * 160, 31, DType::kBF16), {200, 160}, DType::kBF16);
  for (const Tensor& w : {base.t(), base.narrow(1, 5, 130), base.t().narrow(0, 3, 100)}) {
    for (Scheme scheme : {Scheme::kPerTensor, Scheme::kPerChannel, Scheme::kBlock}) {
      const ops::QuantResult strided = quantize(w, scheme, 64, 32, DType::kE4M3FN, false);
      const ops::QuantResult dense = quantize(w.contiguous(), scheme, 64, 32, DType::kE4M3FN, false);
      EXPECT_EQ(to_bytes(strided.q), to_bytes(dense.q));
      EXPECT_EQ(to_floats(strided.scale), to_floats(dense.scale));
      expect_matches_spec(w, scheme, 64, 32, DType::kE4M3FN, false);
    }
  }
}

TEST(QuantWeight, LargeBlockQuantUsesThreads) {
  const Tensor w = make_tensor(random_values(512 * 1024, 33, DType::kBF16, 0.02f), {512, 1024}, DType::kBF16);
  expect_matches_spec(w, Scheme::kBlock, 128, 128, DType::kE4M3FN, false);
  expect_matches_spec(w, Scheme::kPerTensor, 0, 0, DType::kE4M3FN, false);
}

// ---- dequantization ----------------------------------------------------------------------------

TEST(QuantWeight, RoundTrips) {
  const Tensor w = make_tensor(random_values(300 * 200, 41, DType::kBF16, 0.02f), {300, 200}, DType::kBF16);
  for (DType fp8 : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
    WeightQuantOptions o;
    o.out_dtype = fp8;
    expect_round_trip(w, ops::quantize_weight_per_tensor(cpu_ctx(), w, o), std::nullopt, fp8);
    expect_round_trip(w, ops::quantize_weight_per_channel(cpu_ctx(), w, o), std::nullopt, fp8);
    expect_round_trip(w, ops::quantize_weight_block(cpu_ctx(), w, 128, 128, o), std::make_pair(128, 128), fp8);
    o.ue8m0_scales = true;
    expect_round_trip(w, ops::quantize_weight_block(cpu_ctx(), w, 128, 128, o), std::make_pair(128, 128), fp8);
  }
}

TEST(QuantWeight, DequantizeIsOneRoundingOfCodeTimesScale) {
  // q = [1.0 (0x38), -0.5 (0xB0), 448 (0x7E), NaN (0x7F)] per row scale [3, 1/3].
  Tensor q = Tensor::empty({2, 2}, DType::kE4M3FN);
  const uint8_t codes[4] = {0x38, 0xB0, 0x7E, 0x7F};
  std::memcpy(q.data_ptr(), codes, 4);
  const float third = 1.0f / 3.0f;
  const std::vector<float> f32 = to_floats(ops::dequantize_weight(cpu_ctx(), q, make_tensor({3, third}, {2}), DType::kF32));
  EXPECT_EQ(f32[0], 3.0f);
  EXPECT_EQ(f32[1], -1.5f);
  EXPECT_EQ(f32[2], 448.0f * third);
  EXPECT_TRUE(std::isnan(f32[3]));
  const std::vector<float> bf = to_floats(ops::dequantize_weight(cpu_ctx(), q, make_tensor({3, third}, {2, 1}), DType::kBF16));
  EXPECT_EQ(bf[2], bf16_to_float(float_to_bf16(448.0f * third)));
  // Per tensor (0-dim), ue8m0 and f16 scales, column-major block scales.
  EXPECT_EQ(to_floats(ops::dequantize_weight(cpu_ctx(), q, Tensor::scalar_f32(2.0f), DType::kF32))[2], 896.0f);
  Tensor ue = Tensor::empty({1}, DType::kUE8M0);
  *static_cast<uint8_t*>(ue.data_ptr()) = 130;  // 2^3
  EXPECT_EQ(to_floats(ops::dequantize_weight(cpu_ctx(), q, ue, DType::kF32))[0], 8.0f);
  EXPECT_EQ(to_floats(ops::dequantize_weight(cpu_ctx(), q, make_tensor({0.5f}, {1}, DType::kF16), DType::kF16))[1], -0.25f);
  const std::vector<float> blocks =
      to_floats(ops::dequantize_weight(cpu_ctx(), q, make_tensor({2, 4}, {2, 1}), DType::kF32, std::make_pair(1, 2)));
  EXPECT_EQ(blocks[0], 2.0f);
  EXPECT_EQ(blocks[2], 448.0f * 4.0f);
  // A [2, 3] weight with 1x2 blocks: scale [2, 2]; stored column-major.
  Tensor q23 = Tensor::empty({2, 3}, DType::kE4M3FN);
  q23.fill_bytes_(0x38);                                    // all 1.0
  const Tensor cm = make_tensor({1, 3, 2, 4}, {2, 2}).t();  // logical [[1, 2], [3, 4]]
  EXPECT_EQ(to_floats(ops::dequantize_weight(cpu_ctx(), q23, cm, DType::kF32, std::make_pair(1, 2))),
            (std::vector<float>{1, 1, 2, 3, 3, 4}));
}

TEST(QuantWeight, PerTensorDequantizeRoundsToF16) {
  // f16(float(f16(q)) * s): 448 * (1/3) = 149.33.. -> f16 149.375 (step 0.125 in [128, 256)).
  Tensor q = Tensor::empty({2, 2}, DType::kE4M3FN);
  const uint8_t codes[4] = {0x38, 0xB0, 0x7E, 0x01};
  std::memcpy(q.data_ptr(), codes, 4);
  const float s = 1.0f / 3.0f;
  const Tensor out = ops::per_tensor_dequantize(cpu_ctx(), q, Tensor::scalar_f32(s));
  ASSERT_EQ(out.dtype(), DType::kF16);
  ASSERT_EQ(out.shape(), (Shape{2, 2}));
  const std::vector<float> v = to_floats(out);
  for (int i = 0; i < 4; ++i) {
    const float widened = f16_to_float(float_to_f16(e4m3fn_bits_to_float(codes[i])));
    EXPECT_EQ(float_to_bits(v[size_t(i)]), float_to_bits(f16_to_float(float_to_f16(widened * s)))) << i;
  }
  EXPECT_EQ(v[2], 149.375f);
  // Any rank, any strides.
  Tensor q3 = Tensor::empty({2, 3, 4}, DType::kE4M3FNUZ);
  for (int i = 0; i < 24; ++i) static_cast<uint8_t*>(q3.data_ptr())[i] = uint8_t(0x30 + i);
  const Tensor t = q3.transpose(0, 2);
  const std::vector<float> tv = to_floats(ops::per_tensor_dequantize(cpu_ctx(), t, Tensor::scalar_f32(0.5f)));
  const std::vector<uint8_t> tb = to_bytes(t);
  for (size_t i = 0; i < tb.size(); ++i) EXPECT_EQ(tv[i], e4m3fnuz_bits_to_float(tb[i]) * 0.5f);
}

}  // namespace
}  // namespace fp8kit
