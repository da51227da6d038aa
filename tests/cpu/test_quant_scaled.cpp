// scaled_fp8_quant (spec 1.6, 2.2 rules 1-3 and edge cases, 2.9 H2): hand-computed goldens,
// structured inputs, every edge case, then random inputs of ragged shapes against a scalar
// re-implementation of the spec's formulas written element by element.
#include <cfloat>

#include "fp8kit/ops/quant.h"
#include "test_quant_util.h"

namespace fp8kit {
namespace {

using namespace quant_test;
using ops::ScaledFp8QuantOptions;

enum class Mode { kStatic, kDynamicTensor, kDynamicToken };

struct ExpectedScaled {
  std::vector<uint8_t> q;
  std::vector<float> scale;
};

// The spec, element by element (x already widened to float, row-major [m, k]).
ExpectedScaled spec_scaled_quant(const std::vector<float>& x, int64_t m, int64_t k, Mode mode, DType fp8,
                           float static_scale = 0.0f, const float* ub = nullptr) {
  const float max = quant_max(fp8);
  ExpectedScaled e;
  e.q.resize(size_t(m * k));
  if (mode == Mode::kDynamicToken) {
    const float min_scale = 1.0f / (max * 512.0f);
    for (int64_t r = 0; r < m; ++r) {
      float t = spec_absmax(&x[size_t(r * k)], k);
      if (ub != nullptr) t = std::fminf(t, *ub);
      const float s = std::fmaxf(t / max, min_scale);
      e.scale.push_back(s);
      for (int64_t c = 0; c < k; ++c) e.q[size_t(r * k + c)] = spec_cvt(x[size_t(r * k + c)] / s, fp8);
    }
    return e;
  }
  const float s = mode == Mode::kStatic ? static_scale : spec_absmax(x.data(), m * k) / max;
  e.scale.push_back(s);
  if (s == 0.0f) return e;  // fp8kit's H2 rule: zero codes (the reference would give 448)
  const float inv = 1.0f / s;
  for (size_t i = 0; i < x.size(); ++i) e.q[i] = spec_cvt(x[i] * inv, fp8);
  return e;
}

ops::QuantResult run(const Tensor& x, Mode mode, DType fp8, float static_scale = 0.0f, const float* ub = nullptr) {
  ScaledFp8QuantOptions o;
  o.out_dtype = fp8;
  if (mode == Mode::kStatic) o.scale = Tensor::scalar_f32(static_scale);
  if (mode == Mode::kDynamicToken) o.use_per_token_if_dynamic = true;
  if (ub != nullptr) o.scale_ub = Tensor::scalar_f32(*ub);
  return ops::scaled_fp8_quant(cpu_ctx(), x, o);
}

void expect_matches_spec(const Tensor& x, Mode mode, DType fp8, float static_scale = 0.0f, const float* ub = nullptr) {
  const int64_t m = x.size(0), k = x.size(1);
  const ExpectedScaled e = spec_scaled_quant(to_floats(x), m, k, mode, fp8, static_scale, ub);
  const ops::QuantResult r = run(x, mode, fp8, static_scale, ub);
  ASSERT_EQ(r.q.dtype(), fp8);
  ASSERT_EQ(r.q.shape(), (Shape{m, k}));
  const std::vector<uint8_t> q = to_bytes(r.q);
  int64_t mismatches = 0, first = -1;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] != e.q[i]) {
      if (first < 0) first = int64_t(i);
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0) << "shape [" << m << ", " << k << "] " << dtype_name(x.dtype()) << " -> " << dtype_name(fp8)
                           << ", first mismatch at " << first;
  const std::vector<float> s = to_floats(r.scale);
  ASSERT_EQ(s.size(), e.scale.size());
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(float_to_bits(s[i]), float_to_bits(e.scale[i])) << "scale " << i;
}

// ---- hand-computed goldens -------------------------------------------------------------------

TEST(QuantScaled, StaticGolden) {
  // x = [1, -2, 896], s = 2: inv = 0.5, x * inv = [0.5, -1, 448] -> e4m3fn codes
  // 0.5 = 2^-1 -> (−1 + 7) << 3 = 0x30;  -1 -> 0x80 | 7 << 3 = 0xB8;  448 = 1.75 * 2^8 -> 0x7E.
  const ops::QuantResult r = run(make_tensor({1, -2, 896}, {1, 3}), Mode::kStatic, DType::kE4M3FN, 2.0f);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x30, 0xB8, 0x7E}));
  EXPECT_EQ(r.scale.item_f32(), 2.0f);
}

