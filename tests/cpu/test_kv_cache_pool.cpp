// KvCachePool and kv_pool_blocks (src/model/runner/kv_cache_pool.h): pool sizes from tokens or
// bytes, the refusals, and the reservation accounting that keeps a running request from ever
// finding the pool empty; and the scheduler's batch (positions, slots, block tables).
#include <gtest/gtest.h>

#include "expect_error.h"
#include "model/runner/kv_cache_pool.h"
#include "model/runner/scheduler.h"

namespace fp8kit::runner {
namespace {

KvCacheLayout layout(ops::KvCacheDtype dtype = ops::KvCacheDtype::kAuto) {
  KvCacheLayout l;
  l.num_layers = 3;
  l.num_kv_heads = 2;
  l.head_dim = 8;
  l.model_dtype = DType::kBF16;
  l.dtype = dtype;
  l.block_size = 4;
  return l;
}

TEST(KvCachePool, SizesFromTokensOrBytes) {
  EXPECT_EQ(layout().bytes_per_block(), 2 * 3 * 4 * 2 * 8 * 2);  // 768
  EXPECT_EQ(layout(ops::KvCacheDtype::kFp8E4M3).bytes_per_block(), 384);
  EXPECT_EQ(kv_pool_blocks(layout(), 9, 0), 3);      // rounded up to whole blocks
  EXPECT_EQ(kv_pool_blocks(layout(), 0, 2000), 2);   // rounded down
  testing::expect_invalid([] { kv_pool_blocks(layout(), 4, 768); },
                          "KV cache: give exactly one of a token count and a memory size (got 4 tokens, 768 bytes)");
  testing::expect_invalid([] { kv_pool_blocks(layout(), 0, 100); },
                          "KV cache: 100 bytes do not hold one block of 4 tokens (768 bytes over 3 layers)");
  testing::expect_error_containing([] { kv_pool_blocks(layout(), 0, int64_t(1) << 40); }, ErrorCode::kInvalidArgument,
                                   "more than this machine's memory");
}

TEST(KvCachePool, ReservationsKeepAllocationsInBounds) {
  KvCachePool pool(layout(), 5, Device::cpu());
  EXPECT_EQ(pool.key_cache(2).shape(), (Shape{5, 4, 2, 8}));
  EXPECT_EQ(pool.value_cache(0).dtype(), DType::kBF16);
  EXPECT_EQ(pool.blocks_for(9), 3);
  EXPECT_TRUE(pool.reserve(3));
  EXPECT_FALSE(pool.reserve(3));  // only 2 unreserved
  EXPECT_EQ(pool.unreserved_blocks(), 2);
  std::vector<int32_t> blocks = {pool.allocate_reserved(), pool.allocate_reserved()};
  EXPECT_EQ(blocks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pool.free_blocks(), 3);
  pool.release(blocks, 1);  // one reserved block never taken
  EXPECT_TRUE(blocks.empty());
  EXPECT_EQ(pool.free_blocks(), 5);
  EXPECT_EQ(pool.unreserved_blocks(), 5);
  testing::expect_error([&] { pool.allocate_reserved(); }, ErrorCode::kInternal,
                        "KV cache: a block was taken without a reservation (0 reserved, 5 free)");
  EXPECT_EQ(KvCachePool(layout(ops::KvCacheDtype::kFp8E5M2), 1, Device::cpu()).key_cache(0).dtype(), DType::kU8);
}

TEST(Scheduler, BuildsSlotsAndBlockTables) {
  KvCachePool pool(layout(), 8, Device::cpu());
  Scheduler scheduler(pool, /*max_tokens_per_step=*/6, /*max_num_seqs=*/4);
  for (int64_t id = 0; id < 2; ++id) {
    auto seq = std::make_unique<Sequence>();
    seq->id = id;
    seq->tokens = id == 0 ? std::vector<int32_t>{10, 11, 12, 13, 14} : std::vector<int32_t>{20, 21, 22};
    seq->prompt_len = int64_t(seq->tokens.size());
    seq->params.max_tokens = 2;
    scheduler.add(std::move(seq));
  }
  StepPlan plan = scheduler.schedule();  // sequence 0 whole (5 tokens), then 1 of sequence 1's
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].count, 5);
  EXPECT_TRUE(plan.chunks[0].samples);
  EXPECT_EQ(plan.chunks[1].count, 1);
  EXPECT_FALSE(plan.chunks[1].samples);
  const ForwardBatch& b = plan.batch;
  EXPECT_EQ(std::vector<int64_t>(b.positions.data<int64_t>(), b.positions.data<int64_t>() + 6),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 0}));
  // Sequence 0 holds blocks 0 and 1 (positions 4.. in block 1), sequence 1 block 2.
  EXPECT_EQ(std::vector<int64_t>(b.metadata.slot_mapping.data<int64_t>(), b.metadata.slot_mapping.data<int64_t>() + 6),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 8}));
  EXPECT_EQ(std::vector<int32_t>(b.metadata.block_table.data<int32_t>(), b.metadata.block_table.data<int32_t>() + 4),
            (std::vector<int32_t>{0, 1, 2, 0}));
  EXPECT_EQ(std::vector<int32_t>(b.metadata.seq_lens.data<int32_t>(), b.metadata.seq_lens.data<int32_t>() + 2),
            (std::vector<int32_t>{5, 1}));
  ASSERT_TRUE(b.logit_rows.defined());  // only sequence 0's last row samples
  EXPECT_EQ(b.logit_rows.numel(), 1);
  EXPECT_EQ(b.logit_rows.data<int64_t>()[0], 4);
}

}  // namespace
}  // namespace fp8kit::runner
