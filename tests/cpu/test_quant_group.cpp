// per_token_group_quant (spec 1.6, 2.2 rule 4): goldens, the eps floor, row- and column-major
// scales, UE8M0 scales (including a value where exp2f(ceilf(log2f(s))) is wrong), leading
// dimensions, e4m3fnuz, strides, and random inputs against an element-by-element scalar version.
#include "fp8kit/ops/quant.h"
#include "test_quant_util.h"

namespace fp8kit {
namespace {

using namespace quant_test;
using ops::PerTokenGroupQuantOptions;

struct ExpectedGroup {
  std::vector<uint8_t> q;
  std::vector<float> scale;  // row-major [rows, k / g]
};

ExpectedGroup spec_group_quant(const std::vector<float>& x, int64_t rows, int64_t k, int64_t g, DType fp8,
                          bool ue8m0 = false, float eps = 1e-10f) {
  const float max = quant_max(fp8);
  ExpectedGroup e;
  e.q.resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < k / g; ++j) {
      const float* group = &x[size_t(r * k + j * g)];
      float s = std::fmaxf(spec_absmax(group, g), eps) / max;
      if (ue8m0) s = pow2_ceil(s);
      e.scale.push_back(s);
      for (int64_t i = 0; i < g; ++i) e.q[size_t(r * k + j * g + i)] = spec_cvt(group[i] / s, fp8);
    }
  }
  return e;
}

ops::QuantResult group_quant(const Tensor& x, int64_t g, DType fp8 = DType::kE4M3FN, bool column_major = false,
                             bool ue8m0 = false) {
  PerTokenGroupQuantOptions o;
  o.group_size = g;
  o.out_dtype = fp8;
  o.column_major_scales = column_major;
  o.use_ue8m0 = ue8m0;
  return ops::per_token_group_quant(cpu_ctx(), x, o);
}

void expect_matches_spec(const Tensor& x, int64_t g, DType fp8, bool ue8m0 = false) {
  const int64_t k = x.size(-1), rows = x.numel() / k;
  const ExpectedGroup e = spec_group_quant(to_floats(x), rows, k, g, fp8, ue8m0);
  const ops::QuantResult r = group_quant(x, g, fp8, false, ue8m0);
  EXPECT_EQ(to_bytes(r.q), e.q) << "rows " << rows << " k " << k << " g " << g << " " << dtype_name(x.dtype());
  const std::vector<float> s = to_floats(r.scale);
  ASSERT_EQ(s.size(), e.scale.size());
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(float_to_bits(s[i]), float_to_bits(e.scale[i])) << "scale " << i;
}

TEST(QuantGroup, Golden) {
  // g = 2. Group [1, -2]: s = 2/448 = 1/224; 1/s = 224 = 1.75 * 2^7 -> 0x76, -2/s = -448 -> 0xFE.
  // Group [448, 896]: s = 2; 224 -> 0x76, 448 -> 0x7E.
  const ops::QuantResult r = group_quant(make_tensor({1, -2, 448, 896}, {1, 4}), 2);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x76, 0xFE, 0x76, 0x7E}));
  EXPECT_EQ(r.scale.shape(), (Shape{1, 2}));
  EXPECT_EQ(to_floats(r.scale), (std::vector<float>{2.0f / 448.0f, 2.0f}));
}

TEST(QuantGroup, ZeroGroupTakesEpsFloor) {
  // max(0, eps) / 448 = 1e-10 / 448; 0 / s = 0.
  const ops::QuantResult r = group_quant(make_tensor({0, 0, 3, 0}, {1, 4}), 2);
  EXPECT_EQ(to_floats(r.scale)[0], 1e-10f / 448.0f);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x00, 0x00, 0x7E, 0x00}));
}

TEST(QuantGroup, NaNAndInfinities) {
  // NaN is ignored by the max and quantizes to +MAX; inf makes s = inf, then finite / inf = 0.
  const ops::QuantResult r = group_quant(make_tensor({NAN, 896, INFINITY, 1}, {1, 4}), 2);
  EXPECT_EQ(to_floats(r.scale)[0], 2.0f);
  EXPECT_TRUE(std::isinf(to_floats(r.scale)[1]));
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x7E, 0x7E, 0x7E, 0x00}));
}

