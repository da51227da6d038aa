// requantize_with_max_scale (spec 1.11, 2.2 rule 6: the fp16 step) and
// normalize_e4m3fn_to_e4m3fnuz (rule 7): goldens, every code against a per-element scalar
// recomputation, cases where the fp16 step changes the code, the not-loaded sentinel, fnuz bytes.
#include <cfloat>

#include "fp8kit/ops/quant.h"
#include "test_quant_util.h"

namespace fp8kit {
namespace {

using namespace quant_test;

// The spec's formula for one code: dq = f16(float(q) * s_i); q' = cvt(clamp(float(dq) * (1 / s_max))).
uint8_t spec_requant(uint8_t code, float s_i, float s_max, DType fp8) {
  const float dq = f16_to_float(float_to_f16(decode(fp8, code) * s_i));
  if (s_max == 0.0f) return 0;  // fp8kit's H2 rule for a zero per-tensor scale
  return spec_cvt(dq * (1.0f / s_max), fp8);
}

// The same without the fp16 rounding, to show where it matters.
uint8_t requant_without_f16(uint8_t code, float s_i, float s_max, DType fp8) {
  return spec_cvt(decode(fp8, code) * s_i * (1.0f / s_max), fp8);
}

Tensor codes_tensor(const std::vector<uint8_t>& codes, const Shape& shape, DType fp8 = DType::kE4M3FN) {
  Tensor t = Tensor::empty(shape, fp8);
  std::memcpy(t.data_ptr(), codes.data(), codes.size());
  return t;
}

TEST(QuantRequant, Golden) {
  // Shards of 1 and 2 rows with scales [1, 0.5]: s_max = 1. Shard 0 keeps its codes (an fp8
  // value times 1 is exact in f16). Shard 1 halves: 1.0 (0x38) -> 0.5 (0x30), 448 (0x7E) -> 224
  // (0x76), -2 (0xC0) -> -1 (0xB8), 2^-9 (0x01) -> 2^-10, which ties to 0.
  const Tensor w = codes_tensor({0x38, 0x7E, 0x38, 0x7E, 0xC0, 0x01}, {3, 2});
  const ops::RequantizeResult r = ops::requantize_with_max_scale(cpu_ctx(), w, make_tensor({1.0f, 0.5f}, {2}), {1, 2});
  EXPECT_EQ(r.max_scale.dim(), 0);
  EXPECT_EQ(r.max_scale.item_f32(), 1.0f);
  EXPECT_EQ(r.weight.storage(), w.storage());  // in place
  EXPECT_EQ(to_bytes(w), (std::vector<uint8_t>{0x38, 0x7E, 0x30, 0x76, 0xB8, 0x00}));
}

TEST(QuantRequant, EveryCodeMatchesScalarRecomputation) {
  for (DType fp8 : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
    // Three shards (q, k, v of unequal widths) whose rows hold all 256 codes.
    std::vector<uint8_t> codes(256 * 6);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(i % 256);
    const std::vector<float> scales = {0.0131f, 0.00417f, 0.0087f};
    const std::vector<int64_t> widths = {3, 1, 2};
    const Tensor w = codes_tensor(codes, {6, 256}, fp8);
    const ops::RequantizeResult r = ops::requantize_with_max_scale(cpu_ctx(), w, make_tensor(scales, {3}), widths);
    EXPECT_EQ(r.max_scale.item_f32(), 0.0131f);
    const std::vector<uint8_t> got = to_bytes(w);
    for (int64_t row = 0; row < 6; ++row) {
      const float s_i = scales[row < 3 ? 0 : row < 4 ? 1 : 2];
      for (int c = 0; c < 256; ++c) {
        ASSERT_EQ(got[size_t(row * 256 + c)], spec_requant(uint8_t(c), s_i, 0.0131f, fp8))
            << dtype_name(fp8) << " row " << row << " code " << c;
      }
    }
  }
}

TEST(QuantRequant, TheF16StepMatters) {
  // Underflow: 1.0 * 1e-8 is below half the smallest f16 subnormal (2^-24 = 5.96e-8), so the
  // fp16 intermediate is 0 and the code is 0; without it, 1e-8 / 2e-8 = 0.5 would give 0x30.
  {
    const Tensor w = codes_tensor({0x38, 0x38}, {2, 1});
    ops::requantize_with_max_scale(cpu_ctx(), w, make_tensor({1e-8f, 2e-8f}, {2}), {1, 1});
    EXPECT_EQ(to_bytes(w)[0], 0x00);
    EXPECT_EQ(requant_without_f16(0x38, 1e-8f, 2e-8f, DType::kE4M3FN), 0x30);
  }
  // Rounding: search normal-range cases where the f16 rounding moves the value across an fp8
  // rounding boundary.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(0.001f, 0.1f), ratio(1.0f, 3.0f);
  int found = 0;
  for (int trial = 0; trial < 20000 && found < 3; ++trial) {
    const float s_i = dist(rng), s_max = s_i * ratio(rng);
    for (int c = 0x08; c < 0x7F && found < 3; ++c) {  // normal positive codes
      const float dq = decode(DType::kE4M3FN, uint8_t(c)) * s_i;
      if (dq < 6.2e-5f) continue;  // stay in f16's normal range
      const uint8_t with = spec_requant(uint8_t(c), s_i, s_max, DType::kE4M3FN);
      if (with == requant_without_f16(uint8_t(c), s_i, s_max, DType::kE4M3FN)) continue;
      ++found;
      const Tensor w = codes_tensor({0x38, uint8_t(c)}, {2, 1});
      ops::requantize_with_max_scale(cpu_ctx(), w, make_tensor({s_max, s_i}, {2}), {1, 1});
      EXPECT_EQ(to_bytes(w)[1], with) << "code " << c << " s_i " << s_i << " s_max " << s_max;
    }
  }
  EXPECT_EQ(found, 3);
}

TEST(QuantRequant, NotLoadedSentinelSkips) {
  // The last shard's scale still -FLT_MAX: fused on disk, weight untouched; the max is returned.
  const std::vector<uint8_t> codes = {0x38, 0x7E, 0x30, 0x01};
  for (float last : {-FLT_MAX, -448.0f}) {  // the test is "> finfo(e4m3fn).min = -448"
    const Tensor w = codes_tensor(codes, {2, 2});
    const ops::RequantizeResult r = ops::requantize_with_max_scale(cpu_ctx(), w, make_tensor({0.5f, last}, {2}), {1, 1});
    EXPECT_EQ(r.max_scale.item_f32(), 0.5f);
    EXPECT_EQ(to_bytes(w), codes);
  }
  // Just above -448 counts as loaded.
  const Tensor w = codes_tensor(codes, {2, 2});
  ops::requantize_with_max_scale(cpu_ctx(), w, make_tensor({0.5f, 0.25f}, {2}), {1, 1});
  EXPECT_NE(to_bytes(w), codes);
}

TEST(QuantRequant, ZeroAndNaNScales) {
  // All scales 0: s_max = 0, zero codes (the reference would write 448: spec 2.9 H2).
  const Tensor w = codes_tensor({0x38, 0x7E, 0xB0, 0x01}, {2, 2});
  const ops::RequantizeResult r = ops::requantize_with_max_scale(cpu_ctx(), w, make_tensor({0.0f, 0.0f}, {2}), {1, 1});
  EXPECT_EQ(r.max_scale.item_f32(), 0.0f);
  EXPECT_EQ(to_bytes(w), std::vector<uint8_t>(4, 0));
  // A NaN scale makes the max NaN, as torch.max does.
  const Tensor w2 = codes_tensor({0x38, 0x38}, {2, 1});
  const ops::RequantizeResult n = ops::requantize_with_max_scale(cpu_ctx(), w2, make_tensor({NAN, 1.0f}, {2}), {1, 1});
  EXPECT_TRUE(std::isnan(n.max_scale.item_f32()));
}

TEST(QuantRequant, StridedWeightOnlyTouchesTheView) {
  std::vector<uint8_t> codes(4 * 6, 0x38);  // all 1.0
  const Tensor base = codes_tensor(codes, {4, 6});
  const Tensor view = base.narrow(1, 1, 3);  // [4, 3], row stride 6
  ops::requantize_with_max_scale(cpu_ctx(), view, make_tensor({1.0f, 0.5f}, {2}), {2, 2});
  const std::vector<uint8_t> got = to_bytes(base);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) {
      const bool inside = c >= 1 && c < 4;
      EXPECT_EQ(got[size_t(r * 6 + c)], inside && r >= 2 ? 0x30 : 0x38) << r << ", " << c;
    }
  }
}

