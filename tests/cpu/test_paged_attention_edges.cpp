// paged_attention on the CPU, edge cases and errors: NaN/inf in keys and values a query does not
// see (never read, including the poisoned tail of the last block), NaN and inf in visible ones
// (propagate to exactly the outputs that see them; an FP8 cache saturates inf on store), and the
// argument errors with their texts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "expect_error.h"
#include "fp8kit/platform.h"
#include "paged_attention_test_util.h"

namespace fp8kit {
namespace {

using attention_test::Bench;
using attention_test::Problem;
using ops::KvCacheDtype;
using testing::expect_error;
using testing::expect_invalid;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

Tensor i32(const std::vector<int32_t>& v) { return Tensor::from_vector(v); }

// The whole buffer under a view, as one flat tensor of its dtype.
Tensor flat_storage(const Tensor& t) {
  return Tensor::from_storage(t.storage(), {int64_t(t.storage()->nbytes() / t.element_size())}, {1}, 0, t.dtype());
}

// Sets q[t, h, d] in the (strided) q tensor and in the values the reference reads.
void set_q(Bench& b, int64_t t, int64_t h, int64_t d, float x) {
  ops_test::set_element(flat_storage(b.q), b.q.storage_offset() + t * b.q.stride(0) + h * b.q.stride(1) + d, x);
  b.q_values[size_t((t * b.p.num_heads + h) * b.p.head_size + d)] = ops_test::round_to(x, b.p.dtype);
}

std::vector<float> run(Bench& b) {
  ForwardContext ctx;
  attention_test::run_and_check(b, ctx);
  return ops_test::to_floats(ops::paged_attention(
      ctx, b.q, Tensor(), Tensor(), b.cache,
      [&] {
        ops::AttentionMetadata md = b.md;
        md.slot_mapping = Tensor();
        return md;
      }(),
      b.p.options));
}

TEST(PagedAttentionEdges, PoisonOutsideTheVisibleKeysIsNeverRead) {
  // The bench fills every cache element no sequence owns with NaN (auto) or the NaN byte 0x7F,
  // among them the tail of each last partial block. Keys outside the window hold NaN too here.
  for (KvCacheDtype cd : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3}) {
    Problem p;
    p.seqs = {{10, 3}, {7, 1}};  // L = 13 and 8 with B = 16: partial last blocks
    p.cache_dtype = cd;
    p.options.window_left = 3;  // W = 4: queries at 10..12 see keys 7.., the decode query keys 4..7
    p.options.window_right = 0;
    Bench b = attention_test::build(p);
    for (int64_t d = 0; d < p.head_size; ++d) {
      for (int64_t h = 0; h < p.num_kv_heads; ++h) {
        for (int64_t j = 0; j < 4; ++j) attention_test::set_cached(b, 0, j, h, d, kNaN, kNaN);
        attention_test::set_cached(b, 1, 0, h, d, kInf, -kInf);
      }
    }
    const auto out = run(b);
    for (float x : out) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(PagedAttentionEdges, NaNInAVisibleValuePropagatesToItsElement) {
  Problem p;
  p.seqs = {{6, 2}, {5, 1}};
  Bench b = attention_test::build(p);
  attention_test::set_cached(b, 0, 2, /*kv head*/ 0, /*d*/ 3, 0.5f, kNaN);
  const auto out = run(b);  // run_and_check expects NaN exactly where the dense reference has it
  const int64_t H = p.num_heads, D = p.head_size;
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < D; ++d) {
        const bool sees = t < 2 && h < 4 && d == 3;  // sequence 0, KV group 0 (heads 0..3), element 3
        EXPECT_EQ(std::isnan(out[size_t((t * H + h) * D + d)]), sees) << t << " " << h << " " << d;
      }
    }
  }
}

