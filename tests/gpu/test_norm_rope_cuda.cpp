// rms_norm / fused_add_rms_norm and apply_rope on CUDA against the CPU reference
// (src/ops/norm/rms_norm_ref.cpp, src/ops/rope/rope_ref.cpp), bit for bit:
// - the norms: every dtype, hidden sizes from 1 to 8192 (16-byte and element paths), strided and
//   misaligned rows, NaN rows, the residual and the output, poisoned outputs;
// - RoPE: neox and GPT-J pairs, full and partial rotary dims, every rope type, q and k with their
//   own head counts and strides (3-D and 2-D), in and out of place. The one step that is not
//   IEEE-exact on both sides is cos/sin in double (CUDA's within 2 ulp, glibc's within 1); a
//   (position, frequency) whose cosine or sine lies within 2^-48 (relative) of an f32 rounding
//   midpoint may round to the other f32 on the GPU, so the pairs of such frequencies are not
//   compared (the test prints how many; expected: almost always none).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fp8kit/ops/norm.h"
#include "fp8kit/ops/rope.h"
#include "gpu_test_util.h"
#include "ops/rope/rope_freqs.h"

namespace fp8kit {
namespace {

using namespace gpu_test;

const Device kGpu = Device::cuda(0);

// A [rows, hidden] CPU view with row stride `ld` starting `offset` elements into its buffer.
std::pair<Tensor, Tensor> rows_of(int64_t rows, int64_t hidden, int64_t ld, int64_t offset, DType dt, uint32_t seed) {
  Tensor base = random_tensor({rows * ld + offset}, dt, seed, 2.0f);
  return {base, Tensor::from_storage(base.storage(), {rows, hidden}, {ld, 1}, offset, dt)};
}

TEST(RmsNormCuda, BitExactEveryDtypeWidthAndLayout) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t hidden : {1, 3, 8, 127, 129, 1024, 4096, 5120, 8192}) {
      for (int layout = 0; layout < 3; ++layout) {  // contiguous, aligned stride, misaligned start
        const int64_t rows = hidden >= 4096 ? 33 : 300;
        const int64_t ld = layout == 0 ? hidden : hidden + (layout == 1 ? 64 : 3);
        const int64_t offset = layout == 2 ? 1 : 0;
        const uint32_t seed = next_seed();
        const auto [base, x] = rows_of(rows, hidden, ld, offset, dt, seed);
        const Tensor w = random_tensor({hidden}, dt, seed + 1);
        const float eps = layout == 1 ? 0.0f : 1e-6f;
        const Case c{"rms_norm", {rows, hidden}, dt, dt, seed, "row stride " + std::to_string(ld)};
        const Tensor want = ops::rms_norm(ctx_of(x), x, w, eps);
        Tensor out_d = poisoned({rows, hidden}, dt, kGpu, 0xff);  // NaN in every dtype: each element written
        ops::rms_norm(cuda_ctx(), device_view(base, x), w.to(kGpu), eps, out_d);
        expect_same_tensor(c, "rms_norm out", out_d, want);
        const Tensor own = ops::rms_norm(cuda_ctx(), device_view(base, x), w.to(kGpu), eps);  // allocated output
        expect_same_tensor(c, "rms_norm allocated out", own, want);

        // fused_add_rms_norm: x (strided, in place) and the residual (contiguous).
        const Tensor residual = random_tensor({rows, hidden}, dt, seed + 2, 2.0f);
        Tensor x_cpu = base.clone();
        const Tensor x_view = Tensor::from_storage(x_cpu.storage(), {rows, hidden}, {ld, 1}, offset, dt);
        Tensor res_cpu = residual.clone();
        ops::fused_add_rms_norm(ctx_of(x_view), x_view, res_cpu, w, eps);
        const Tensor x_dev_base = base.to(kGpu);
        const Tensor x_dev = Tensor::from_storage(x_dev_base.storage(), {rows, hidden}, {ld, 1}, offset, dt);
        const Tensor res_dev = residual.to(kGpu);
        ops::fused_add_rms_norm(cuda_ctx(), x_dev, res_dev, w.to(kGpu), eps);
        const Case f{"fused_add_rms_norm", {rows, hidden}, dt, dt, seed, "row stride " + std::to_string(ld)};
        expect_same_tensor(f, "residual", res_dev, res_cpu);
        expect_same(f, "x buffer (normalized rows, the gaps untouched)", raw_bytes(x_dev_base), raw_bytes(x_cpu),
                    dtype_size(dt));
      }
    }
  }
}

