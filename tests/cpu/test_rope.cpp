// RoPE on the CPU (src/ops/rope/): inverse frequencies, attention factors and cos/sin of every
// rope_scaling kind against goldens computed with numpy by tests/cpu/rope_goldens.py (its output
// pasted below), the rotation itself (neox and GPT-J pairs, f32 and bf16 roundings, partial
// rotary dims, in and out of place, strided q/k), and the argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/parallel.h"
#include "expect_error.h"
#include "fp8kit/ops/rope.h"
#include "fp8kit/platform.h"
#include "ops_test_util.h"
#include "reference_context.h"

namespace fp8kit {
namespace {

using ops::RopeConfig;
using ops::RopeType;
using ops_test::make_tensor;
using ops_test::to_floats;
using testing::expect_error;
using testing::expect_invalid;

struct GoldenPosition {
  int64_t position;
  std::vector<float> cos, sin;
};

// Checks inv_freq[indices] and cos/sin at the positions. inv_freq within 2^-22 relative (an ulp
// of a platform's pow); cos/sin within 2^-21 plus what one ulp of inv_freq moves the angle.
void check_golden(const RopeConfig& c, int64_t dynamic_seq_len, const std::vector<int64_t>& indices,
                  const std::vector<float>& inv, float attention_factor, const std::vector<GoldenPosition>& positions) {
  ForwardContext ctx;
  const ops::RopeFrequencies f = ops::rope_frequencies(c, dynamic_seq_len);
  ASSERT_EQ(int64_t(f.inv_freq.size()), c.rotary_dim / 2);
  EXPECT_EQ(f.attention_factor, attention_factor);
  for (size_t k = 0; k < indices.size(); ++k) {
    const float got = f.inv_freq[size_t(indices[k])];
    EXPECT_TRUE(std::fabs(got - inv[k]) <= std::ldexp(std::fabs(inv[k]), -22))
        << "inv_freq[" << indices[k] << "] = " << got;
  }
  std::vector<int64_t> pos;
  for (const auto& p : positions) pos.push_back(p.position);
  const ops::RopeCosSin cs = ops::rope_cos_sin(ctx, c, Tensor::from_vector(pos), dynamic_seq_len);
  const int64_t half = c.rotary_dim / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (size_t k = 0; k < indices.size(); ++k) {
      const int64_t i = indices[k];
      const double tol = std::ldexp(1.0, -21) + double(positions[t].position) * double(inv[k]) * std::ldexp(1.0, -23);
      const float got_c = cs.cos.data<float>()[int64_t(t) * half + i],
                  got_s = cs.sin.data<float>()[int64_t(t) * half + i];
      EXPECT_TRUE(std::fabs(got_c - positions[t].cos[k]) <= tol)
          << "cos pos " << positions[t].position << " i " << i << ": " << got_c;
      EXPECT_TRUE(std::fabs(got_s - positions[t].sin[k]) <= tol)
          << "sin pos " << positions[t].position << " i " << i << ": " << got_s;
    }
  }
}

RopeConfig config(RopeType type, int64_t dim, double theta, double factor = 1.0) {
  RopeConfig c;
  c.type = type;
  c.head_dim = c.rotary_dim = dim;
  c.theta = theta;
  c.factor = factor;
  return c;
}

TEST(RopeFrequencies, DefaultGolden) {
  check_golden(config(RopeType::kDefault, 8, 1e4), 0, {0, 1, 2, 3},
               {0x1.0000000000000p+0f, 0x1.99999a0000000p-4f, 0x1.47ae140000000p-7f, 0x1.0624de0000000p-10f}, 1.0f,
               {{0, {1, 1, 1, 1}, {0, 0, 0, 0}},
                {1,
                 {0x1.14a2800000000p-1f, 0x1.fd71300000000p-1f, 0x1.fff9720000000p-1f, 0x1.fffff00000000p-1f},
                 {0x1.aed5480000000p-1f, 0x1.98eaee0000000p-4f, 0x1.47acae0000000p-7f, 0x1.0624dc0000000p-10f}},
                {5,
                 {0x1.2278580000000p-2f, 0x1.c152800000000p-1f, 0x1.ff5c320000000p-1f, 0x1.fffe5c0000000p-1f},
                 {-0x1.eaf8200000000p-1f, 0x1.eaee880000000p-2f, 0x1.996de80000000p-5f, 0x1.47adbc0000000p-8f}},
                {1000,
                 {0x1.1ff0260000000p-1f, 0x1.b981dc0000000p-1f, -0x1.ad9ac80000000p-1f, 0x1.14a2800000000p-1f},
                 {0x1.a75cc20000000p-1f, -0x1.03425c0000000p-1f, -0x1.1689f00000000p-1f, 0x1.aed5480000000p-1f}}});
}

TEST(RopeFrequencies, LinearGolden) {
  check_golden(config(RopeType::kLinear, 8, 1e4, 4.0), 0, {0, 1, 2, 3},
               {0x1.0000000000000p-2f, 0x1.99999a0000000p-6f, 0x1.47ae140000000p-9f, 0x1.0624de0000000p-12f}, 1.0f,
               {{1,
                 {0x1.f0154a0000000p-1f, 0x1.ffd70a0000000p-1f, 0x1.ffff980000000p-1f, 0x1.fffffe0000000p-1f},
                 {0x1.faaeee0000000p-3f, 0x1.998eae0000000p-6f, 0x1.47adfe0000000p-9f, 0x1.0624de0000000p-12f}},
                {1000,
                 {0x1.ed8b460000000p-3f, 0x1.fb7ef00000000p-1f, -0x1.9a2f7e0000000p-1f, 0x1.f0154a0000000p-1f},
                 {-0x1.f0e90c0000000p-1f, -0x1.0f0e700000000p-3f, 0x1.326af00000000p-1f, 0x1.faaeee0000000p-3f}}});
}

TEST(RopeFrequencies, DynamicNtkGolden) {
  RopeConfig c = config(RopeType::kDynamic, 8, 1e4, 2.0);
  c.max_position_embeddings = 16;
  // HF at seq_len 40 > max_position_embeddings: base 1e4 * (2 * 40 / 16 - 1)^(8 / 6).
  check_golden(c, 40, {0, 1, 2, 3},
               {0x1.0000000000000p+0f, 0x1.0208260000000p-4f, 0x1.04146e0000000p-8f, 0x1.0624de0000000p-12f}, 1.0f,
               {{1,
                 {0x1.14a2800000000p-1f, 0x1.fefc020000000p-1f, 0x1.fffef80000000p-1f, 0x1.fffffe0000000p-1f},
                 {0x1.aed5480000000p-1f, 0x1.01dc780000000p-4f, 0x1.0414420000000p-8f, 0x1.0624de0000000p-12f}},
                {39,
                 {0x1.110ad80000000p-2f, -0x1.8c95a80000000p-1f, 0x1.f9e1440000000p-1f, 0x1.fff9c60000000p-1f},
                 {0x1.ed76960000000p-1f, 0x1.43d4000000000p-1f, 0x1.3bb5540000000p-3f, 0x1.3f7ba20000000p-7f}}});
  // Up to max_position_embeddings (and vLLM's fixed table, dynamic_seq_len 0) the base is unchanged.
  EXPECT_EQ(ops::rope_frequencies(c, 0).inv_freq, ops::rope_frequencies(config(RopeType::kDefault, 8, 1e4)).inv_freq);
  EXPECT_EQ(ops::rope_frequencies(c, 16).inv_freq, ops::rope_frequencies(c, 3).inv_freq);
}

TEST(RopeFrequencies, Llama3Golden) {
  // Llama 3.1: high frequencies (i <= 28) unchanged, low ones (i >= 36) divided by 8, the
  // medium band (29..35) interpolated.
  RopeConfig c = config(RopeType::kLlama3, 128, 500000.0, 8.0);
  c.low_freq_factor = 1.0, c.high_freq_factor = 4.0, c.original_max_position_embeddings = 8192;
  check_golden(c, 0, {0, 28, 29, 32, 35, 36, 63},
               {0x1.0000000000000p+0f, 0x1.a4ee400000000p-9f, 0x1.1bfa0c0000000p-9f, 0x1.132ba40000000p-11f,
                0x1.90d10c0000000p-14f, 0x1.46831a0000000p-14f, 0x1.4985fe0000000p-22f},
               1.0f,
               {{1,
                 {0x1.14a2800000000p-1f, 0x1.ffff520000000p-1f, 0x1.ffffb20000000p-1f, 0x1.fffffc0000000p-1f, 1, 1, 1},
                 {0x1.aed5480000000p-1f, 0x1.a4ee100000000p-9f, 0x1.1bf9fe0000000p-9f, 0x1.132ba40000000p-11f,
                  0x1.90d10c0000000p-14f, 0x1.46831a0000000p-14f, 0x1.4985fe0000000p-22f}},
                {9000,
                 {-0x1.938c240000000p-1f, -0x1.9e1b860000000p-1f, 0x1.97b99a0000000p-1f, 0x1.6fd2200000000p-7f,
                  0x1.4e066a0000000p-1f, 0x1.87651c0000000p-1f, 0x1.ffff800000000p-1f},
                 {0x1.3b1bd20000000p-1f, -0x1.2d18a60000000p-1f, 0x1.35af2a0000000p-1f, -0x1.fff7be0000000p-1f,
                  0x1.8408fe0000000p-1f, 0x1.4a14f00000000p-1f, 0x1.6a06580000000p-9f}}});
}

TEST(RopeFrequencies, YarnGoldens) {
  // Qwen-style: factor 4 from 32768, attention factor 0.1 ln 4 + 1.
  RopeConfig c = config(RopeType::kYarn, 128, 1e6, 4.0);
  c.original_max_position_embeddings = 32768;
  check_golden(c, 0, {0, 10, 20, 30, 40, 50, 63},
               {0x1.0000000000000p+0f, 0x1.d8ffac0000000p-4f, 0x1.b4f7e40000000p-7f, 0x1.17040e0000000p-10f,
                0x1.74eea60000000p-15f, 0x1.58863a0000000p-18f, 0x1.4d1c980000000p-22f},
               0x1.237d380000000p+0f,
               {{1,
                 {0x1.3afc080000000p-1f, 0x1.218c3a0000000p+0f, 0x1.2376960000000p+0f, 0x1.237d2c0000000p+0f,
                  0x1.237d380000000p+0f, 0x1.237d380000000p+0f, 0x1.237d380000000p+0f},
                 {0x1.ea8f2e0000000p-1f, 0x1.0cafe20000000p-3f, 0x1.f187c00000000p-7f, 0x1.3db2120000000p-10f,
                  0x1.a8a1b00000000p-15f, 0x1.8849180000000p-18f, 0x1.7b4a700000000p-22f}},
                {70000,
                 {0x1.4ac14a0000000p-1f, -0x1.1ff07a0000000p+0f, -0x1.0b18ca0000000p+0f, 0x1.6d975e0000000p-1f,
                  -0x1.235c860000000p+0f, 0x1.10de640000000p+0f, 0x1.236ba00000000p+0f},
                 {-0x1.e011460000000p-1f, -0x1.6ad1c40000000p-3f, -0x1.d2e8800000000p-2f, -0x1.c619900000000p-1f,
                  0x1.1417920000000p-5f, 0x1.9a0ba40000000p-2f, 0x1.95182c0000000p-6f}}});
  // DeepSeek-style mscale / mscale_all_dim, an unfloored correction range.
  RopeConfig d = config(RopeType::kYarn, 64, 1e4, 40.0);
  d.original_max_position_embeddings = 4096;
  d.mscale = 1.0, d.mscale_all_dim = 0.5, d.truncate = false;
  check_golden(d, 0, {0, 5, 11, 17, 31},
               {0x1.0000000000000p+0f, 0x1.e5a8460000000p-3f, 0x1.4ab0f60000000p-5f, 0x1.cf5f940000000p-9f,
                0x1.bf749e0000000p-19f},
               0x1.27dd660000000p+0f,
               {{3,
                 {-0x1.24e76a0000000p+0f, 0x1.c0333c0000000p-1f, 0x1.25b2ac0000000p+0f, 0x1.27d9220000000p+0f,
                  0x1.27dd660000000p+0f},
                 {0x1.4e05020000000p-3f, 0x1.8257b80000000p-1f, 0x1.1df0b40000000p-3f, 0x1.91a3fe0000000p-7f,
                  0x1.83d9c40000000p-17f}}});
  // An explicit attention_factor and betas.
  RopeConfig e = config(RopeType::kYarn, 16, 1e4, 2.0);
  e.original_max_position_embeddings = 2048;
  e.beta_fast = 8, e.beta_slow = 2, e.attention_factor = 1.25;
  check_golden(e, 0, {0, 1, 2, 3, 4, 5, 6, 7},
               {0x1.0000000000000p+0f, 0x1.43d1360000000p-2f, 0x1.99999a0000000p-4f, 0x1.030dc60000000p-5f,
                0x1.eb851e0000000p-8f, 0x1.9e7c700000000p-10f, 0x1.0624de0000000p-11f, 0x1.4b96c00000000p-13f},
               1.25f,
               {{5,
                 {0x1.6b166e0000000p-2f, -0x1.a79f460000000p-7f, 0x1.18d3900000000p+0f, 0x1.3c02220000000p+0f,
                  0x1.3fc6680000000p+0f, 0x1.3ffd700000000p+0f, 0x1.3fffc00000000p+0f, 0x1.3ffffa0000000p+0f},
                 {-0x1.32db140000000p+0f, 0x1.3ffb9e0000000p+0f, 0x1.32d5140000000p-1f, 0x1.93164e0000000p-3f,
                  0x1.7fe8f40000000p-5f, 0x1.43d05c0000000p-7f, 0x1.9999800000000p-9f, 0x1.030dc40000000p-10f}}});
}

// apply_rope on one token of one head.
std::vector<float> rotate(const std::vector<float>& x, int64_t position, bool neox, DType dt, int64_t head_dim,
                          int64_t rotary_dim) {
  ForwardContext ctx;
  RopeConfig c = config(RopeType::kDefault, head_dim, 1e4);
  c.rotary_dim = rotary_dim;
  c.is_neox_style = neox;
  Tensor q = make_tensor(x, {1, 1, head_dim}, dt);
  ops::apply_rope(ctx, c, Tensor::from_vector<int64_t>({position}), q, Tensor());
  return to_floats(q);
}

TEST(ApplyRope, HandComputedPairs) {
  // x = (1, 2, 3, 4) at position 1: neox rotates (0, 2) by angle 1 and (1, 3) by 0.01; GPT-J
  // (0, 1) by 1 and (2, 3) by 0.01 (rope_goldens.py).
  EXPECT_EQ(rotate({1, 2, 3, 4}, 1, true, DType::kF32, 4, 4),
            (std::vector<float>{-0x1.fbeeac0000000p+0f, 0x1.f5bc0c0000000p+0f, 0x1.3b2f320000000p+1f,
                                0x1.0144660000000p+2f}));
  EXPECT_EQ(rotate({1, 2, 3, 4}, 1, false, DType::kF32, 4, 4),
            (std::vector<float>{-0x1.2484080000000p+0f, 0x1.ec0d240000000p+0f, 0x1.7adc640000000p+1f,
                                0x1.01e83c0000000p+2f}));
  // bf16: c and s rounded to bf16, every product and sum rounded to bf16.
  EXPECT_EQ(rotate({0.7109375f, -1.3984375f, 2.15625f, 0.0390625f}, 7, true, DType::kBF16, 4, 4),
            (std::vector<float>{-0x1.c200000000000p-1f, -0x1.6400000000000p+0f, 0x1.0c00000000000p+1f,
                                -0x1.e200000000000p-5f}));
  // Position 0 is the identity; partial rotary leaves dims past rotary_dim alone.
  EXPECT_EQ(rotate({1, 2, 3, 4, 5, 6}, 0, true, DType::kF32, 6, 4), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const auto partial = rotate({1, 2, 3, 4, 5, 6}, 1, true, DType::kF32, 6, 4);
  EXPECT_EQ(std::vector<float>(partial.begin(), partial.begin() + 4), rotate({1, 2, 3, 4}, 1, true, DType::kF32, 4, 4));
  EXPECT_EQ(partial[4], 5.0f);
  EXPECT_EQ(partial[5], 6.0f);
}

// The rotation rule written independently over a whole batch, for every dtype: c, s from
// rope_cos_sin rounded to T, x' = T(T(x c) - T(y s)), y' = T(T(y c) + T(x s)).
std::vector<float> expected_rotation(const std::vector<float>& x, int64_t tokens, int64_t heads, const RopeConfig& c,
                                     const ops::RopeCosSin& cs, DType dt) {
  std::vector<float> y = x;
  const int64_t d = c.head_dim, half = c.rotary_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = (t * heads + h) * d + (c.is_neox_style ? i : 2 * i);
        const int64_t b = (t * heads + h) * d + (c.is_neox_style ? i + half : 2 * i + 1);
        const float co = ops_test::round_to(cs.cos.data<float>()[t * half + i], dt);
        const float si = ops_test::round_to(cs.sin.data<float>()[t * half + i], dt);
        auto r = [&](float v) { return ops_test::round_to(v, dt); };
        y[size_t(a)] = r(r(x[size_t(a)] * co) - r(x[size_t(b)] * si));
        y[size_t(b)] = r(r(x[size_t(b)] * co) + r(x[size_t(a)] * si));
      }
    }
  }
  return y;
}