TEST(QuantScaled, StaticReturnsTheGivenScaleTensor) {
  Tensor s = Tensor::scalar_f32(2.0f);
  ScaledFp8QuantOptions o;
  o.scale = s;
  const ops::QuantResult r = ops::scaled_fp8_quant(cpu_ctx(), make_tensor({1}, {1, 1}), o);
  EXPECT_EQ(r.scale.storage(), s.storage());
}

TEST(QuantScaled, DynamicPerTensorGolden) {
  // max|x| = 896 -> s = 896 / 448 = 2, then the static rule: the same codes as StaticGolden.
  const ops::QuantResult r = run(make_tensor({1, -2, 896, 0}, {2, 2}), Mode::kDynamicTensor, DType::kE4M3FN);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x30, 0xB8, 0x7E, 0x00}));
  EXPECT_EQ(r.scale.shape(), (Shape{1}));
  EXPECT_EQ(r.scale.item_f32(), 2.0f);
}

TEST(QuantScaled, DynamicPerTokenGolden) {
  // row 0: max 896 -> s = 2 -> [0.5, -1, 448] = [0x30, 0xB8, 0x7E]
  // row 1: max 4 -> s = 4/448 = 1/112; 4 / s = 448 -> 0x7E, 1 / s = 112 = 1.75 * 2^6 -> 0x6E,
  //        -0.25 / s = -28 = -1.75 * 2^4 -> 0x80 | 0x5E = 0xDE
  const ops::QuantResult r = run(make_tensor({1, -2, 896, 4, 1, -0.25f}, {2, 3}), Mode::kDynamicToken, DType::kE4M3FN);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x30, 0xB8, 0x7E, 0x7E, 0x6E, 0xDE}));
  EXPECT_EQ(r.scale.shape(), (Shape{2, 1}));
  EXPECT_EQ(to_floats(r.scale), (std::vector<float>{2.0f, 4.0f / 448.0f}));
}

TEST(QuantScaled, E4M3FNUZGolden) {
  // fnuz: MAX 224, bias 8. max = 448 -> s = 2; [1, -2, 448] / 2 = [0.5, -1, 224]
  // 0.5 -> (-1 + 8) << 3 = 0x38; -1 -> 0x80 | 0x40 = 0xC0; 224 = 1.75 * 2^7 -> 0x7E.
  const ops::QuantResult r = run(make_tensor({1, -2, 448}, {1, 3}), Mode::kDynamicTensor, DType::kE4M3FNUZ);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x38, 0xC0, 0x7E}));
  EXPECT_EQ(r.scale.item_f32(), 2.0f);
}

TEST(QuantScaled, TiesRoundToEven) {
  // s = 1. In [1, 2) the e4m3 step is 1/8: 1.0625 is halfway between 1 (0x38, even) and 1.125
  // (0x39) -> 0x38; 1.1875 halfway between 0x39 and 1.25 (0x3A, even) -> 0x3A; one float ulp
  // above 1.0625 -> 0x39. Subnormals: 2^-10 is half of 2^-9 -> 0x00; 3 * 2^-10 -> 0x02.
  const float above = std::nextafter(1.0625f, 2.0f);
  const ops::QuantResult r = run(make_tensor({1.0625f, 1.1875f, -1.0625f, above, 0x1p-10f, 0x1.8p-9f}, {1, 6}),
                                 Mode::kStatic, DType::kE4M3FN, 1.0f);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x38, 0x3A, 0xB8, 0x39, 0x00, 0x02}));
}

TEST(QuantScaled, ValuesAboveMaxSaturate) {
  // 432 is halfway between 416 (0x7D) and 448 (0x7E, even) -> 0x7E; 431 -> 0x7D. Above 448 the
  // clamp gives 448 even where plain rounding would give 480 or overflow (464 is the 448/480 tie).
  const ops::QuantResult r =
      run(make_tensor({431, 432, 448.0001f, 460, 464, 465, 1e30f, -500}, {1, 8}), Mode::kStatic, DType::kE4M3FN, 1.0f);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x7D, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE}));
  const ops::QuantResult u = run(make_tensor({230, 240, -1000}, {1, 3}), Mode::kStatic, DType::kE4M3FNUZ, 1.0f);
  EXPECT_EQ(to_bytes(u.q), (std::vector<uint8_t>{0x7E, 0x7E, 0xFE}));  // fnuz clamps at 224, not 240
}

