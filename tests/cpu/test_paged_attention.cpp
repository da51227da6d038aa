// paged_attention on the CPU, read mode kDequantize (src/ops/attention/): every output against
// the direct O(L^2) reference of paged_attention_test_util.h (dense gather through the block
// table, materialized mask, softmax in double) within the calibrated f32 bound, and the cache
// bytes the op writes against fp8.h. Shapes shared by the cases: a mixed batch (prefill ctx 0,
// decode q_len 1, chunked prefill with ctx on and off a block boundary, q_len = B and B + 1, a
// sequence of length 1, the last partial block), GQA 1/2/4/8, head sizes 64/128/72/5,
// bf16/f16/f32 with auto, fp8_e4m3 and fp8_e5m2 caches, per-head scales, sliding windows,
// soft-cap, empty batches and padding rows. NaN/inf and the errors: test_paged_attention_edges.cpp.
#include <gtest/gtest.h>

#include <cstdio>

#include "paged_attention_test_util.h"

namespace fp8kit {
namespace {

using attention_test::Bench;
using attention_test::Problem;
using attention_test::SeqSpec;
using ops::KvCacheDtype;

// Prefill, decode, chunked prefill (ctx a multiple of B and not), q_len = B and B + 1, length 1.
std::vector<SeqSpec> mixed_batch(int64_t B) {
  return {{0, 7}, {13, 1}, {B, 5}, {5, B}, {0, 1}, {2 * B - 3, B + 1}, {3, 2}};
}

attention_test::Calibration check(const Problem& p) {
  ForwardContext ctx;
  Bench b = attention_test::build(p);
  return attention_test::run_and_check(b, ctx);
}

void report(const char* what, const attention_test::Calibration& c) {
  std::printf("[ calib    ] %s: max |error| / tolerance = %.3g; f32 outputs: max |error| / f32 bound = %.3g\n", what,
              c.worst, c.worst_f32);
}

TEST(PagedAttention, MixedBatchEveryDtypeAndCache) {
  attention_test::Calibration worst;
  for (DType dt : ops_test::kFloatDTypes) {
    for (KvCacheDtype cd : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2}) {
      Problem p;
      p.seqs = mixed_batch(16);
      p.dtype = dt;
      p.cache_dtype = cd;
      p.seed = 10 + uint32_t(dt) * 3 + uint32_t(cd);
      worst.merge(check(p));
    }
  }
  report("mixed batch", worst);
}

TEST(PagedAttention, GqaRatiosWithPerHeadScales) {
  attention_test::Calibration worst;
  // 40 on 2: groups of 20 heads, more than the fast path's 16 lanes a tile.
  for (auto [h, hkv] : {std::pair{4, 4}, std::pair{4, 2}, std::pair{8, 2}, std::pair{8, 1}, std::pair{40, 2}}) {
    for (KvCacheDtype cd : {KvCacheDtype::kFp8E4M3, KvCacheDtype::kAuto}) {
      Problem p;
      p.seqs = {{9, 3}, {0, 5}, {20, 1}};
      p.num_heads = h, p.num_kv_heads = hkv, p.head_size = 128;
      p.cache_dtype = cd;
      p.per_head_scales = true;
      p.seed = 30 + uint32_t(h * 10 + hkv);
      worst.merge(check(p));
    }
  }
  report("GQA", worst);
}

TEST(PagedAttention, HeadSizesAndSmallBlocks) {
  attention_test::Calibration worst;
  for (int64_t d : {64, 128, 72, 5}) {
    for (DType dt : {DType::kF16, DType::kF32}) {
      Problem p;
      p.seqs = mixed_batch(3);
      p.block_size = 3;  // many block boundaries, and the last block partial in most sequences
      p.head_size = d;
      p.num_heads = 4, p.num_kv_heads = 2;
      p.dtype = dt;
      p.cache_dtype = d == 72 ? KvCacheDtype::kFp8E5M2 : KvCacheDtype::kFp8E4M3;
      p.seed = 50 + uint32_t(d);
      worst.merge(check(p));
      p.cache_dtype = KvCacheDtype::kAuto;
      worst.merge(check(p));
    }
  }
  report("head sizes", worst);
}

TEST(PagedAttention, SlidingWindows) {
  attention_test::Calibration worst;
  for (int64_t w : {1, 4, 17}) {  // vLLM's sliding_window W -> (W - 1, 0)
    for (KvCacheDtype cd : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3}) {
      Problem p;
      p.seqs = mixed_batch(16);
      p.cache_dtype = cd;
      p.options.window_left = w - 1;
      p.options.window_right = 0;
      p.seed = 70 + uint32_t(w);
      worst.merge(check(p));
    }
  }
  // Two-sided and one-sided windows without the causal mask (keys past the query visible).
  for (auto [left, right] : {std::pair{2, 3}, std::pair{-1, 1}, std::pair{5, -1}, std::pair{-1, -1}}) {
    Problem p;
    p.seqs = {{6, 4}, {0, 9}, {11, 1}};
    p.dtype = DType::kF32;
    p.options.causal = false;
    p.options.window_left = left, p.options.window_right = right;
    p.seed = 80 + uint32_t(left + 2 * right + 10);
    worst.merge(check(p));
  }
  report("windows", worst);
}