TEST(ApplyRope, BatchesInAndOutOfPlaceStridedQk) {
  ForwardContext ctx;
  for (DType dt : ops_test::kFloatDTypes) {
    for (bool neox : {true, false}) {
      RopeConfig c = config(RopeType::kYarn, 64, 1e6, 4.0);
      c.original_max_position_embeddings = 4096;
      c.rotary_dim = 48;  // partial
      c.is_neox_style = neox;
      const int64_t T = 9, H = 4, Hkv = 2, D = 64;
      const std::vector<int64_t> pos = {0, 1, 2, 17, 4095, 4096, 50000, 3, 16777216};
      // q and k as column slices of a fused qkv buffer [T, (H + 2 Hkv) D].
      const int64_t width = (H + 2 * Hkv) * D;
      Tensor qkv = make_tensor(ops_test::normal_values(size_t(T * width), 11), {T, width}, dt);
      Tensor q = Tensor::from_storage(qkv.storage(), {T, H, D}, {width, D, 1}, 0, dt);
      Tensor k = Tensor::from_storage(qkv.storage(), {T, Hkv * D}, {width, 1}, H * D, dt);  // 2-D [T, Hkv * D]
      const std::vector<float> q0 = to_floats(q), k0 = to_floats(k);
      const Tensor positions = Tensor::from_vector(pos);
      const ops::RopeCosSin cs = ops::rope_cos_sin(ctx, c, positions);
      // Out of place first: the inputs stay.
      ops::RopeOptions o;
      o.q_out = Tensor::empty({T, H, D}, dt);
      o.k_out = Tensor::empty({T, Hkv * D}, dt);
      ops::apply_rope(ctx, c, positions, q, k, o);
      EXPECT_EQ(to_floats(q), q0);
      EXPECT_EQ(to_floats(o.q_out), expected_rotation(q0, T, H, c, cs, dt));
      EXPECT_EQ(to_floats(o.k_out), expected_rotation(k0, T, Hkv, c, cs, dt));
      // In place: the same values, and the v columns of the buffer untouched.
      const std::vector<float> v0 = to_floats(qkv.narrow(1, (H + Hkv) * D, Hkv * D));
      ops::apply_rope(ctx, c, positions, q, k);
      EXPECT_EQ(to_floats(q), to_floats(o.q_out));
      EXPECT_EQ(to_floats(k), to_floats(o.k_out));
      EXPECT_EQ(to_floats(qkv.narrow(1, (H + Hkv) * D, Hkv * D)), v0);
    }
  }
}