TEST(QuantScaled, NaNAndInfinities) {
  // NaN -> +MAX (fminf returns the non-NaN operand), +-inf -> +-MAX.
  const ops::QuantResult r =
      run(make_tensor({NAN, -NAN, INFINITY, -INFINITY, 1}, {1, 5}), Mode::kStatic, DType::kE4M3FN, 1.0f);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x7E, 0x7E, 0x7E, 0xFE, 0x38}));
  // Dynamic per-tensor ignores NaN in the max: max = 4 -> s = 4/448, 4 -> 448.
  const ops::QuantResult d = run(make_tensor({NAN, 4, -2}, {1, 3}), Mode::kDynamicTensor, DType::kE4M3FN);
  EXPECT_EQ(d.scale.item_f32(), 4.0f / 448.0f);
  EXPECT_EQ(to_bytes(d.q)[0], 0x7E);
  EXPECT_EQ(to_bytes(d.q)[1], 0x7E);
  // An infinity makes the scale inf: inv = 0, finite * 0 = +-0, inf * 0 = NaN -> 448.
  const ops::QuantResult i = run(make_tensor({INFINITY, 4, -2}, {1, 3}), Mode::kDynamicTensor, DType::kE4M3FN);
  EXPECT_TRUE(std::isinf(i.scale.item_f32()));
  EXPECT_EQ(to_bytes(i.q), (std::vector<uint8_t>{0x7E, 0x00, 0x80}));
  // Per token: NaN ignored in the row max, quantized to +MAX.
  const ops::QuantResult t = run(make_tensor({NAN, 896, -INFINITY, 1}, {2, 2}), Mode::kDynamicToken, DType::kE4M3FN);
  EXPECT_EQ(to_bytes(t.q)[0], 0x7E);
  EXPECT_EQ(to_bytes(t.q)[1], 0x7E);
  EXPECT_EQ(to_floats(t.scale)[0], 2.0f);
  EXPECT_TRUE(std::isinf(to_floats(t.scale)[1]));
}

TEST(QuantScaled, AllZerosGiveZeroCodesInEveryMode) {
  for (DType fp8 : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
    const Tensor zeros = make_tensor(std::vector<float>(6, 0.0f), {2, 3});
    // Dynamic per-tensor: s = 0 exactly (no floor, bit-exact with the reference); the codes are 0
    // where the reference gives 448 (spec 2.9 H2, fp8kit's documented deviation).
    const ops::QuantResult d = run(zeros, Mode::kDynamicTensor, fp8);
    EXPECT_EQ(float_to_bits(d.scale.item_f32()), 0u);
    EXPECT_EQ(to_bytes(d.q), std::vector<uint8_t>(6, 0));
    // A zero static scale: the same rule, for any input.
    const ops::QuantResult s = run(make_tensor({1, -1, NAN, 5, 0, 2}, {2, 3}), Mode::kStatic, fp8, 0.0f);
    EXPECT_EQ(to_bytes(s.q), std::vector<uint8_t>(6, 0));
    // Per token: the floor 1/(MAX*512) applies; 0 / s = 0.
    const ops::QuantResult t = run(zeros, Mode::kDynamicToken, fp8);
    EXPECT_EQ(to_floats(t.scale), std::vector<float>(2, 1.0f / (quant_max(fp8) * 512.0f)));
    EXPECT_EQ(to_bytes(t.q), std::vector<uint8_t>(6, 0));
  }
  // Only NaNs: the max ignores them, s = 0, zero codes.
  const ops::QuantResult n = run(make_tensor({NAN, NAN}, {1, 2}), Mode::kDynamicTensor, DType::kE4M3FN);
  EXPECT_EQ(n.scale.item_f32(), 0.0f);
  EXPECT_EQ(to_bytes(n.q), std::vector<uint8_t>(2, 0));
}

TEST(QuantScaled, PerTokenScaleFloor) {
  // max 2^-20: 2^-20 / 448 is below the floor 1/229376, so s = 1/229376 and
  // x / s = 2^-20 * 229376 = 0.21875 = 1.75 * 2^-3 -> (−3 + 7) << 3 | 6 = 0x26.
  const ops::QuantResult r = run(make_tensor({0x1p-20f, -0x1p-20f, 0}, {1, 3}), Mode::kDynamicToken, DType::kE4M3FN);
  EXPECT_EQ(r.scale.item_f32(), 1.0f / 229376.0f);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x26, 0xA6, 0x00}));
  EXPECT_EQ(ops::fp8_min_scaling_factor(DType::kE4M3FN), 1.0f / 229376.0f);
  EXPECT_EQ(ops::fp8_min_scaling_factor(DType::kE4M3FNUZ), 1.0f / 114688.0f);
}

