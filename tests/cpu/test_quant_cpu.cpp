// The AVX2 activation quantization (src/ops/quant/quant_cpu*.cpp) against the reference, byte
// for byte (codes and scales): scaled_fp8_quant static / dynamic per-tensor / dynamic per-token
// (scale_ub, padding rows), per_token_group_quant (row- and column-major scales, ue8m0, an eps
// that underflows), f32/f16/bf16 in, e4m3fn/e4m3fnuz out, rows of NaN, inf, zeros, subnormals
// and huge values (divisors where the reciprocal-corrected division does not apply), odd K and
// strided rows; and plan_cpu_quant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "fp8kit/half.h"
#include "ops/quant/quant_cpu.h"
#include "ops/quant/quant_ref.h"

namespace fp8kit {
namespace {

// Row r of the test inputs: random normal values at a scale that varies by row, with every
// kind of special value somewhere.
std::vector<float> special_rows(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v(static_cast<size_t>(m * k));
  for (int64_t r = 0; r < m; ++r) {
    const int kind = int(r % 8);
    const float scale = std::ldexp(1.0f, int(r % 13) * 6 - 40);  // 2^-40 .. 2^32
    for (int64_t c = 0; c < k; ++c) {
      float x = nd(rng) * scale;
      if (kind == 1) x = 0.0f;                                     // all zeros
      if (kind == 2 && c % 5 == 0) x = nan;                        // NaN among values
      if (kind == 3 && c == k / 2) x = (c % 2 ? inf : -inf);       // one infinity
      if (kind == 4) x = std::ldexp(nd(rng), -140);                // f32 subnormals
      if (kind == 5 && c % 3 == 0) x = -0.0f;
      if (kind == 6) x = nd(rng) * 3e38f;                          // near f32 max (overflow in f16/bf16)
      if (kind == 7 && c == 0) x = nan;                            // NaN first
      v[size_t(r * k + c)] = x;
    }
  }
  return v;
}

// The values as `dtype` in rows of stride ld (>= k).
std::vector<uint8_t> as_bytes(const std::vector<float>& v, int64_t m, int64_t k, int64_t ld, DType dtype) {
  const size_t es = dtype_size(dtype);
  std::vector<uint8_t> out(size_t(m * ld) * es, 0);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const float x = v[size_t(r * k + c)];
      uint8_t* p = out.data() + size_t(r * ld + c) * es;
      if (dtype == DType::kF32) std::memcpy(p, &x, 4);
      const uint16_t bits16 = dtype == DType::kBF16 ? float_to_bf16(x).bits : float_to_f16(x).bits;
      if (dtype != DType::kF32) std::memcpy(p, &bits16, 2);
    }
  }
  return out;
}

class QuantCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (best_cpu_isa() < CpuIsa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU: the reference is the only CPU path";
  }
  ops::cpu::QuantPlan plan_ = {ops::cpu::QuantKernel::kAvx2, 2, {}};
};