TEST(ApplyRope, EmptyBatchAndThreadCounts) {
  ForwardContext ctx;
  RopeConfig c = config(RopeType::kDefault, 8, 1e4);
  ops::apply_rope(ctx, c, Tensor::from_vector<int64_t>({}), Tensor::empty({0, 2, 8}, DType::kBF16), Tensor());
  Overrides one;
  one.num_threads = 1;
  ForwardContext ctx1(Device::cpu(), one);
  Tensor a = make_tensor(ops_test::normal_values(100 * 16, 3), {100, 2, 8}, DType::kBF16), b = a.clone();
  std::vector<int64_t> pos(100);
  for (int64_t i = 0; i < 100; ++i) pos[size_t(i)] = i * 37;
  ops::apply_rope(ctx, c, Tensor::from_vector(pos), a, Tensor());
  ops::apply_rope(ctx1, c, Tensor::from_vector(pos), b, Tensor());
  EXPECT_EQ(to_floats(a), to_floats(b));
  EXPECT_EQ(ctx.workspace().stats().in_use, 0u);
}

// A decode step's rope (one token) is no job for the thread pool: a hand-off costs more than it.
TEST(ApplyRope, ADecodeTokenRunsOnTheCallingThread) {
  ForwardContext ctx;
  RopeConfig c = config(RopeType::kDefault, 64, 1e4);
  Tensor q = make_tensor(ops_test::normal_values(9 * 64, 5), {1, 9, 64}, DType::kBF16);
  Tensor k = make_tensor(ops_test::normal_values(3 * 64, 6), {1, 3, 64}, DType::kBF16);
  const Tensor pos = Tensor::from_vector<int64_t>({17});
  ops::apply_rope(ctx, c, pos, q, k);  // starts the pool
  const uint64_t before = pool_jobs();
  ops::apply_rope(ctx, c, pos, q, k);
  EXPECT_EQ(pool_jobs(), before);
  if (ctx.num_threads() > 1) {  // a prefill's tokens still go to the workers
    Tensor qp = make_tensor(ops_test::normal_values(64 * 9 * 64, 7), {64, 9, 64}, DType::kBF16);
    std::vector<int64_t> many(64);
    for (int64_t i = 0; i < 64; ++i) many[size_t(i)] = i;
    ops::apply_rope(ctx, c, Tensor::from_vector(many), qp, Tensor());
    EXPECT_GT(pool_jobs(), before);
  }
}