TEST(QuantScaled, PerTokenScaleUpperBound) {
  // ub = 448 bounds row 0's max 896: s = 448 / 448 = 1, so 896 saturates to 448 (0x7E);
  // row 1 (max 4) is below the bound: s = 4 / 448.
  const float ub = 448.0f;
  const ops::QuantResult r =
      run(make_tensor({1, -2, 896, 4, 1, 0}, {2, 3}), Mode::kDynamicToken, DType::kE4M3FN, 0.0f, &ub);
  EXPECT_EQ(to_floats(r.scale), (std::vector<float>{1.0f, 4.0f / 448.0f}));
  const std::vector<uint8_t> q = to_bytes(r.q);
  EXPECT_EQ(std::vector<uint8_t>(q.begin(), q.begin() + 3), (std::vector<uint8_t>{0x38, 0xC0, 0x7E}));
  expect_matches_spec(make_tensor(random_values(5 * 64, 7), {5, 64}), Mode::kDynamicToken, DType::kE4M3FN, 0.0f, &ub);
  const float small_ub = 0.5f;
  expect_matches_spec(make_tensor(random_values(5 * 64, 8), {5, 64}), Mode::kDynamicToken, DType::kE4M3FNUZ, 0.0f,
                      &small_ub);
}

TEST(QuantScaled, StructuredInputs) {
  // ones: max 1 -> s = 1/448, every element 448 -> 0x7E.
  const ops::QuantResult ones =
      run(make_tensor(std::vector<float>(8, 1.0f), {2, 4}), Mode::kDynamicTensor, DType::kE4M3FN);
  EXPECT_EQ(to_bytes(ones.q), std::vector<uint8_t>(8, 0x7E));
  // one-hot rows per token: the hot element is 448, the rest 0.
  std::vector<float> hot(16, 0.0f);
  for (int r = 0; r < 4; ++r) hot[size_t(r * 4 + r)] = float(r + 1) * 3.0f;
  const ops::QuantResult h = run(make_tensor(hot, {4, 4}), Mode::kDynamicToken, DType::kE4M3FN);
  const std::vector<uint8_t> hq = to_bytes(h.q);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(hq[size_t(i)], i % 5 == 0 ? 0x7E : 0x00) << i;
  // arange with s = 1: integers up to 16 are exact in e4m3; 17 ties to 16, 18 is exact.
  std::vector<float> ar(20);
  for (int i = 0; i < 20; ++i) ar[size_t(i)] = float(i);
  const ops::QuantResult a = run(make_tensor(ar, {1, 20}), Mode::kStatic, DType::kE4M3FN, 1.0f);
  const std::vector<uint8_t> aq = to_bytes(a.q);
  for (int i = 0; i < 20; ++i) {
    const float expected = i == 17 ? 16.0f : i == 19 ? 20.0f : float(i);
    EXPECT_EQ(e4m3fn_bits_to_float(aq[size_t(i)]), expected) << i;
  }
  expect_matches_spec(make_tensor(ar, {4, 5}), Mode::kDynamicToken, DType::kE4M3FN);
}

// ---- padding, preallocated output, strides ------------------------------------------------------

TEST(QuantScaled, PaddingRowsAreZeroAndScalesOne) {
  const Tensor x = make_tensor({1, -2, 896, 4, 1, -0.25f}, {2, 3});
  for (Mode mode : {Mode::kStatic, Mode::kDynamicTensor, Mode::kDynamicToken}) {
    ScaledFp8QuantOptions o;
    o.num_token_padding = 5;
    if (mode == Mode::kStatic) o.scale = Tensor::scalar_f32(2.0f);
    o.use_per_token_if_dynamic = mode == Mode::kDynamicToken;
    const ops::QuantResult r = ops::scaled_fp8_quant(cpu_ctx(), x, o);
    ASSERT_EQ(r.q.shape(), (Shape{5, 3}));
    const std::vector<uint8_t> q = to_bytes(r.q);
    const ops::QuantResult plain = run(x, mode, DType::kE4M3FN, 2.0f);
    const std::vector<uint8_t> pq = to_bytes(plain.q);
    EXPECT_EQ(std::vector<uint8_t>(q.begin(), q.begin() + 6), pq);
    EXPECT_EQ(std::vector<uint8_t>(q.begin() + 6, q.end()), std::vector<uint8_t>(9, 0));
    if (mode == Mode::kDynamicToken) {
      ASSERT_EQ(r.scale.shape(), (Shape{5, 1}));
      EXPECT_EQ(to_floats(r.scale), (std::vector<float>{2.0f, 4.0f / 448.0f, 1.0f, 1.0f, 1.0f}));
    }
  }
  // Padding below M changes nothing.
  ScaledFp8QuantOptions o;
  o.num_token_padding = 1;
  EXPECT_EQ(ops::scaled_fp8_quant(cpu_ctx(), x, o).q.shape(), (Shape{2, 3}));
}