// Bit equality where both are numbers; any NaN equals any NaN (the sign and payload of a NaN made
// by 0 * inf are the hardware's: x86 gives -NaN, CUDA +NaN).
void expect_same_or_both_nan(const Case& c, const Tensor& got_dev, const Tensor& want) {
  const Tensor got = to_host(got_dev).contiguous();
  ASSERT_EQ(got.shape(), want.shape()) << c.str();
  const std::vector<float> fa = to_floats(got), fb = to_floats(want);
  const std::vector<uint8_t> ba = raw_bytes(got), bb = raw_bytes(want);
  const size_t e = dtype_size(want.dtype());
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const bool same = (std::isnan(fa[size_t(i)]) && std::isnan(fb[size_t(i)])) ||
                      std::memcmp(&ba[size_t(i) * e], &bb[size_t(i) * e], e) == 0;
    if (!same && mismatches++ == 0) first = i;
  }
  EXPECT_EQ(mismatches, 0) << c.str() << ": first mismatch at element " << first;
}

TEST(RmsNormCuda, NaNAndZeroRowsAndEmpty) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Tensor x = random_tensor({4, 256}, dt, 5);
    for (int64_t i = 0; i < 256; ++i) store_float(x, 256 + i, 0.0f);  // row 1: zeros, eps 0 -> r = inf
    store_float(x, 2 * 256 + 7, NAN);                                 // row 2: a NaN
    store_float(x, 3 * 256 + 9, INFINITY);                            // row 3: an inf
    const Tensor w = random_tensor({256}, dt, 6);
    const Case c{"rms_norm specials", {4, 256}, dt, dt, 5, ""};
    expect_same_or_both_nan(c, ops::rms_norm(cuda_ctx(), x.to(kGpu), w.to(kGpu), 0.0f),
                            ops::rms_norm(ctx_of(x), x, w, 0.0f));
  }
  const Tensor empty = Tensor::empty({0, 64}, DType::kBF16, kGpu);
  EXPECT_EQ(ops::rms_norm(cuda_ctx(), empty, Tensor::empty({64}, DType::kBF16, kGpu), 1e-6f).numel(), 0);
}

// Whether the f32 rounding of the double value v is ambiguous: v within 2^-48 |v| of a midpoint
// between two floats (CUDA's and glibc's double cos/sin differ by at most ~2^-50 relative).
bool near_f32_midpoint(double v) {
  if (v == 0.0 || !std::isfinite(v)) return false;
  const float f = float(v);
  const float other = std::nextafter(f, double(f) < v ? INFINITY : -INFINITY);
  const double mid = 0.5 * (double(f) + double(other));
  return std::fabs(v - mid) <= std::ldexp(std::fabs(v), -48);
}

struct RopeCase {
  ops::RopeConfig config;
  DType dtype = DType::kBF16;
  int64_t tokens = 57, q_heads = 8, k_heads = 2;
  bool out_of_place = false, k_2d = false;
  uint32_t seed = 0;
};