TEST(QuantGroup, E4M3FNUZUses224) {
  // s = 448 / 224 = 2: [448, 1] / 2 = [224 -> 0x7E, 0.5 -> (−1 + 8) << 3 = 0x38].
  const ops::QuantResult r = group_quant(make_tensor({448, 1}, {1, 2}), 2, DType::kE4M3FNUZ);
  EXPECT_EQ(r.scale.item_f32(), 2.0f);
  EXPECT_EQ(to_bytes(r.q), (std::vector<uint8_t>{0x7E, 0x38}));
  expect_matches_spec(make_tensor(random_values(4 * 256, 21), {4, 256}), 128, DType::kE4M3FNUZ);
}

TEST(QuantGroup, ColumnMajorScales) {
  const Tensor x = make_tensor(random_values(5 * 384, 22, DType::kBF16), {5, 384}, DType::kBF16);
  const ops::QuantResult row = group_quant(x, 128);
  const ops::QuantResult col = group_quant(x, 128, DType::kE4M3FN, true);
  ASSERT_EQ(col.scale.shape(), (Shape{5, 3}));
  EXPECT_EQ(col.scale.strides(), (Shape{1, 5}));
  EXPECT_EQ(to_floats(col.scale), to_floats(row.scale));  // same values, logical order
  EXPECT_EQ(to_bytes(col.q), to_bytes(row.q));
  // Storage: group-major, each group's scales of all rows adjacent.
  const float* raw = static_cast<const float*>(col.scale.data_ptr());
  const std::vector<float> rs = to_floats(row.scale);
  for (int m = 0; m < 5; ++m) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(raw[j * 5 + m], rs[size_t(m * 3 + j)]);
  }
}

TEST(QuantGroup, TmaAlignedColumnMajorScales) {
  // M = 5 rows pad to 8 per column: storage [K/g, 8], view [5, K/g] with strides (1, 8).
  for (int64_t m : {1, 4, 5, 7}) {
    const int64_t m_pad = (m + 3) / 4 * 4;
    const Tensor x =
        make_tensor(random_values(size_t(m * 384), 27 + uint32_t(m), DType::kBF16), {m, 384}, DType::kBF16);
    PerTokenGroupQuantOptions o;
    o.column_major_scales = true;
    o.tma_aligned_scales = true;
    const ops::QuantResult tma = ops::per_token_group_quant(cpu_ctx(), x, o);
    const ops::QuantResult row = group_quant(x, 128);
    ASSERT_EQ(tma.scale.shape(), (Shape{m, 3}));
    EXPECT_EQ(tma.scale.strides(), (Shape{1, m_pad}));
    EXPECT_GE(int64_t(tma.scale.storage()->nbytes()), 3 * m_pad * 4);
    EXPECT_EQ(to_floats(tma.scale), to_floats(row.scale));
    EXPECT_EQ(to_bytes(tma.q), to_bytes(row.q));
    const float* raw = static_cast<const float*>(tma.scale.data_ptr());
    const std::vector<float> rs = to_floats(row.scale);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(raw[j * m_pad + r], rs[size_t(r * 3 + j)]);
    }
  }
  PerTokenGroupQuantOptions o;
  o.tma_aligned_scales = true;
  expect_error(
      [&] {
        ops::per_token_group_quant(cpu_ctx(), make_tensor(random_values(256, 28), {2, 128}), o);
      },
      ErrorCode::kInvalidArgument, "per_token_group_quant: `tma_aligned_scales` needs `column_major_scales`");
}

TEST(QuantGroup, Ue8m0ScalesArePowersOfTwoRoundedUp) {
  // max 896 -> s = 2 (a power of two: kept); max 900 -> s = 2.0089 -> 4; max 1 -> 1/448 -> 2^-8.
  const ops::QuantResult r = group_quant(make_tensor({896, 1, 900, 1, 1, 0}, {1, 6}), 2, DType::kE4M3FN, false, true);
  EXPECT_EQ(to_floats(r.scale), (std::vector<float>{2.0f, 4.0f, 0x1p-8f}));
  // 900 / 4 = 225 -> between 224 and 240 (step 16 in [128, 256)): 225 rounds to 224 = 0x76;
  // 1 / 2^-8 = 256 -> 0x78.
  const std::vector<uint8_t> q = to_bytes(r.q);
  EXPECT_EQ(q[2], 0x76);
  EXPECT_EQ(q[4], 0x78);
  expect_matches_spec(make_tensor(random_values(3 * 512, 23), {3, 512}), 128, DType::kE4M3FN, true);
  expect_matches_spec(make_tensor(random_values(3 * 512, 24), {3, 512}), 64, DType::kE4M3FNUZ, true);
}

