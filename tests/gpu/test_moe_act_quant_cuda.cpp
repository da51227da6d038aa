// The fused MoE activation + requantization (src/ops/moe/moe_act_quant_cuda.h) against the two
// ops it replaces, run on the GPU one after the other (silu_and_mul / gelu_and_mul, then
// scaled_fp8_quant or per_token_group_quant): bit-exact codes and scales for bf16 and f16, both
// activations, static / dynamic per-tensor and 128-column group scales, a bound on the rows in
// use (rows past it stay untouched), NaN and special values. And SiLU's fast path
// (activation_math.cuh) against the double evaluation it stands for, on every 16-bit gate.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "fp8kit/ops/moe_experts.h"
#include "fp8kit/ops/quant.h"
#include "gpu_test_util.h"
#include "ops/moe/moe_act_quant_cuda.h"

namespace fp8kit {
namespace {

using namespace gpu_test;

const Device kGpu = Device::cuda(0);

const char* scaling_name(ops::ActQuantScaling s) {
  switch (s) {
    case ops::ActQuantScaling::kStaticTensor: return "static per-tensor";
    case ops::ActQuantScaling::kDynamicTensor: return "dynamic per-tensor";
    default: return "group 128";
  }
}

// The two ops on the GPU over the first `used` rows: codes [used, d] and scale(s).
ops::QuantResult two_ops(bool silu, const Tensor& x, int64_t used, ops::ActQuantScaling scaling, const Tensor& static_scale) {
  const Tensor xs = x.narrow(0, 0, used);
  const Tensor y = silu ? ops::silu_and_mul(ctx_of(xs), xs) : ops::gelu_and_mul(ctx_of(xs), xs);
  if (scaling == ops::ActQuantScaling::kGroup128) {
    ops::PerTokenGroupQuantOptions o;
    o.group_size = 128;
    return ops::per_token_group_quant(ctx_of(y), y, o);
  }
  ops::ScaledFp8QuantOptions o;
  if (scaling == ops::ActQuantScaling::kStaticTensor) o.scale = static_scale;
  return ops::scaled_fp8_quant(ctx_of(y), y, o);
}

// one_launch (dynamic per-tensor): the caller zeroes the scale and a grid counter, and the two
// passes run as one launch with a grid barrier where they fit one wave (y is then not written).
void check_fused(bool silu, DType dtype, ops::ActQuantScaling scaling, int64_t rows, int64_t d, int64_t used,
                 bool specials, bool one_launch = false) {
  const uint32_t seed = next_seed();
  const Case c{silu ? "silu act_and_quant" : "gelu act_and_quant", {rows, 2 * d}, dtype, DType::kE4M3FN, seed,
               std::string(scaling_name(scaling)) + ", rows in use " + std::to_string(used) +
                   (one_launch ? ", one launch" : "")};
  Tensor host_x = random_tensor({rows, 2 * d}, dtype, seed, 3.0f);
  if (specials) {
    const float values[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 88.7f, -88.7f, 1e-30f, -104.0f, -79.9f, -80.1f, 30.0f};
    for (int i = 0; i < 12; ++i) store_float(host_x, (i * 37) % host_x.numel(), values[i]);
  }
  const Tensor x = host_x.to(kGpu);
  const Tensor static_scale = Tensor::from_vector(std::vector<float>{0.0625f}).to(kGpu);
  const ops::QuantResult want = two_ops(silu, x, used, scaling, static_scale);

  const Tensor q = poisoned({rows, d}, DType::kE4M3FN, kGpu, kPoisonCodes);
  const Tensor y = poisoned({rows, d}, dtype, kGpu, 0xFF);
  const bool group = scaling == ops::ActQuantScaling::kGroup128;
  // One launch: [scale, counter], zeroed.
  const Tensor scale = one_launch ? Tensor::from_vector(std::vector<float>{0.0f, 0.0f}).to(kGpu)
                                  : poisoned({group ? rows : 1, group ? d / 128 : 1}, DType::kF32, kGpu, kPoisonScales);
  const Tensor used_dev = Tensor::from_vector(std::vector<int32_t>{int32_t(used)}).to(kGpu);
  ops::ActQuantArgs a;
  a.act.rows = rows;
  a.act.d = d;
  a.act.x = x.data_ptr();
  a.act.ldx = 2 * d;
  a.act.out = y.data_ptr();
  a.act.ldo = d;
  a.act.dtype = dtype;
  a.act.activation = silu ? ops::GatedActivation::kSilu : ops::GatedActivation::kGelu;
  a.rows_in_use = used < rows ? static_cast<const int32_t*>(used_dev.data_ptr()) : nullptr;
  a.scaling = scaling;
  a.q = static_cast<uint8_t*>(q.data_ptr());
  a.ldq = d;
  a.static_scale = static_cast<const float*>(static_scale.data_ptr());
  a.scale = static_cast<float*>(scale.data_ptr());
  if (one_launch) {
    ASSERT_TRUE(ops::act_and_quant_two_pass(rows, d) && ops::act_and_quant_one_wave(rows, d)) << c.str();
    a.scale_zeroed = true;
    a.grid_counter = static_cast<uint32_t*>(scale.data_ptr()) + 1;
  }
  ASSERT_EQ(ops::act_and_quant_rejects(a), "") << c.str();
  ops::act_and_quant_cuda(a, Stream{});

  expect_same_tensor(c, "codes", q.narrow(0, 0, used), want.q);
  if (group) {
    expect_same_tensor(c, "scales", scale.narrow(0, 0, used), want.scale);
  } else if (scaling == ops::ActQuantScaling::kDynamicTensor) {
    expect_same_tensor(c, "scale", scale.narrow(0, 0, 1).view({1}), want.scale.view({1}));
  }
  if (one_launch) {  // y stayed in registers
    size_t written = 0;
    for (uint8_t b : raw_bytes(y)) written += b != 0xFF;
    EXPECT_EQ(written, 0u) << c.str() << ": the one-launch form wrote y";
  }
  if (used < rows) {  // untouched past the rows in use
    const std::vector<uint8_t> tail = raw_bytes(q.narrow(0, used, rows - used));
    size_t written = 0;
    for (uint8_t b : tail) written += b != kPoisonCodes;
    EXPECT_EQ(written, 0u) << c.str() << ": codes written past the rows in use";
    if (group) {
      const std::vector<uint8_t> s_tail = raw_bytes(scale.narrow(0, used, rows - used));
      size_t s_written = 0;
      for (uint8_t b : s_tail) s_written += b != kPoisonScales;
      EXPECT_EQ(s_written, 0u) << c.str() << ": scales written past the rows in use";
    }
  }
}

TEST(MoeActQuantCuda, MatchesActivationThenQuantization) {
  for (const bool silu : {true, false}) {
    for (const DType dtype : {DType::kBF16, DType::kF16}) {
      for (const auto scaling : {ops::ActQuantScaling::kStaticTensor, ops::ActQuantScaling::kDynamicTensor,
                                 ops::ActQuantScaling::kGroup128}) {
        // Dynamic per-tensor: up to 8,192 elements one block ({2, 4096} the largest), then two passes
        // (or one launch over a wave of blocks).
        for (const auto& [rows, d] : std::vector<std::pair<int64_t, int64_t>>{
                 {1, 128}, {3, 256}, {2, 4096}, {3, 2816}, {129, 768}, {300, 2048}}) {
          check_fused(silu, dtype, scaling, rows, d, rows, false);
          if (scaling == ops::ActQuantScaling::kDynamicTensor && ops::act_and_quant_two_pass(rows, d) &&
              ops::act_and_quant_one_wave(rows, d)) {
            check_fused(silu, dtype, scaling, rows, d, rows, false, true);
          }
        }
      }
    }
  }
}

TEST(MoeActQuantCuda, RowsInUseAndSpecialValues) {
  for (const bool silu : {true, false}) {
    for (const DType dtype : {DType::kBF16, DType::kF16}) {
      for (const auto scaling : {ops::ActQuantScaling::kStaticTensor, ops::ActQuantScaling::kDynamicTensor,
                                 ops::ActQuantScaling::kGroup128}) {
        check_fused(silu, dtype, scaling, 384, 1408, 256, true);
        check_fused(silu, dtype, scaling, 130, 256, 0, false);
        check_fused(silu, dtype, scaling, 8, 512, 5, true);  // one block (dynamic per-tensor)
        check_fused(silu, dtype, scaling, 64, 14336, 64, true);
        if (scaling == ops::ActQuantScaling::kDynamicTensor) {
          check_fused(silu, dtype, scaling, 384, 1408, 256, true, true);
          check_fused(silu, dtype, scaling, 130, 256, 0, false, true);
          check_fused(silu, dtype, scaling, 32, 14336, 32, true, true);  // Mixtral-8x7B at M = 16
        }
      }
    }
  }
}

TEST(MoeActQuantCuda, RejectsWhatItCannotServe) {
  ops::ActQuantArgs a;
  alignas(16) static uint8_t buffer[64];
  a.act.rows = 4;
  a.act.d = 24;
  a.act.x = buffer;
  a.act.ldx = 48;
  a.act.out = buffer;
  a.act.ldo = 24;
  a.q = buffer;
  a.ldq = 24;
  EXPECT_NE(ops::act_and_quant_rejects(a), "");  // d not a multiple of 16
  a.act.d = 32, a.act.ldx = 64, a.act.ldo = 32, a.ldq = 32;
  EXPECT_EQ(ops::act_and_quant_rejects(a), "");
  a.scaling = ops::ActQuantScaling::kGroup128;
  EXPECT_NE(ops::act_and_quant_rejects(a), "");  // groups of 128
  a.scaling = ops::ActQuantScaling::kStaticTensor;
  a.ldq = 40;
  EXPECT_NE(ops::act_and_quant_rejects(a), "");  // code rows not 16-byte aligned
  a.ldq = 32;
  a.act.dtype = DType::kF32;
  EXPECT_NE(ops::act_and_quant_rejects(a), "");  // f32 in: the two ops
  a.act.dtype = DType::kBF16;
  a.q_dtype = DType::kE4M3FNUZ;
  EXPECT_NE(ops::act_and_quant_rejects(a), "");
}

// silu_and_mul on every 16-bit gate pattern, once with up = 1 (the output is T(silu(g)) itself)
// and once with ups that exercise the product's rounding (random, tiny, huge, inf, NaN): the
// result must be the double evaluation's, T(T(x / (1 + float(exp(-double(x))))) * up), which the
// fast path (activation_math.cuh) claims to reproduce. NaN matches NaN.
TEST(MoeActQuantCuda, SiluFastPathIsTheDoubleEvaluationOnEveryGate) {
  const float specials[] = {1.0f, -0.0f, 65504.0f, 1e-7f, 3e38f, std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (const DType dtype : {DType::kBF16, DType::kF16}) {
    const bool bf16 = dtype == DType::kBF16;
    auto to_t = [&](float v) { return bf16 ? bf16_to_float(float_to_bf16(v)) : f16_to_float(float_to_f16(v)); };
    for (const bool unit_up : {true, false}) {
      const uint32_t seed = next_seed();
      // Rows of 8 gates and their 8 ups (d = 8: the kernel's 16-byte path, which takes the fast path).
      Tensor x = Tensor::empty({8192, 16}, dtype);
      const Tensor ups = random_tensor({65536}, dtype, seed, 4.0f);
      for (int64_t i = 0; i < 65536; ++i) {
        float up = unit_up ? 1.0f : (i % 16 < 7 ? specials[i % 16] : (bf16 ? bf16_to_float(ups.data<BFloat16>()[i]) : f16_to_float(ups.data<Float16>()[i])));
        const int64_t gate_at = (i / 8) * 16 + i % 8, up_at = gate_at + 8;
        if (bf16) {
          x.data<BFloat16>()[gate_at] = BFloat16{uint16_t(i)};
          x.data<BFloat16>()[up_at] = float_to_bf16(up);
        } else {
          x.data<Float16>()[gate_at] = Float16{uint16_t(i)};
          x.data<Float16>()[up_at] = float_to_f16(up);
        }
      }
      const Tensor got = to_host(ops::silu_and_mul(ctx_of(x.to(kGpu)), x.to(kGpu)));
      int64_t differ = 0, first = -1;
      for (int64_t i = 0; i < 65536; ++i) {
        const int64_t gate_at = (i / 8) * 16 + i % 8, up_at = gate_at + 8;
        const float g = bf16 ? bf16_to_float(x.data<BFloat16>()[gate_at]) : f16_to_float(x.data<Float16>()[gate_at]);
        const float up = bf16 ? bf16_to_float(x.data<BFloat16>()[up_at]) : f16_to_float(x.data<Float16>()[up_at]);
        const float e = float(std::exp(-double(g)));
        const volatile float denom = 1.0f + e;  // two rounded f32 operations, as the kernel
        const volatile float act = to_t(g / denom);
        const float want = to_t(act * up);
        const float have = bf16 ? bf16_to_float(got.data<BFloat16>()[i]) : f16_to_float(got.data<Float16>()[i]);
        const bool same = (std::isnan(want) && std::isnan(have)) || std::memcmp(&want, &have, 4) == 0;
        if (!same && differ++ == 0) first = i;
      }
      EXPECT_EQ(differ, 0) << dtype_name(dtype) << (unit_up ? " (up = 1)" : " (random up)") << ": " << differ
                           << " gates differ, first pattern 0x" << std::hex << first;
    }
  }
}

}  // namespace
}  // namespace fp8kit