// ---- normalize_e4m3fn_to_e4m3fnuz ---------------------------------------------------------------

TEST(QuantFnuz, ByteMapAndDoubledScales) {
  const std::vector<uint8_t> codes = {0x00, 0x80, 0x38, 0xB8, 0x7E, 0x01, 0x81, 0x7F};
  const Tensor w = codes_tensor(codes, {2, 4});
  const Tensor ws = make_tensor({0.5f}, {1});
  const Tensor is = make_tensor({3.0f, 0.25f}, {2});
  const ops::FnuzResult r = ops::normalize_e4m3fn_to_e4m3fnuz(cpu_ctx(), w, ws, is);
  EXPECT_EQ(r.weight.dtype(), DType::kE4M3FNUZ);
  EXPECT_EQ(r.weight.shape(), (Shape{2, 4}));
  // Only 0x80 (-0 in fn, NaN in fnuz) changes; the rest keep their bits.
  EXPECT_EQ(to_bytes(r.weight), (std::vector<uint8_t>{0x00, 0x00, 0x38, 0xB8, 0x7E, 0x01, 0x81, 0x7F}));
  EXPECT_EQ(to_floats(r.weight_scale), (std::vector<float>{1.0f}));
  EXPECT_EQ(to_floats(r.input_scale), (std::vector<float>{6.0f, 0.5f}));
  // New tensors: the inputs are unchanged.
  EXPECT_EQ(to_bytes(w), codes);
  EXPECT_EQ(to_floats(ws), (std::vector<float>{0.5f}));
  EXPECT_FALSE(ops::normalize_e4m3fn_to_e4m3fnuz(cpu_ctx(), w, ws).input_scale.defined());
}

TEST(QuantFnuz, DequantizedValuesArePreserved) {
  // Same bits mean half the value in fnuz, and the scale doubles: q * s is unchanged for every
  // finite, non-zero fn code (0x7F/0xFF are NaN in fn; 0x80 is -0 and becomes +0).
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[size_t(c)] = uint8_t(c);
  const ops::FnuzResult r = ops::normalize_e4m3fn_to_e4m3fnuz(cpu_ctx(), codes_tensor(codes, {256}), make_tensor({0.3f}, {1}));
  const std::vector<uint8_t> out = to_bytes(r.weight);
  const float s2 = to_floats(r.weight_scale)[0];
  for (int c = 0; c < 256; ++c) {
    if (c == 0x7F || c == 0xFF) continue;
    EXPECT_EQ(e4m3fnuz_bits_to_float(out[size_t(c)]) * s2, e4m3fn_bits_to_float(uint8_t(c)) * 0.3f + 0.0f) << c;
  }
}

}  // namespace
}  // namespace fp8kit