void check_rope(const RopeCase& rc) {
  const auto& cfg = rc.config;
  const int64_t T = rc.tokens, D = cfg.head_dim;
  std::mt19937 rng(rc.seed);
  std::uniform_int_distribution<int64_t> pos_dist(0, 70000);
  std::vector<int64_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = t == 0 ? 0 : (t == 1 ? (int64_t(1) << 24) : pos_dist(rng));
  const Tensor positions = Tensor::from_vector(pos);
  // q: a strided [T, Hq, D] view of a fused buffer; k: [T, Hk, D] or [T, Hk * D] of its own.
  const int64_t width = (rc.q_heads + 2 * rc.k_heads) * D + 8;
  const Tensor qbuf = random_tensor({T * width}, rc.dtype, rc.seed + 1, 3.0f);
  const Tensor q = Tensor::from_storage(qbuf.storage(), {T, rc.q_heads, D}, {width, D, 1}, 0, rc.dtype);
  const Tensor kbuf = random_tensor({T * rc.k_heads * D}, rc.dtype, rc.seed + 2, 3.0f);
  const Tensor k = rc.k_2d ? kbuf.view({T, rc.k_heads * D}) : kbuf.view({T, rc.k_heads, D});

  // Reference (out of place, so the inputs stay for the GPU).
  ops::RopeOptions ref_o;
  ref_o.q_out = Tensor::empty(q.shape(), rc.dtype);
  ref_o.k_out = Tensor::empty(k.shape(), rc.dtype);
  ops::apply_rope(ctx_of(q), cfg, positions, q, k, ref_o);

  const Tensor q_d_base = qbuf.to(kGpu);
  const Tensor q_d = Tensor::from_storage(q_d_base.storage(), q.shape(), q.strides(), 0, rc.dtype);
  const Tensor k_d = device_view(kbuf, k);
  ops::RopeOptions o;
  if (rc.out_of_place) {
    o.q_out = poisoned(q.shape(), rc.dtype, kGpu, 0xff);
    o.k_out = poisoned(k.shape(), rc.dtype, kGpu, 0xff);
  }
  ops::apply_rope(cuda_ctx(), cfg, positions.to(kGpu), q_d, k_d, o);
  const Tensor got_q = to_host(rc.out_of_place ? o.q_out : q_d).contiguous();
  const Tensor got_k = to_host(rc.out_of_place ? o.k_out : k_d).contiguous();

  // Pairs of frequencies whose cos or sin is ambiguous at this token are not compared.
  const ops::RopeFrequencies f = ops::rope_frequencies(cfg);
  const int64_t half = cfg.rotary_dim / 2;
  std::vector<std::vector<bool>> skip(size_t(T), std::vector<bool>(size_t(half), false));
  int64_t skipped = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(pos[size_t(t)]) * f.inv_freq[size_t(i)];
      if (near_f32_midpoint(std::cos(double(angle))) || near_f32_midpoint(std::sin(double(angle)))) {
        skip[size_t(t)][size_t(i)] = true;
        ++skipped;
      }
    }
  }
  if (skipped > 0) std::printf("[ rope     ] %lld ambiguous (position, frequency) pairs not compared\n", (long long)skipped);
  const std::string what = std::string(ops::rope_type_name(cfg.type)) + (cfg.is_neox_style ? " neox" : " gptj") +
                           " rotary " + std::to_string(cfg.rotary_dim) + "/" + std::to_string(D) +
                           (rc.out_of_place ? " out of place" : " in place");
  const Case c{"apply_rope", {T, rc.q_heads, D}, rc.dtype, rc.dtype, rc.seed, what};
  for (int which = 0; which < 2; ++which) {
    const Tensor got = which == 0 ? got_q : got_k;
    const Tensor want = (which == 0 ? ref_o.q_out : ref_o.k_out).contiguous();
    const int64_t heads = which == 0 ? rc.q_heads : rc.k_heads;
    int64_t mismatches = 0;
    std::string first;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < D; ++d) {
          if (d < cfg.rotary_dim) {
            const int64_t i = cfg.is_neox_style ? d % half : d / 2;
            if (skip[size_t(t)][size_t(i)]) continue;
          }
          const int64_t at = (t * heads + h) * D + d;
          const size_t e = dtype_size(rc.dtype);
          if (std::memcmp(static_cast<const uint8_t*>(got.data_ptr()) + at * e,
                          static_cast<const uint8_t*>(want.data_ptr()) + at * e, e) != 0) {
            if (mismatches++ == 0) {
              first = "token " + std::to_string(t) + " (position " + std::to_string(pos[size_t(t)]) + ") head " +
                      std::to_string(h) + " d " + std::to_string(d);
            }
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << c.str() << ": " << (which == 0 ? "q" : "k") << " differs; first at " << first;
  }
}

ops::RopeConfig rope_config(ops::RopeType type, int64_t head_dim, int64_t rotary_dim, bool neox) {
  ops::RopeConfig c;
  c.type = type;
  c.head_dim = head_dim, c.rotary_dim = rotary_dim, c.is_neox_style = neox;
  c.theta = 500000.0;
  c.max_position_embeddings = 8192;
  if (type != ops::RopeType::kDefault) c.factor = 8.0;
  if (type == ops::RopeType::kLlama3 || type == ops::RopeType::kYarn) c.original_max_position_embeddings = 8192;
  return c;
}

TEST(ApplyRopeCuda, BitExactEveryStyleTypeAndLayout) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (bool neox : {true, false}) {
      for (auto [d, rot] : {std::pair<int64_t, int64_t>{128, 128}, {128, 64}, {80, 40}, {64, 64}, {256, 128}}) {
        RopeCase rc;
        rc.config = rope_config(ops::RopeType::kDefault, d, rot, neox);
        rc.dtype = dt;
        rc.out_of_place = d == 80;
        rc.k_2d = rot == 64;
        rc.seed = next_seed();
        check_rope(rc);
      }
    }
  }
  for (ops::RopeType type :
       {ops::RopeType::kLinear, ops::RopeType::kDynamic, ops::RopeType::kLlama3, ops::RopeType::kYarn}) {
    for (bool out : {false, true}) {
      RopeCase rc;
      rc.config = rope_config(type, 128, 128, true);
      rc.out_of_place = out;
      rc.q_heads = 32, rc.k_heads = 8, rc.tokens = 300;
      rc.seed = next_seed();
      check_rope(rc);
    }
  }
}

TEST(ApplyRopeCuda, OneTokenManyHeadsAndEmpty) {
  RopeCase rc;
  rc.config = rope_config(ops::RopeType::kDefault, 128, 128, true);
  rc.tokens = 1, rc.q_heads = 64, rc.k_heads = 1;
  rc.seed = next_seed();
  check_rope(rc);
  const ops::RopeConfig c = rope_config(ops::RopeType::kDefault, 64, 64, true);
  ops::apply_rope(cuda_ctx(), c, Tensor::empty({0}, DType::kI64, kGpu), Tensor::empty({0, 4, 64}, DType::kBF16, kGpu),
                  Tensor());
}

}  // namespace
}  // namespace fp8kit
