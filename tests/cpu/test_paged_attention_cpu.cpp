// The fast CPU paged attention (src/ops/attention/attention_cpu.cpp) beside the reference: both
// within the calibrated f32 bound of the dense double reference on the same problems (every
// dtype and cache, GQA, windows, soft-cap), the two close to each other, kFp8Compute served by the
// reference bit for bit. The other tests/cpu/test_paged_attention*.cpp run the fast path (their
// default context).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "paged_attention_test_util.h"
#include "reference_context.h"

namespace fp8kit {
namespace {

using attention_test::Bench;
using attention_test::Problem;
using ops::KvCacheDtype;

std::vector<Problem> problems() {
  std::vector<Problem> out;
  for (const DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (const KvCacheDtype cache : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2}) {
      Problem p;
      p.seqs = {{0, 40}, {17, 1}, {16, 5}, {3, 19}, {0, 1}};
      p.dtype = dtype;
      p.cache_dtype = cache;
      p.per_head_scales = cache != KvCacheDtype::kAuto;
      out.push_back(p);
    }
  }
  Problem gqa;  // SmolLM2's heads: 9 query heads on 3 KV heads, head size 64, with a long prefill
  gqa.seqs = {{0, 160}, {150, 1}};
  gqa.num_heads = 9;
  gqa.num_kv_heads = 3;
  out.push_back(gqa);
  Problem odd;  // a head size that is not a multiple of the 16 lanes, a window and a soft-cap
  odd.seqs = {{0, 33}, {20, 3}};
  odd.head_size = 72;
  odd.options.window_left = 9;
  odd.options.softcap = 30.0f;
  out.push_back(odd);
  // Decode rows only (tiles of one token): a group of 20 heads (tiles of 16 and 4 heads), head
  // size 128, a window and a soft-cap, an FP8 cache; and head size 256 in a bf16 cache.
  Problem decode;
  decode.seqs = {{37, 1}, {8, 1}, {200, 1}, {0, 1}};
  decode.num_heads = 40;
  decode.num_kv_heads = 2;
  decode.head_size = 128;
  decode.cache_dtype = KvCacheDtype::kFp8E4M3;
  decode.options.window_left = 50;
  decode.options.softcap = 20.0f;
  out.push_back(decode);
  Problem wide = decode;
  wide.head_size = 256;
  wide.cache_dtype = KvCacheDtype::kAuto;
  wide.options = {};
  out.push_back(wide);
  return out;
}

TEST(PagedAttentionCpu, FastAndReferenceWithinTheBoundAndCloseToEachOther) {
  Overrides fast_overrides;
  fast_overrides.cpu_backend = CpuBackend::kFast;
  const ForwardContext fast(Device::cpu(), fast_overrides);
  attention_test::Calibration cal_fast, cal_ref;
  for (const Problem& p : problems()) {
    Bench bf = attention_test::build(p), br = attention_test::build(p);
    cal_fast.merge(attention_test::run_and_check(bf, fast));
    cal_ref.merge(attention_test::run_and_check(br, cpu_reference_ctx()));
    const Tensor of = ops::paged_attention(fast, bf.q, bf.k, bf.v, bf.cache, bf.md, p.options);
    const Tensor orf = ops::paged_attention(cpu_reference_ctx(), br.q, br.k, br.v, br.cache, br.md, p.options);
    const std::vector<float> a = ops_test::to_floats(of), b = ops_test::to_floats(orf);
    ASSERT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    // Outputs are convex combinations of values of sigma 1: the two f32 orders agree far closer
    // than one bf16 step of such a value (measured: below 2^-8 for bf16 and f16, 1e-6 for f32).
    const double step = p.dtype == DType::kF32 ? 1e-5 : 1.0 / 64;
    EXPECT_TRUE(worst <= step) << p.describe() << ": max |fast - reference| " << worst;
  }
  std::printf("[ calib    ] max |error| / tolerance: fast %.3g, reference %.3g\n", cal_fast.worst, cal_ref.worst);
}

TEST(PagedAttentionCpu, Fp8ComputeModeIsTheReference) {
  Problem p;
  p.seqs = {{0, 20}, {9, 1}};
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  p.options.read_mode = ops::AttentionReadMode::kFp8Compute;
  p.options.q_scale = Tensor::scalar_f32(0.05f);
  Bench bf = attention_test::build(p), br = attention_test::build(p);
  Overrides fast_overrides;
  fast_overrides.cpu_backend = CpuBackend::kFast;
  const ForwardContext fast(Device::cpu(), fast_overrides);
  const Tensor a = ops::paged_attention(fast, bf.q, bf.k, bf.v, bf.cache, bf.md, p.options);
  const Tensor b = ops::paged_attention(cpu_reference_ctx(), br.q, br.k, br.v, br.cache, br.md, p.options);
  EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()), 0);
}

}  // namespace
}  // namespace fp8kit
