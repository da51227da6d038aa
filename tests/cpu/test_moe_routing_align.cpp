// determine_expert_map and moe_align_block_size on the CPU reference (src/ops/moe/expert_map.cpp,
// moe_align_ref.cpp): expert-parallel maps for ep 1..4 with the remainder on the last rank, the
// padded segmentation for several block sizes worked out by hand, expert_map remapping, the
// ascending order inside a segment, and the exact error texts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cpu/expect_error.h"
#include "fp8kit/ops/moe_routing.h"
#include "test_context.h"

namespace fp8kit {
namespace {

using testing::expect_invalid;

std::vector<int32_t> values_i32(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

TEST(MoeRoutingExpertMap, SingleRankOwnsEverything) {
  const auto [local, map] = ops::determine_expert_map(1, 0, 8);
  EXPECT_EQ(local, 8);
  EXPECT_FALSE(map.defined());
}

TEST(MoeRoutingExpertMap, EvenSplit) {
  const auto [l0, m0] = ops::determine_expert_map(2, 0, 8);
  const auto [l1, m1] = ops::determine_expert_map(2, 1, 8);
  EXPECT_EQ(l0, 4);
  EXPECT_EQ(l1, 4);
  EXPECT_EQ(values_i32(m0), (std::vector<int32_t>{0, 1, 2, 3, -1, -1, -1, -1}));
  EXPECT_EQ(values_i32(m1), (std::vector<int32_t>{-1, -1, -1, -1, 0, 1, 2, 3}));
  EXPECT_EQ(m0.dtype(), DType::kI32);
}

TEST(MoeRoutingExpertMap, LastRankOwnsTheRemainder) {
  // 10 experts over 3 ranks: 3, 3, 4. Over 4 ranks: 2, 2, 2, 4.
  EXPECT_EQ(values_i32(ops::determine_expert_map(3, 0, 10).second),
            (std::vector<int32_t>{0, 1, 2, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(values_i32(ops::determine_expert_map(3, 1, 10).second),
            (std::vector<int32_t>{-1, -1, -1, 0, 1, 2, -1, -1, -1, -1}));
  const auto [l2, m2] = ops::determine_expert_map(3, 2, 10);
  EXPECT_EQ(l2, 4);
  EXPECT_EQ(values_i32(m2), (std::vector<int32_t>{-1, -1, -1, -1, -1, -1, 0, 1, 2, 3}));
  const auto [l3, m3] = ops::determine_expert_map(4, 3, 10);
  EXPECT_EQ(l3, 4);
  EXPECT_EQ(values_i32(m3), (std::vector<int32_t>{-1, -1, -1, -1, -1, -1, 0, 1, 2, 3}));
  EXPECT_EQ(ops::determine_expert_map(4, 1, 10).first, 2);
}

TEST(MoeRoutingExpertMap, EveryExpertHasExactlyOneOwner) {
  for (int64_t ep : {2, 3, 4}) {
    for (int64_t e : {8, 10, 64, 130, 256}) {
      std::vector<int> owners(size_t(e), 0);
      int64_t total = 0;
      for (int64_t r = 0; r < ep; ++r) {
        const auto [local, map] = ops::determine_expert_map(ep, r, e);
        total += local;
        int32_t next = 0;
        for (int64_t x = 0; x < e; ++x) {
          const int32_t v = map.data<int32_t>()[x];
          if (v < 0) continue;
          ++owners[size_t(x)];
          EXPECT_EQ(v, next++) << "ep " << ep << " rank " << r;  // local ids are consecutive
        }
        EXPECT_EQ(next, local);
      }
      EXPECT_EQ(total, e);
      for (int c : owners) EXPECT_EQ(c, 1);
    }
  }
}

TEST(MoeRoutingExpertMap, Errors) {
  expect_invalid([] { ops::determine_expert_map(0, 0, 8); }, "determine_expert_map: `ep_size` must be positive, got 0");
  expect_invalid([] { ops::determine_expert_map(2, 2, 8); }, "determine_expert_map: `ep_rank` 2 is outside [0, 2)");
  expect_invalid([] { ops::determine_expert_map(2, 0, 0); },
                 "determine_expert_map: `global_num_experts` must be positive, got 0");
}

// topk_ids [[0, 2], [2, 1], [0, 2]]: expert 0 holds slots {0, 4}, expert 1 {3}, expert 2 {1, 2, 5},
// expert 3 none. The sentinel is numel = 6.
const std::vector<int32_t> kIds = {0, 2, 2, 1, 0, 2};
constexpr int32_t S = 6;

TEST(MoeRoutingAlign, BlockSizeFour) {
  const auto r = ops::moe_align_block_size(cpu_ctx(), Tensor::from_vector(kIds, {3, 2}), 4, 4);
  // Segments of 4, 4, 4, 0: max_padded = 6 + 4 * 3 = 18, 5 blocks, the last two past the total.
  EXPECT_EQ(values_i32(r.sorted_token_ids), (std::vector<int32_t>{0, 4, S, S, 3, S, S, S, 1, 2, 5, S, S, S, S, S, S, S}));
  EXPECT_EQ(values_i32(r.expert_ids), (std::vector<int32_t>{0, 1, 2, 0, 0}));
  EXPECT_EQ(values_i32(r.num_tokens_post_padded), (std::vector<int32_t>{12}));
}

TEST(MoeRoutingAlign, BlockSizeOneHasNoPadding) {
  const auto r = ops::moe_align_block_size(cpu_ctx(), Tensor::from_vector(kIds, {3, 2}), 1, 4);
  EXPECT_EQ(values_i32(r.sorted_token_ids), (std::vector<int32_t>{0, 4, 3, 1, 2, 5}));
  EXPECT_EQ(values_i32(r.expert_ids), (std::vector<int32_t>{0, 0, 1, 2, 2, 2}));
  EXPECT_EQ(values_i32(r.num_tokens_post_padded), (std::vector<int32_t>{6}));
}

TEST(MoeRoutingAlign, BlockSizeSixteen) {
  const auto r = ops::moe_align_block_size(cpu_ctx(), Tensor::from_vector(kIds, {3, 2}), 16, 4);
  std::vector<int32_t> want(66, S);  // 6 + 4 * 15
  want[0] = 0;
  want[1] = 4;
  want[16] = 3;
  want[32] = 1;
  want[33] = 2;
  want[34] = 5;
  EXPECT_EQ(values_i32(r.sorted_token_ids), want);
  EXPECT_EQ(values_i32(r.expert_ids), (std::vector<int32_t>{0, 1, 2, 0, 0}));
  EXPECT_EQ(values_i32(r.num_tokens_post_padded), (std::vector<int32_t>{48}));
}

TEST(MoeRoutingAlign, PadSortedIdsRoundsUpToTheBlock) {
  const auto r = ops::moe_align_block_size(cpu_ctx(), Tensor::from_vector(kIds, {3, 2}), 4, 4, Tensor(), true);
  EXPECT_EQ(r.sorted_token_ids.numel(), 20);  // 18 rounded up to 4
  EXPECT_EQ(r.expert_ids.numel(), 5);
  EXPECT_EQ(values_i32(r.sorted_token_ids)[19], S);
}

TEST(MoeRoutingAlign, ExpertMapRemapsBlocks) {
  // This rank holds experts 1 and 3; blocks of experts 0 and 2 (and the tail, expert 0) become -1.
  const Tensor map = Tensor::from_vector<int32_t>({-1, 0, -1, 1});
  const auto r = ops::moe_align_block_size(cpu_ctx(), Tensor::from_vector(kIds, {3, 2}), 4, 4, map);
  EXPECT_EQ(values_i32(r.expert_ids), (std::vector<int32_t>{-1, 0, -1, -1, -1}));
  EXPECT_EQ(values_i32(r.num_tokens_post_padded), (std::vector<int32_t>{12}));
  EXPECT_EQ(values_i32(r.sorted_token_ids)[4], 3);  // slots are not remapped
}

TEST(MoeRoutingAlign, I64IdsAndStridedIdsGiveTheSameResult) {
  const std::vector<int64_t> ids64(kIds.begin(), kIds.end());
  const auto want = ops::moe_align_block_size(cpu_ctx(), Tensor::from_vector(kIds, {3, 2}), 4, 4);
  const auto r = ops::moe_align_block_size(cpu_ctx(), Tensor::from_vector(ids64, {3, 2}), 4, 4);
  EXPECT_EQ(values_i32(r.sorted_token_ids), values_i32(want.sorted_token_ids));
  EXPECT_EQ(values_i32(r.expert_ids), values_i32(want.expert_ids));
  // The transpose of [[0, 2, 0], [2, 1, 2]] is kIds as a strided view.
  const Tensor t = Tensor::from_vector<int32_t>({0, 2, 0, 2, 1, 2}, {2, 3}).t();
  EXPECT_EQ(values_i32(ops::moe_align_block_size(cpu_ctx(), t, 4, 4).sorted_token_ids), values_i32(want.sorted_token_ids));
}

TEST(MoeRoutingAlign, RandomIdsSegmentInAscendingOrder) {
  std::mt19937 rng(9);
  for (int64_t e : {8, 64, 256}) {
    for (int64_t bs : {16, 64, 128}) {
      const int64_t m = 333, topk = 8;
      std::uniform_int_distribution<int32_t> pick(0, int32_t(e - 1));
      std::vector<int32_t> ids(size_t(m * topk));
      for (auto& v : ids) v = pick(rng);
      const auto r = ops::moe_align_block_size(cpu_ctx(), Tensor::from_vector(ids, {m, topk}), bs, e);
      const auto sorted = values_i32(r.sorted_token_ids);
      const auto experts = values_i32(r.expert_ids);
      int64_t pos = 0;
      for (int64_t x = 0; x < e; ++x) {
        std::vector<int32_t> slots;
        for (size_t i = 0; i < ids.size(); ++i) {
          if (ids[i] == x) slots.push_back(int32_t(i));
        }
        const int64_t padded = (int64_t(slots.size()) + bs - 1) / bs * bs;
        for (int64_t i = 0; i < padded; ++i) {
          const int32_t want = i < int64_t(slots.size()) ? slots[size_t(i)] : int32_t(m * topk);
          ASSERT_EQ(sorted[size_t(pos + i)], want) << "e " << e << " bs " << bs << " expert " << x;
        }
        for (int64_t b = pos / bs; b < (pos + padded) / bs; ++b) ASSERT_EQ(experts[size_t(b)], x);
        pos += padded;
      }
      EXPECT_EQ(r.num_tokens_post_padded.data<int32_t>()[0], pos);
      for (size_t i = size_t(pos); i < sorted.size(); ++i) ASSERT_EQ(sorted[i], m * topk);
    }
  }
}

TEST(MoeRoutingAlign, Errors) {
  const Tensor ids = Tensor::from_vector<int32_t>({0, 4, 1, 2}, {2, 2});
  expect_invalid([&] { ops::moe_align_block_size(cpu_ctx(), ids, 4, 4); },
                 "moe_align_block_size: `topk_ids` holds expert 4 at flat index 1, outside [0, 4)");
  expect_invalid([&] { ops::moe_align_block_size(cpu_ctx(), Tensor::from_vector<int32_t>({0, -1}), 4, 4); },
                 "moe_align_block_size: `topk_ids` holds expert -1 at flat index 1, outside [0, 4)");
  expect_invalid([&] { ops::moe_align_block_size(cpu_ctx(), ids, 0, 8); },
                 "moe_align_block_size: `block_size` must be positive, got 0");
  expect_invalid([&] { ops::moe_align_block_size(cpu_ctx(), ids, 4, 0); },
                 "moe_align_block_size: `num_experts` must be positive, got 0");
  expect_invalid([&] { ops::moe_align_block_size(cpu_ctx(), Tensor::zeros({2, 2}, DType::kF32), 4, 8); },
                 "moe_align_block_size: `topk_ids` must be i32 or i64, got f32[2, 2] on cpu");
  expect_invalid([&] { ops::moe_align_block_size(cpu_ctx(), ids, 4, 8, Tensor::from_vector<int32_t>({0, 1, 2, 3})); },
                 "moe_align_block_size: `expert_map` must be i32 of shape [8] (num_experts, the global count), got "
                 "i32[4] on cpu");
}

}  // namespace
}  // namespace fp8kit