TEST(RopeCpu, FastRotationIsTheReferenceByteForByte) {
  // The fast backend's AVX2 rotation (neox, rotary_dim / 2 a multiple of 8: rope_cpu.cpp) against
  // the reference and against the scalar rule written here, full and partial rotary dims, in and
  // out of place, q and k strided in a fused buffer, positions up to 2^24.
  Overrides fast_overrides;
  fast_overrides.cpu_backend = CpuBackend::kFast;
  const ForwardContext fast(Device::cpu(), fast_overrides);
  for (DType dt : ops_test::kFloatDTypes) {
    for (int64_t rotary : {64, 32}) {
      RopeConfig c = config(RopeType::kDefault, 64, 1e4);
      c.rotary_dim = rotary;
      const int64_t T = 40, H = 3, Hkv = 1, D = 64, width = (H + 2 * Hkv) * D;
      std::vector<int64_t> pos;
      for (int64_t t = 0; t < T; ++t) pos.push_back(t < T - 2 ? t * 97 : (t == T - 2 ? 65535 : 16777216));
      const Tensor positions = Tensor::from_vector(pos);
      Tensor qkv_f = make_tensor(ops_test::normal_values(size_t(T * width), uint32_t(rotary)), {T, width}, dt);
      Tensor qkv_r = qkv_f.clone();
      auto q_of = [&](Tensor& qkv) { return Tensor::from_storage(qkv.storage(), {T, H, D}, {width, D, 1}, 0, dt); };
      auto k_of = [&](Tensor& qkv) { return Tensor::from_storage(qkv.storage(), {T, Hkv, D}, {width, D, 1}, H * D, dt); };
      const std::vector<float> q0 = to_floats(q_of(qkv_f));
      // Out of place.
      ops::RopeOptions of, orf;
      of.q_out = Tensor::empty({T, H, D}, dt), of.k_out = Tensor::empty({T, Hkv, D}, dt);
      orf.q_out = Tensor::empty({T, H, D}, dt), orf.k_out = Tensor::empty({T, Hkv, D}, dt);
      ops::apply_rope(fast, c, positions, q_of(qkv_f), k_of(qkv_f), of);
      ops::apply_rope(cpu_reference_ctx(), c, positions, q_of(qkv_r), k_of(qkv_r), orf);
      ASSERT_EQ(std::memcmp(of.q_out.data_ptr(), orf.q_out.data_ptr(), of.q_out.nbytes()), 0) << dtype_name(dt) << " " << rotary;
      ASSERT_EQ(std::memcmp(of.k_out.data_ptr(), orf.k_out.data_ptr(), of.k_out.nbytes()), 0);
      EXPECT_EQ(to_floats(of.q_out), expected_rotation(q0, T, H, c, ops::rope_cos_sin(fast, c, positions), dt));
      // In place.
      ops::apply_rope(fast, c, positions, q_of(qkv_f), k_of(qkv_f));
      ops::apply_rope(cpu_reference_ctx(), c, positions, q_of(qkv_r), k_of(qkv_r));
      ASSERT_EQ(std::memcmp(qkv_f.data_ptr(), qkv_r.data_ptr(), qkv_f.nbytes()), 0);
    }
  }
}