TEST_F(QuantCpu, ScaledFp8QuantMatchesTheReferenceByteForByte) {
  std::mt19937 rng(1);
  int64_t cases = 0;
  for (DType in : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (DType out : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
      for (const auto& shape : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {17, 31}, {8, 32}, {9, 33}, {16, 100}, {13, 4096}}) {
        const int64_t m = shape.first, k = shape.second;  // not a structured binding: lambdas capture these
        const std::vector<float> v = special_rows(m, k, rng);
        const int64_t ld = k + 3;
        const std::vector<uint8_t> x = as_bytes(v, m, k, ld, in);
        for (int mode = 0; mode < 5; ++mode) {  // static, static 0, per-tensor, per-token, per-token + ub
          const int64_t out_rows = mode == 3 ? m + 2 : m;  // padding rows in per-token mode
          std::vector<uint8_t> q_ref(size_t(out_rows * k), 0xaa), q_fast(size_t(out_rows * k), 0x55);
          std::vector<float> s_ref(size_t(out_rows), 7.0f), s_fast(size_t(out_rows), 9.0f);
          const float ub = 0.5f;
          auto args = [&](std::vector<uint8_t>& q, std::vector<float>& s) {
            ops::ScaledFp8QuantArgs a;
            a.input = x.data();
            a.in_dtype = in;
            a.m = m;
            a.k = k;
            a.input_row_stride = ld;
            a.out = q.data();
            a.out_dtype = out;
            a.out_rows = out_rows;
            a.out_row_stride = k;
            a.scale = s.data();
            a.fp8_max = out == DType::kE4M3FN ? 448.0f : 224.0f;
            a.min_scaling_factor = 1.0f / (a.fp8_max * 512.0f);
            a.mode = mode <= 1 ? ops::ScaledQuantMode::kStatic
                     : mode == 2 ? ops::ScaledQuantMode::kDynamicPerTensor
                                 : ops::ScaledQuantMode::kDynamicPerToken;
            if (mode <= 1) s[0] = mode == 0 ? 0.0123f : 0.0f;
            if (mode == 4) a.scale_ub = &ub;
            return a;
          };
          ops::scaled_fp8_quant_ref(args(q_ref, s_ref));
          ops::cpu::run_scaled_fp8_quant(args(q_fast, s_fast), plan_);
          EXPECT_EQ(std::memcmp(q_ref.data(), q_fast.data(), q_ref.size()), 0)
              << dtype_name(in) << "->" << dtype_name(out) << " " << m << "x" << k << " mode " << mode;
          const size_t scales = mode == 3 || mode == 4 ? size_t(out_rows) : 1;
          EXPECT_EQ(std::memcmp(s_ref.data(), s_fast.data(), scales * 4), 0)
              << dtype_name(in) << "->" << dtype_name(out) << " " << m << "x" << k << " mode " << mode;
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 2 * 7 * 5);
}

TEST_F(QuantCpu, PerTokenGroupQuantMatchesTheReferenceByteForByte) {
  std::mt19937 rng(2);
  for (DType in : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (DType out : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
      for (const auto& shape : std::vector<std::array<int64_t, 3>>{{1, 16, 16}, {5, 48, 16}, {17, 256, 128}, {9, 384, 128}, {3, 70, 7}}) {
        const int64_t m = shape[0], k = shape[1], g = shape[2];  // lambdas capture these
        for (int variant = 0; variant < 4; ++variant) {  // row-major, column-major, ue8m0, eps underflow
          const std::vector<float> v = special_rows(m, k, rng);
          const int64_t ld = k + 1;
          const std::vector<uint8_t> x = as_bytes(v, m, k, ld, in);
          const int64_t groups = k / g;
          std::vector<uint8_t> q_ref(size_t(m * k), 0xaa), q_fast(size_t(m * k), 0x55);
          std::vector<float> s_ref(size_t(m * groups), 7.0f), s_fast(size_t(m * groups), 9.0f);
          auto args = [&](std::vector<uint8_t>& q, std::vector<float>& s) {
            ops::PerTokenGroupQuantArgs a;
            a.input = x.data();
            a.in_dtype = in;
            a.rows = m;
            a.k = k;
            a.input_row_stride = ld;
            a.out = q.data();
            a.out_dtype = out;
            a.out_row_stride = k;
            a.scale = s.data();
            a.scale_row_stride = variant == 1 ? 1 : groups;
            a.scale_group_stride = variant == 1 ? m : 1;
            a.group_size = g;
            a.eps = variant == 3 ? std::numeric_limits<float>::denorm_min() : 1e-10f;
            a.fp8_max = out == DType::kE4M3FN ? 448.0f : 224.0f;
            a.use_ue8m0 = variant == 2;
            return a;
          };
          ops::per_token_group_quant_ref(args(q_ref, s_ref));
          ops::cpu::run_per_token_group_quant(args(q_fast, s_fast), plan_);
          EXPECT_EQ(std::memcmp(q_ref.data(), q_fast.data(), q_ref.size()), 0)
              << dtype_name(in) << "->" << dtype_name(out) << " " << m << "x" << k << "/" << g << " variant " << variant;
          EXPECT_EQ(std::memcmp(s_ref.data(), s_fast.data(), s_ref.size() * 4), 0)
              << dtype_name(in) << "->" << dtype_name(out) << " " << m << "x" << k << "/" << g << " variant " << variant;
        }
      }
    }
  }
}

// Every 16-bit pattern, 128 consecutive ones a row (each row its own per-token scale, the
// per-tensor scale over all): the vector paths see every value, NaNs, infinities and both zeros.
TEST_F(QuantCpu, EveryF16AndBf16BitPattern) {
  for (DType in : {DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> x(65536);
    for (uint32_t b = 0; b < 65536; ++b) x[b] = uint16_t(b);
    for (auto mode : {ops::ScaledQuantMode::kDynamicPerToken, ops::ScaledQuantMode::kDynamicPerTensor}) {
      std::vector<uint8_t> q_ref(x.size()), q_fast(x.size());
      std::vector<float> s_ref(512), s_fast(512);
      auto args = [&](std::vector<uint8_t>& q, std::vector<float>& s) {
        ops::ScaledFp8QuantArgs a;
        a.input = x.data();
        a.in_dtype = in;
        a.m = a.out_rows = 512;
        a.k = a.input_row_stride = a.out_row_stride = 128;
        a.out = q.data();
        a.scale = s.data();
        a.mode = mode;
        return a;
      };
      ops::scaled_fp8_quant_ref(args(q_ref, s_ref));
      ops::cpu::run_scaled_fp8_quant(args(q_fast, s_fast), plan_);
      EXPECT_EQ(std::memcmp(q_ref.data(), q_fast.data(), q_ref.size()), 0) << dtype_name(in) << " mode " << int(mode);
      EXPECT_EQ(std::memcmp(s_ref.data(), s_fast.data(), s_ref.size() * 4), 0) << dtype_name(in) << " mode " << int(mode);
    }
  }
}

TEST(QuantCpuPlan, ReferenceWhenAskedOrWithoutAvx2AndThreadsByWork) {
  using ops::cpu::QuantKernel;
  Overrides reference;
  reference.cpu_backend = CpuBackend::kReference;
  EXPECT_EQ(ops::cpu::plan_cpu_quant({512, 4096, CpuIsa::kAvx2, 2}, reference).kernel, QuantKernel::kReference);
  EXPECT_EQ(ops::cpu::plan_cpu_quant({512, 4096, CpuIsa::kPortable, 2}, {}).kernel, QuantKernel::kReference);
  EXPECT_EQ(ops::cpu::plan_cpu_quant({4, 0, CpuIsa::kAvx2, 2}, {}).kernel, QuantKernel::kReference);  // empty rows
  EXPECT_EQ(ops::cpu::plan_cpu_quant({0, 64, CpuIsa::kAvx2, 2}, {}).kernel, QuantKernel::kReference);
  const ops::cpu::QuantPlan big = ops::cpu::plan_cpu_quant({512, 4096, CpuIsa::kAvx2, 2}, {});
  EXPECT_EQ(big.kernel, QuantKernel::kAvx2);
  EXPECT_EQ(big.threads, 2);
  EXPECT_EQ(ops::cpu::plan_cpu_quant({1, 576, CpuIsa::kAvx2, 2}, {}).threads, 1);
  EXPECT_EQ(ops::cpu::plan_cpu_quant({3, 1 << 20, CpuIsa::kAvx2, 16}, {}).threads, 3);  // no more than the rows
}

}  // namespace
}  // namespace fp8kit