TEST(QuantScaled, PreallocatedOutput) {
  const Tensor x = make_tensor(random_values(3 * 40, 3), {3, 40});
  for (Mode mode : {Mode::kStatic, Mode::kDynamicTensor, Mode::kDynamicToken}) {
    Tensor out = Tensor::empty({3, 40}, DType::kE4M3FN);
    out.fill_bytes_(0xAA);
    ScaledFp8QuantOptions o;
    o.output = out;
    if (mode == Mode::kStatic) o.scale = Tensor::scalar_f32(0.05f);
    o.use_per_token_if_dynamic = mode == Mode::kDynamicToken;
    const ops::QuantResult r = ops::scaled_fp8_quant(cpu_ctx(), x, o);
    EXPECT_EQ(r.q.storage(), out.storage());
    EXPECT_EQ(to_bytes(out), to_bytes(run(x, mode, DType::kE4M3FN, 0.05f).q));
  }
}

TEST(QuantScaled, NonContiguousRowStride) {
  const std::vector<float> wide = random_values(6 * 70, 11, DType::kBF16);
  const Tensor big = make_tensor(wide, {6, 70}, DType::kBF16);
  const Tensor view = big.narrow(1, 3, 61);  // row stride 70, 61 columns
  ASSERT_EQ(view.stride(0), 70);
  for (Mode mode : {Mode::kStatic, Mode::kDynamicTensor, Mode::kDynamicToken}) {
    expect_matches_spec(view, mode, DType::kE4M3FN, 0.125f);
    EXPECT_EQ(to_bytes(run(view, mode, DType::kE4M3FN, 0.125f).q),
              to_bytes(run(view.contiguous(), mode, DType::kE4M3FN, 0.125f).q));
  }
}

// ---- random inputs, ragged shapes, every input and output dtype ---------------------------------

TEST(QuantScaled, RandomRaggedShapesMatchSpec) {
  uint32_t seed = 100;
  for (int64_t k : {1, 3, 127, 129, 4097}) {
    for (int64_t m : {1, 7}) {
      for (DType in : {DType::kF32, DType::kF16, DType::kBF16}) {
        for (DType fp8 : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
          const Tensor x = make_tensor(random_values(size_t(m * k), ++seed, in), {m, k}, in);
          expect_matches_spec(x, Mode::kStatic, fp8, 0.0173f);
          expect_matches_spec(x, Mode::kDynamicTensor, fp8);
          expect_matches_spec(x, Mode::kDynamicToken, fp8);
        }
      }
    }
  }
}

TEST(QuantScaled, LargeInputUsesThreadsDeterministically) {
  // Enough rows for several parallel chunks; the result must not depend on the split.
  const Tensor x = make_tensor(random_values(300 * 1024, 5, DType::kBF16), {300, 1024}, DType::kBF16);
  expect_matches_spec(x, Mode::kDynamicTensor, DType::kE4M3FN);
  expect_matches_spec(x, Mode::kDynamicToken, DType::kE4M3FN);
}

TEST(QuantScaled, EmptyInputs) {
  const ops::QuantResult r = run(Tensor::empty({0, 16}, DType::kF32), Mode::kDynamicToken, DType::kE4M3FN);
  EXPECT_EQ(r.q.shape(), (Shape{0, 16}));
  EXPECT_EQ(r.scale.shape(), (Shape{0, 1}));
  const ops::QuantResult d = run(Tensor::empty({4, 0}, DType::kF32), Mode::kDynamicTensor, DType::kE4M3FN);
  EXPECT_EQ(d.scale.item_f32(), 0.0f);
}

TEST(QuantScaled, QuantMax) {
  EXPECT_EQ(ops::fp8_quant_max(DType::kE4M3FN), 448.0f);
  EXPECT_EQ(ops::fp8_quant_max(DType::kE4M3FNUZ), 224.0f);
}

}  // namespace
}  // namespace fp8kit