TEST(PagedAttentionEdges, NaNInAVisibleKeyPropagatesToItsHeads) {
  // Two query rows in one tile, and one (a decode step's tile of one token).
  for (const auto& [cd, rows] : {std::pair{KvCacheDtype::kAuto, 2}, std::pair{KvCacheDtype::kFp8E5M2, 2},
                                 std::pair{KvCacheDtype::kAuto, 1}, std::pair{KvCacheDtype::kFp8E5M2, 1}}) {
    Problem p;
    p.seqs = {{6, rows}};
    p.cache_dtype = cd;
    p.options.window_left = 0;  // each query sees itself only
    Bench b = attention_test::build(p);
    Problem p2 = p;
    p2.options.window_left = -1;
    Bench full = attention_test::build(p2);
    attention_test::set_cached(b, 0, 5, 1, 0, kNaN, 1.0f);     // outside the window of both queries
    attention_test::set_cached(full, 0, 5, 1, 0, kNaN, 1.0f);  // visible to both, group 1
    for (float x : run(b)) ASSERT_TRUE(std::isfinite(x));
    const auto out = run(full);
    for (int64_t t = 0; t < rows; ++t) {
      for (int64_t h = 0; h < p.num_heads; ++h) {
        EXPECT_EQ(std::isnan(out[size_t((t * p.num_heads + h) * p.head_size)]), h >= 4) << rows << " " << t << " " << h;
      }
    }
    // A NaN in the first key a query reads (where the running maximum is still -inf) too.
    attention_test::set_cached(full, 0, 0, 0, 3, kNaN, 1.0f);
    for (float x : run(full)) ASSERT_TRUE(std::isnan(x));
  }
}

TEST(PagedAttentionEdges, InfInAnAutoCache) {
  // K = +inf at element 0 of key 1: head 0 (q > 0 there) gets a logit of +inf and NaN outputs;
  // head 1 (q < 0) a logit of -inf, which weighs zero. V = +inf at element 2 of key 3: every
  // output of its group at element 2 is +inf.
  Problem p;
  p.seqs = {{4, 1}};
  p.dtype = DType::kF32;
  Bench b = attention_test::build(p);
  set_q(b, 0, 0, 0, 1.0f);
  set_q(b, 0, 1, 0, -1.0f);
  attention_test::set_cached(b, 0, 1, 0, 0, kInf, 0.25f);
  attention_test::set_cached(b, 0, 3, 0, 2, 0.5f, kInf);
  const auto out = run(b);
  const int64_t D = p.head_size;
  for (int64_t d = 0; d < D; ++d) EXPECT_TRUE(std::isnan(out[size_t(d)]));
  EXPECT_EQ(out[size_t(D + 2)], kInf);
  EXPECT_TRUE(std::isfinite(out[size_t(D + 3)]));
  for (int64_t h = 4; h < p.num_heads; ++h) EXPECT_TRUE(std::isfinite(out[size_t(h * D + 2)]));
}

TEST(PagedAttentionEdges, InfInAnFp8CacheSaturates) {
  // A new token's key and value of +-inf are stored as +-448 (0x7E / 0xFE): finite everywhere.
  Problem p;
  p.seqs = {{3, 2}};
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  Bench b = attention_test::build(p);
  ForwardContext ctx;
  Tensor k_row = b.k.select(0, 0), v_row = b.v.select(0, 1);
  ops_test::set_element(flat_storage(b.k), k_row.storage_offset() + 5, kInf);
  ops_test::set_element(flat_storage(b.v), v_row.storage_offset() + 7, -kInf);
  const Tensor out = ops::paged_attention(ctx, b.q, b.k, b.v, b.cache, b.md, p.options);
  const int64_t slot0 = b.md.slot_mapping.data<int64_t>()[0], slot1 = b.md.slot_mapping.data<int64_t>()[1];
  EXPECT_EQ(b.cache.key_cache.data<uint8_t>()[slot0 * p.num_kv_heads * p.head_size + 5], 0x7E);
  EXPECT_EQ(b.cache.value_cache.data<uint8_t>()[slot1 * p.num_kv_heads * p.head_size + 7], 0xFE);
  for (float x : ops_test::to_floats(out)) ASSERT_TRUE(std::isfinite(x));
}