TEST(ApplyRope, Errors) {
  ForwardContext ctx;
  RopeConfig c = config(RopeType::kDefault, 8, 1e4);
  Tensor q = Tensor::empty({2, 2, 8}, DType::kBF16);
  const Tensor pos = Tensor::from_vector<int64_t>({0, 1});
  expect_invalid(
      [&] {
        ops::apply_rope(ctx, c, Tensor::from_vector<int32_t>({0, 1}), q, Tensor());
      },
      "apply_rope: `positions` must be a contiguous i64 tensor, got i32[2] on cpu");
  expect_invalid(
      [&] {
        ops::apply_rope(ctx, c, Tensor::from_vector<int64_t>({0, -1}), q, Tensor());
      },
      "apply_rope: positions[1] = -1 is outside [0, 2^24]");
  expect_invalid(
      [&] {
        ops::apply_rope(ctx, c, Tensor::from_vector<int64_t>({0, 16777217}), q, Tensor());
      },
      "apply_rope: positions[1] = 16777217 is outside [0, 2^24]");
  expect_invalid([&] { ops::apply_rope(ctx, c, Tensor::from_vector<int64_t>({0}), q, Tensor()); },
                 "apply_rope: `q` has 2 tokens but `positions` 1");
  expect_invalid(
      [&] {
        ops::apply_rope(ctx, c, pos, Tensor::empty({2, 2, 6}, DType::kBF16), Tensor());
      },
      "apply_rope: `q` has head size 6 but the RoPE config 8");
  expect_invalid(
      [&] {
        ops::apply_rope(ctx, c, pos, Tensor::empty({2, 12}, DType::kBF16), Tensor());
      },
      "apply_rope: the last dimension of `q` (12) is not a multiple of head_dim 8");
  expect_invalid(
      [&] {
        ops::apply_rope(ctx, c, pos, q, Tensor::empty({2, 1, 8}, DType::kF16));
      },
      "apply_rope: `k` must have the dtype of `q` (bf16), got f16[2, 1, 8] on cpu");
  expect_invalid(
      [&] {
        ops::apply_rope(ctx, c, pos, Tensor::empty({2, 2, 8}, DType::kI32), Tensor());
      },
      "apply_rope: `q` must be f32, f16 or bf16, got i32[2, 2, 8] on cpu");
  ops::RopeOptions o;
  o.k_out = Tensor::empty({2, 1, 8}, DType::kBF16);
  expect_invalid([&] { ops::apply_rope(ctx, c, pos, q, Tensor(), o); }, "apply_rope: `k_out` is given without `k`");
  o = {};
  o.q_out = Tensor::empty({2, 2, 8}, DType::kF32);
  expect_invalid([&] { ops::apply_rope(ctx, c, pos, q, Tensor(), o); },
                 "apply_rope: `q_out` must be bf16, got f32[2, 2, 8] on cpu");
  RopeConfig bad = c;
  bad.rotary_dim = 9;
  expect_invalid([&] { ops::apply_rope(ctx, bad, pos, q, Tensor()); },
                 "rope: `rotary_dim` must be even and in [2, head_dim = 8], got 9");
  bad = c;
  bad.type = RopeType::kLinear;
  bad.factor = 0.5;
  expect_invalid([&] { ops::rope_frequencies(bad); }, "rope: `factor` must be >= 1 for linear RoPE, got 0.5");
  bad.type = RopeType::kLlama3, bad.factor = 8, bad.original_max_position_embeddings = 8192;
  bad.low_freq_factor = 4, bad.high_freq_factor = 4;
  expect_invalid([&] { ops::rope_frequencies(bad); },
                 "rope: llama3 RoPE needs 0 < `low_freq_factor` < `high_freq_factor`, got 4 and 4");
  expect_error(
      [&] {
        ops::apply_rope(ctx, c, pos, ops_test::fake_cuda_tensor({2, 2, 8}, DType::kBF16), Tensor());
      },
      ErrorCode::kInvalidArgument, "apply_rope: `q` is on cuda:0 but the context is on cpu");
  if (!cuda_built()) {  // a CUDA build routes these to its kernel (tests/gpu/test_norm_rope_cuda.cpp)
    ForwardContext cuda_ctx(Device::cuda(0));
    expect_error(
        [&] {
          ops::apply_rope(cuda_ctx, c, ops_test::fake_cuda_tensor({2}, DType::kI64),
                          ops_test::fake_cuda_tensor({2, 2, 8}, DType::kBF16), Tensor());
        },
        ErrorCode::kUnsupported, "apply_rope: fp8kit was built without CUDA");
  }
}

}  // namespace
}  // namespace fp8kit