TEST(QuantGroup, Ue8m0IsExactWhereLog2fRounds) {
  // Find s = amax / 448 just above a power of two for which log2f(s) rounds down to the integer,
  // so exp2f(ceilf(log2f(s))) < s (a scale too small: values would overflow the fp8 range).
  float amax = 0.0f, s = 0.0f;
  for (int e = 2; e < 20 && amax == 0.0f; ++e) {
    for (uint32_t ulps = 1; ulps < 64; ++ulps) {
      const float a = bits_to_float(float_to_bits(448.0f * std::ldexp(1.0f, e)) + ulps);
      const float candidate = a / 448.0f;
      if (std::exp2(std::ceil(std::log2(candidate))) < candidate) {
        amax = a;
        s = candidate;
        break;
      }
    }
  }
  ASSERT_NE(amax, 0.0f) << "no value where log2f rounds to an integer";
  const ops::QuantResult r = group_quant(make_tensor({amax, 1}, {1, 2}), 2, DType::kE4M3FN, false, true);
  const float got = r.scale.item_f32();
  EXPECT_EQ(got, pow2_ceil(s));
  EXPECT_TRUE(got >= s);
  EXPECT_EQ(to_bytes(r.q)[0], spec_cvt(amax / got, DType::kE4M3FN));
}

TEST(QuantGroup, LeadingDimensions) {
  const std::vector<float> v = random_values(2 * 3 * 256, 25);
  const ops::QuantResult r3 = group_quant(make_tensor(v, {2, 3, 256}), 128);
  const ops::QuantResult r2 = group_quant(make_tensor(v, {6, 256}), 128);
  EXPECT_EQ(r3.q.shape(), (Shape{2, 3, 256}));
  EXPECT_EQ(r3.scale.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(to_bytes(r3.q), to_bytes(r2.q));
  EXPECT_EQ(to_floats(r3.scale), to_floats(r2.scale));
  // 1-D input: one row.
  const ops::QuantResult r1 = group_quant(make_tensor({1, -2, 448, 896}, {4}), 2);
  EXPECT_EQ(r1.scale.shape(), (Shape{2}));
  EXPECT_EQ(to_bytes(r1.q), (std::vector<uint8_t>{0x76, 0xFE, 0x76, 0x7E}));
  // Leading dimensions that do not collapse (a transposed pair) are read correctly too.
  const Tensor t = make_tensor(v, {3, 2, 256}).transpose(0, 1);  // [2, 3, 256], strides (256, 512, 1)
  const ops::QuantResult rt = group_quant(t, 128);
  EXPECT_EQ(to_bytes(rt.q), to_bytes(group_quant(t.contiguous(), 128).q));
  EXPECT_EQ(to_floats(rt.scale), to_floats(group_quant(t.contiguous(), 128).scale));
}

TEST(QuantGroup, NonContiguousRowStrideAndPreallocatedOutput) {
  const Tensor big = make_tensor(random_values(4 * 300, 26, DType::kF16), {4, 300}, DType::kF16);
  const Tensor view = big.narrow(1, 10, 256);
  expect_matches_spec(view, 128, DType::kE4M3FN);
  Tensor out = Tensor::empty({4, 256}, DType::kE4M3FN);
  out.fill_bytes_(0xAA);
  PerTokenGroupQuantOptions o;
  o.output = out;
  const ops::QuantResult r = ops::per_token_group_quant(cpu_ctx(), view, o);
  EXPECT_EQ(r.q.storage(), out.storage());
  EXPECT_EQ(to_bytes(out), to_bytes(group_quant(view.contiguous(), 128).q));
}

TEST(QuantGroup, RandomShapesMatchSpec) {
  uint32_t seed = 200;
  for (int64_t g : {1, 3, 64, 128}) {
    for (int64_t groups : {1, 3}) {
      for (DType in : {DType::kF32, DType::kF16, DType::kBF16}) {
        for (DType fp8 : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
          const int64_t rows = 5, k = g * groups;
          expect_matches_spec(make_tensor(random_values(size_t(rows * k), ++seed, in), {rows, k}, in), g, fp8);
        }
      }
    }
  }
  // Enough rows for several threads.
  expect_matches_spec(make_tensor(random_values(600 * 512, 9, DType::kBF16), {600, 512}, DType::kBF16), 128,
                      DType::kE4M3FN);
}

}  // namespace
}  // namespace fp8kit