TEST(PagedAttentionEdges, Errors) {
  Problem p;
  p.seqs = {{3, 2}, {0, 1}};
  p.num_heads = 4, p.num_kv_heads = 2, p.head_size = 8, p.block_size = 4;
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  ForwardContext ctx;
  const std::string op = "paged_attention: ";
  auto call = [&](auto&& edit) {
    return [&, edit] {
      Bench b = attention_test::build(p);
      ops::PagedAttentionOptions o;
      edit(b, o);
      ops::paged_attention(ctx, b.q, b.k, b.v, b.cache, b.md, o);
    };
  };
  expect_invalid(call([](Bench& b, auto&) { b.q = b.q.narrow(1, 0, 3); }),
                 op + "num_heads 3 of `q` must be a multiple of the caches' num_kv_heads 2");
  expect_invalid(call([](Bench& b, auto&) { b.q = b.q.narrow(2, 0, 4); }), op + "`q` has head_size 4 but the caches 8");
  expect_invalid(call([](Bench& b, auto&) { b.v = Tensor(); }),
                 op + "`k` and `v` must both be given or both be undefined");
  expect_invalid(call([](Bench& b, auto&) {
                   b.q = ops_test::make_tensor(std::vector<float>(3 * 32), {3, 4, 8}, DType::kF16);
                 }),
                 op + "`k` must have the dtype of `q` (f16), got bf16[3, 2, 8] on cpu");
  expect_invalid(call([](Bench& b, auto&) {
                   b.md.query_start_loc = i32({0, 2, 1});
                 }),
                 op + "`query_start_loc` must be non-decreasing, got 2 then 1 at 1");
  expect_invalid(call([](Bench& b, auto&) {
                   b.md.query_start_loc = i32({1, 2, 3});
                 }),
                 op + "query_start_loc[0] must be 0, got 1");
  expect_invalid(call([](Bench& b, auto&) {
                   b.md.query_start_loc = i32({0, 2});
                 }),
                 op + "`query_start_loc` must have 3 entries, got i32[2] on cpu");
  expect_invalid(call([](Bench& b, auto&) {
                   b.md.seq_lens = i32({1, 1});
                 }),
                 op + "seq_lens[0] = 1 is below its 2 query tokens");
  expect_invalid(call([](Bench& b, auto&) {
                   b.md.seq_lens = i32({9, 1});
                 }),
                 op + "seq_lens[0] = 9 needs 3 blocks but `block_table` has 2 per sequence");
  expect_invalid(call([](Bench& b, auto&) {
                   b.md.block_table = b.md.block_table.clone(), b.md.block_table.data<int32_t>()[1] = 7;
                 }),
                 op + "block_table[0][1] = 7 is outside the cache's 5 blocks");
  expect_invalid(call([](Bench& b, auto&) {
                   b.md.block_table = Tensor::from_vector<int64_t>({0, 1, 2, 3}, {2, 2});
                 }),
                 op + "`block_table` must be i32 [num_seqs = 2, max_blocks_per_seq] with a contiguous last dimension, "
                      "got i64[2, 2] on cpu");
  expect_invalid(
      call([](Bench& b, auto&) {
        b.md.slot_mapping = b.md.slot_mapping.clone(), b.md.slot_mapping.data<int64_t>()[1] += 1;
      }),
      op + "slot_mapping[1] = " + [&] {
        Bench b = attention_test::build(p);
        const int64_t s = b.md.slot_mapping.data<int64_t>()[1];
        return std::to_string(s + 1) + " but the block table puts token 1 (sequence 0, position 4) at slot " +
               std::to_string(s);
      }());
  expect_invalid(call([](Bench& b, auto&) { b.md.slot_mapping = b.md.slot_mapping.narrow(0, 0, 2); }),
                 op + "`slot_mapping` has 2 entries for 3 new tokens");
  expect_invalid(
      call([](Bench& b, auto&) {
        b.md.query_start_loc = i32({0, 2, 2}), b.md.seq_lens = i32({5, 0});
      }),
      op + "slot_mapping[2] = " +
          [&] {
            Bench b = attention_test::build(p);
            return std::to_string(b.md.slot_mapping.data<int64_t>()[2]);
          }() +
          " belongs to a padding row and must be negative");
  expect_invalid(call([](Bench& b, auto&) {
                   b.md.query_start_loc = i32({0, 2, 4}), b.md.seq_lens = i32({5, 2});
                 }),
                 op + "query_start_loc[2] = 4 is beyond the 3 rows of `q`");
  expect_invalid(call([](Bench&, ops::PagedAttentionOptions& o) { o.scale = 0.0f; }),
                 op + "`scale` must be finite and positive, got 0");
  expect_invalid(call([](Bench&, ops::PagedAttentionOptions& o) { o.softcap = -1.0f; }),
                 op + "`softcap` must be finite and non-negative (0: off), got -1");
  expect_invalid(call([](Bench&, ops::PagedAttentionOptions& o) { o.window_left = -2; }),
                 op + "`window_left` and `window_right` must be >= -1 (-1: unbounded), got (-2, -1)");
  expect_invalid(call([](Bench&, ops::PagedAttentionOptions& o) { o.read_mode = ops::AttentionReadMode::kFp8Compute; }),
                 op + "`q_scale` is an undefined tensor");
  expect_invalid(call([](Bench&, ops::PagedAttentionOptions& o) {
                   o.read_mode = ops::AttentionReadMode::kFp8Compute;
                   o.q_scale = Tensor::from_vector<float>({1, 1, 1});
                 }),
                 op +
                     "`q_scale` must be a contiguous f32 tensor of shape [1] or [num_kv_heads] (num_kv_heads = 2), got "
                     "f32[3] on cpu");
  expect_invalid(call([](Bench& b, ops::PagedAttentionOptions& o) {
                   o.out = Tensor::empty({3, 4, 8}, DType::kF32);
                 }),
                 op + "`out` must be bf16, got f32[3, 4, 8] on cpu");
  expect_invalid(call([](Bench& b, auto&) {
                   b.cache.k_scale = Tensor::from_vector<float>({1, 1, 1});
                 }),
                 op + "k_scale and v_scale must be of shape [1] or [num_heads] (num_heads = 2), got [3] and [1]");
  expect_error(call([](Bench& b, auto&) {
                 b.q = ops_test::fake_cuda_tensor({3, 4, 8}, DType::kBF16);
               }),
               ErrorCode::kInvalidArgument, op + "`q` is on cuda:0 but the context is on cpu");

  p.cache_dtype = KvCacheDtype::kAuto;
  expect_invalid(call([](Bench&, ops::PagedAttentionOptions& o) {
                   o.read_mode = ops::AttentionReadMode::kFp8Compute;
                   o.q_scale = Tensor::from_vector<float>({1});
                 }),
                 op + "the fp8 compute read mode needs an fp8_e4m3 cache, got kv_cache_dtype auto");
  expect_invalid(call([](Bench& b, auto&) {
                   b.k = ops_test::make_tensor(std::vector<float>(48), {3, 2, 8}, DType::kF16), b.v = b.k;
                 }),
                 op + "`k` must have the dtype of `q` (bf16), got f16[3, 2, 8] on cpu");
}

TEST(PagedAttentionEdges, CudaTensorsInACpuBuild) {
  // A CUDA build routes these to its kernels (tests/gpu/test_attention_cuda.cpp).
  if (cuda_built()) GTEST_SKIP() << "CUDA build";
  ForwardContext ctx(Device::cuda(0));
  auto cu = [](const Shape& s, DType d) { return ops_test::fake_cuda_tensor(s, d); };
  ops::PagedKvCache cache{cu({4, 4, 2, 8}, DType::kBF16), cu({4, 4, 2, 8}, DType::kBF16), KvCacheDtype::kAuto, {}, {}};
  ops::AttentionMetadata md{cu({2}, DType::kI32), cu({1}, DType::kI32), cu({1, 2}, DType::kI32), cu({1}, DType::kI64)};
  expect_error(
      [&] {
        ops::paged_attention(ctx, cu({1, 4, 8}, DType::kBF16), cu({1, 2, 8}, DType::kBF16), cu({1, 2, 8}, DType::kBF16),
                             cache, md);
      },
      ErrorCode::kUnsupported, "paged_attention: fp8kit was built without CUDA");
}

}  // namespace
}  // namespace fp8kit