TEST(PagedAttention, SoftcapAndScale) {
  attention_test::Calibration worst;
  for (KvCacheDtype cd : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3}) {
    Problem p;
    p.seqs = mixed_batch(16);
    p.q_sigma = 4.0f;  // logits of tens: the cap changes the softmax
    p.options.softcap = 5.0f;
    p.options.scale = 0.3f;
    p.cache_dtype = cd;
    p.seed = 90;
    worst.merge(check(p));
  }
  report("softcap", worst);
}

TEST(PagedAttention, SoftcapChangesTheResult) {
  // The test of the cap itself: without it the same problem gives different outputs.
  Problem p;
  p.seqs = {{10, 2}};
  p.q_sigma = 4.0f;
  p.options.scale = 0.3f;
  ForwardContext ctx;
  Bench capped = attention_test::build(p), plain = attention_test::build(p);
  ops::PagedAttentionOptions o = p.options;
  o.softcap = 5.0f;
  const auto a =
      ops_test::to_floats(ops::paged_attention(ctx, capped.q, capped.k, capped.v, capped.cache, capped.md, o));
  const auto c =
      ops_test::to_floats(ops::paged_attention(ctx, plain.q, plain.k, plain.v, plain.cache, plain.md, p.options));
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, double(std::fabs(a[i] - c[i])));
  EXPECT_GT(diff, 0.05);
}

TEST(PagedAttention, EmptyBatchAndPaddingRows) {
  Problem p;  // no sequences, no rows
  check(p);
  p.padding_rows = 3;  // no sequences, three padding rows: zeros
  check(p);
  p.seqs = {{4, 2}, {0, 3}};
  p.padding_rows = 2;
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  check(p);
  p.seqs = {{0, 0}, {5, 1}, {0, 0}};  // sequences without tokens this step
  check(p);
}

TEST(PagedAttention, SequenceOfLengthOneIsItsValue) {
  // One key: softmax weight 1, so the output is the dequantized value row itself (rounded once).
  for (KvCacheDtype cd : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3}) {
    Problem p;
    p.seqs = {{0, 1}};
    p.cache_dtype = cd;
    ForwardContext ctx;
    Bench b = attention_test::build(p);
    const auto out = ops_test::to_floats(ops::paged_attention(ctx, b.q, b.k, b.v, b.cache, b.md, p.options));
    for (int64_t h = 0; h < p.num_heads; ++h) {
      for (int64_t d = 0; d < p.head_size; ++d) {
        const double v = b.value_dense[0][size_t((h / 4) * p.head_size + d)];
        EXPECT_EQ(out[size_t(h * p.head_size + d)], ops_test::round_to(float(v), p.dtype));
      }
    }
  }
}

TEST(PagedAttention, CachedKvNeedNoNewRows) {
  // k and v undefined: the cache already holds this step's tokens (written by a first call).
  Problem p;
  p.seqs = mixed_batch(16);
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  ForwardContext ctx;
  Bench b = attention_test::build(p);
  const Tensor first = ops::paged_attention(ctx, b.q, b.k, b.v, b.cache, b.md, p.options);
  ops::AttentionMetadata md = b.md;
  md.slot_mapping = Tensor();
  const Tensor again = ops::paged_attention(ctx, b.q, Tensor(), Tensor(), b.cache, md, p.options);
  EXPECT_EQ(std::memcmp(first.data_ptr(), again.data_ptr(), first.nbytes()), 0);
}

TEST(PagedAttention, PreallocatedOutputAndThreadCounts) {
  // The result does not depend on how the work is split.
  Problem p;
  p.seqs = mixed_batch(16);
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  Bench b1 = attention_test::build(p), b2 = attention_test::build(p);
  Overrides one_thread;
  one_thread.num_threads = 1;
  ForwardContext ctx1(Device::cpu(), one_thread), ctx_all;
  ops::PagedAttentionOptions o = p.options;
  o.out = Tensor::empty({b2.num_tokens(), p.num_heads, p.head_size}, p.dtype);
  const Tensor a = ops::paged_attention(ctx1, b1.q, b1.k, b1.v, b1.cache, b1.md, p.options);
  const Tensor c = ops::paged_attention(ctx_all, b2.q, b2.k, b2.v, b2.cache, b2.md, o);
  EXPECT_EQ(c.data_ptr(), o.out.data_ptr());
  EXPECT_EQ(std::memcmp(a.data_ptr(), c.data_ptr(), a.nbytes()), 0);
  EXPECT_EQ(ctx_all.workspace().stats().in_use, 0u);  // the scratch went back
}

}  // namespace
}  // namespace fp8kit
