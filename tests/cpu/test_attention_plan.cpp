// plan_paged_attention (src/ops/attention/attention_plan.h): which CUDA kernel serves a call, its
// item shape, the split count from the grid size and the block table's length, the forcing
// overrides and their errors, the scratch layout; and the exact FP8 -> f16 / bf16 widening of the
// tensor-core kernel's sm_80 path (fp8_widen.h) on all 256 codes of both formats.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "expect_error.h"
#include "fp8kit/fp8.h"
#include "ops/attention/attention_mma_shape.h"
#include "ops/attention/attention_plan.h"
#include "ops/attention/block_divider.h"
#include "ops/attention/fp8_widen.h"

namespace fp8kit::ops {
namespace {

using testing::expect_error;

// Llama-3-8B attention (32 query heads, 8 KV heads, head size 128), bf16, FP8 cache, H200.
PagedAttentionDesc llama(int64_t tokens, int64_t seqs, int64_t max_len) {
  PagedAttentionDesc d;
  d.num_tokens = tokens, d.num_seqs = seqs;
  d.num_heads = 32, d.num_kv_heads = 8, d.head_size = 128;
  d.max_seq_len_bound = max_len;
  d.dtype = DType::kBF16;
  d.cache_dtype = KvCacheDtype::kFp8E4M3;
  d.cache_rows_aligned16 = true;
  d.sm_count = 132, d.compute_capability = 90, d.max_shared_bytes = 232448;
  return d;
}

TEST(AttentionPlan, DecodeOfOneSequenceSplitsTheContext) {
  const PagedAttentionPlan p = plan_paged_attention(llama(1, 1, 4096), {});
  EXPECT_EQ(p.kernel, AttentionKernel::kMma);
  EXPECT_EQ(p.rows_per_item, 8);  // a decode step of 4 group heads: an 8-row item
  EXPECT_EQ(p.warps_m, 1);
  EXPECT_EQ(p.warps_n, 4);
  EXPECT_EQ(p.items_bound, 2);  // ceil(4 packed rows / 8) + 1 sequence
  // 8 blocks (one item x 8 KV heads) for 528 slots of four blocks an SM: 66 splits wanted, at
  // most 4096 / 512 = 8 by the length (the FP8 decode kernel's split keys).
  EXPECT_EQ(p.splits, 8);
  EXPECT_EQ(p.items_offset, 0);
  EXPECT_EQ(p.count_offset, 256);
  EXPECT_EQ(p.partial_acc_offset, 512);
  EXPECT_EQ(p.partial_ml_offset, 512 + 8 * 32 * 128 * 4);
  EXPECT_EQ(p.scratch_bytes, 512 + 8 * 32 * 128 * 4 + 8 * 32 * 2 * 4);
  EXPECT_NE(p.reason.find("8 split(s), 3 stages, 4 CTAs an SM"), std::string::npos) << p.reason;
  // Its 8-row items of head size 128 run the decode kernel (attention_mma_decode.cuh).
  EXPECT_EQ(p.reason.rfind("mma decode, 8-row items", 0), 0u) << p.reason;
  EXPECT_EQ(attention_mma_shared_bytes(128, 1), attention_mma_decode_shared_bytes(128, true, 2));
  EXPECT_EQ(attention_mma_shared_bytes(256, 1), attention_mma_tile_shared_bytes(256, 1));
}

// The decode kernel streams an FP8 cache through 16-key tiles in up to 4 stages a warp, 3 CTAs an
// SM: the most stages that keep the residency of the fewest (each CTA also takes the 1 KiB the
// system reserves), and holds a 16-bit cache's tiles in registers, 2 CTAs an SM.
TEST(AttentionPlan, DecodeStagesAsTheSharedMemoryAllows) {
  const size_t fixed = 16 * 136 * 2 + 512 * 4 + 16 * 4;  // q, the table chunk, the q exponents
  // A 16-bit cache's decode needs the merge buffer alone: 4 warps x 16 rows x (8 * 20 + 1) floats + m, l.
  const size_t merge = 4 * 16 * 161 * 4 + 4 * 16 * 2 * 4;
  EXPECT_EQ(attention_mma_decode_shared_bytes(128, false, 0), fixed + merge);
  EXPECT_EQ(attention_mma_decode_shared_bytes(128, true, 4), fixed + 4 * 4 * (4096 + 128));  // 74,048
  EXPECT_EQ(attention_mma_decode_shared_bytes(128, true, 3), fixed + 4 * 3 * (4096 + 128));  // 57,152
  EXPECT_EQ(attention_mma_decode_shared_bytes(128, true, 2), fixed + merge);  // the merge buffer is larger
  // 16-row items (3 tokens a sequence), the H200: 228 KiB an SM, 227 KiB a block.
  PagedAttentionDesc d = llama(3 * 32, 32, 4096);
  PagedAttentionPlan p = plan_paged_attention(d, {});
  EXPECT_EQ(p.rows_per_item, 16);
  EXPECT_EQ(p.decode_stages, 4);
  EXPECT_EQ(p.ctas_per_sm, 3);  // 233472 / (74048 + 1024) = 3.1
  EXPECT_NE(p.reason.find(", 4 stages, 3 CTAs an SM"), std::string::npos) << p.reason;
  d.shared_bytes_per_sm = 200 * 1024;  // 4 stages fit 2 CTAs; 3 stages keep the 3 of 2 stages
  p = plan_paged_attention(d, {});
  EXPECT_EQ(p.decode_stages, 3);
  EXPECT_EQ(p.ctas_per_sm, 3);
  d.compute_capability = 89, d.max_shared_bytes = 101376, d.shared_bytes_per_sm = 102400;  // sm_89
  p = plan_paged_attention(d, {});
  EXPECT_EQ(p.kernel, AttentionKernel::kMma);
  EXPECT_EQ(p.decode_stages, 2);  // 3 stages would leave one CTA an SM
  EXPECT_EQ(p.ctas_per_sm, 2);
  d.cache_dtype = KvCacheDtype::kAuto;
  p = plan_paged_attention(d, {});
  EXPECT_EQ(p.decode_stages, 0);
  EXPECT_EQ(p.ctas_per_sm, 2);
  // Prefill and the tile kernel's head size take no stages.
  d = llama(4 * 2048, 4, 2048);
  EXPECT_EQ(plan_paged_attention(d, {}).rows_per_item, 64);
  EXPECT_EQ(plan_paged_attention(d, {}).decode_stages, 0);
  d = llama(32, 32, 4096), d.head_size = 256;
  EXPECT_EQ(plan_paged_attention(d, {}).decode_stages, 0);
  // 8-row items: 4 CTAs an SM by the launch bounds, in 3 stages (233472 / (57152 + 1024) = 4.01; 4
  // stages would leave 3).
  d = llama(32, 32, 4096);
  p = plan_paged_attention(d, {});
  EXPECT_EQ(p.rows_per_item, 8);
  EXPECT_EQ(p.decode_stages, 3);
  EXPECT_EQ(p.ctas_per_sm, 4);
  EXPECT_NE(p.reason.find(", 3 stages, 4 CTAs an SM"), std::string::npos) << p.reason;
  d.shared_bytes_per_sm = 200 * 1024;  // 3 stages fit 3 CTAs, 2 stages keep 4
  p = plan_paged_attention(d, {});
  EXPECT_EQ(p.decode_stages, 2);
  EXPECT_EQ(p.ctas_per_sm, 4);
  d.compute_capability = 89, d.max_shared_bytes = 101376, d.shared_bytes_per_sm = 102400;  // sm_89
  p = plan_paged_attention(d, {});
  EXPECT_EQ(p.decode_stages, 2);
  EXPECT_EQ(p.ctas_per_sm, 2);
}

// Decode steps of at most 8 packed rows a sequence (G <= 8 group heads a token) take 8-row items,
// which the decode kernel runs with the operands swapped; more rows a sequence, a group of 16 or
// the tile kernel's head size keep 16-row items.
TEST(AttentionPlan, DecodeStepsOfEightRowsOrFewerTakeEightRowItems) {
  auto with_group = [](int64_t tokens, int64_t seqs, int64_t heads, int64_t kv_heads) {
    PagedAttentionDesc d = llama(tokens, seqs, 4096);
    d.num_heads = heads, d.num_kv_heads = kv_heads;
    return plan_paged_attention(d, {});
  };
  for (int64_t kv : {32, 16, 8, 4}) {  // G 1, 2, 4, 8
    const PagedAttentionPlan p = with_group(64, 64, 32, kv);
    EXPECT_EQ(p.rows_per_item, 8) << "G " << 32 / kv;
    EXPECT_EQ(p.items_bound, (64 * (32 / kv) + 7) / 8 + 64) << "G " << 32 / kv;
  }
  EXPECT_EQ(with_group(64, 64, 32, 2).rows_per_item, 16);  // G 16
  EXPECT_EQ(with_group(2 * 64, 64, 32, 8).rows_per_item, 8);   // 2 tokens of 4 heads a sequence
  EXPECT_EQ(with_group(3 * 64, 64, 32, 8).rows_per_item, 16);  // 12 rows a sequence
  EXPECT_EQ(with_group(8 * 64, 64, 32, 32).rows_per_item, 8);  // G 1, 8 tokens a sequence
  PagedAttentionDesc d = llama(32, 32, 4096);
  d.cache_dtype = KvCacheDtype::kAuto;  // a 16-bit cache too, 2 CTAs an SM
  PagedAttentionPlan p = plan_paged_attention(d, {});
  EXPECT_EQ(p.rows_per_item, 8);
  EXPECT_EQ(p.decode_stages, 0);
  EXPECT_EQ(p.ctas_per_sm, 2);
  d = llama(32, 32, 4096), d.head_size = 64;
  EXPECT_EQ(plan_paged_attention(d, {}).rows_per_item, 8);
  d.head_size = 256;  // the tile kernel's decode shape
  EXPECT_EQ(plan_paged_attention(d, {}).rows_per_item, 16);
  Overrides simt;
  simt.attention_kernel = AttentionKernelOverride::kSimt;
  EXPECT_EQ(plan_paged_attention(llama(32, 32, 4096), simt).rows_per_item, 16);
}

// The split counts the H200's sweeps measured best (docs/PERFORMANCE.md, paged attention).
TEST(AttentionPlan, SplitsShrinkAsTheGridFills) {
  // An FP8 cache's decode steps (8-row items): 528 slots (4 CTAs an SM), a split's fixed cost 512
  // keys.
  EXPECT_EQ(plan_paged_attention(llama(128, 128, 1024), {}).splits, 1);  // 1024 blocks: 1.9 waves already
  EXPECT_EQ(plan_paged_attention(llama(64, 64, 2048), {}).splits, 1);    // 512 blocks: one wave
  EXPECT_EQ(plan_paged_attention(llama(32, 32, 4096), {}).splits, 2);    // 256 blocks: one wave of 2048 keys
  EXPECT_EQ(plan_paged_attention(llama(16, 16, 8192), {}).splits, 4);    // 128 blocks: one wave of 512
  EXPECT_EQ(plan_paged_attention(llama(8, 8, 16384), {}).splits, 8);     // 64 blocks: one wave of 512
  EXPECT_EQ(plan_paged_attention(llama(64, 64, 4096), {}).splits, 1);
  EXPECT_EQ(plan_paged_attention(llama(40, 40, 4096), {}).splits, 3);    // 320 blocks: 2 waves of 1366 keys
  EXPECT_EQ(plan_paged_attention(llama(1, 1, 16384), {}).splits, 32);    // 16384 / 512 by the length
  EXPECT_EQ(plan_paged_attention(llama(1, 1, 1000), {}).splits, 2);
  EXPECT_EQ(plan_paged_attention(llama(1, 1, 300), {}).splits, 1);
  const PagedAttentionPlan p = plan_paged_attention(llama(32, 32, 4096), {});
  EXPECT_EQ(p.items_bound, 16 + 32);
  // 16-row items (3 tokens a sequence): 396 slots (3 CTAs an SM).
  EXPECT_EQ(plan_paged_attention(llama(3 * 64, 64, 2048), {}).splits, 2);  // 512 blocks: 3 waves of 1k keys
  EXPECT_EQ(plan_paged_attention(llama(3 * 32, 32, 4096), {}).splits, 3);  // 256 blocks: 2 waves of 1366 keys
  EXPECT_EQ(plan_paged_attention(llama(3 * 8, 8, 16384), {}).splits, 6);   // 64 blocks: one wave of 384
  // A bf16 cache: 264 slots (2 CTAs an SM): 64 blocks split 4 ways fill one wave (5 would take
  // two, 33 one wave of splits too short for their fixed cost of 256 keys).
  auto bf16 = [](int64_t tokens, int64_t seqs, int64_t max_len) {
    PagedAttentionDesc d = llama(tokens, seqs, max_len);
    d.cache_dtype = KvCacheDtype::kAuto;
    return plan_paged_attention(d, {}).splits;
  };
  EXPECT_EQ(bf16(8, 8, 16384), 4);
  EXPECT_EQ(bf16(16, 16, 8192), 2);   // 128 blocks
  EXPECT_EQ(bf16(32, 32, 4096), 1);   // 256 blocks: one wave already
  EXPECT_EQ(bf16(64, 64, 4096), 1);   // 512 blocks: two full waves
  EXPECT_EQ(bf16(40, 40, 4096), 4);   // 320: 1280 blocks fill 5 waves
  EXPECT_EQ(bf16(1, 1, 16384), 33);   // 8 blocks: one wave of 264
  EXPECT_EQ(bf16(1, 1, 300), 2);      // 300 keys: two splits at most
  EXPECT_EQ(bf16(1, 1, 16), 1);
}

TEST(AttentionPlan, PrefillTakesSixtyFourRowItemsAndNoSplit) {
  const PagedAttentionPlan p = plan_paged_attention(llama(2048, 1, 2048), {});
  EXPECT_EQ(p.kernel, AttentionKernel::kMma);
  EXPECT_EQ(p.rows_per_item, 64);
  EXPECT_EQ(p.warps_m, 4);
  EXPECT_EQ(p.warps_n, 1);
  EXPECT_EQ(p.items_bound, 2048 * 4 / 64 + 1);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.count_offset, 1280);  // 129 items of 8 bytes, rounded up to 256
  EXPECT_EQ(p.scratch_bytes, 1536);
  // A mixed batch that averages more than 16 packed rows a sequence is prefill-shaped too.
  EXPECT_EQ(plan_paged_attention(llama(2048 + 31, 32, 4096), {}).rows_per_item, 64);
  EXPECT_EQ(plan_paged_attention(llama(4 * 32, 32, 4096), {}).rows_per_item, 16);  // 4 tokens each
}

TEST(AttentionPlan, CudaCoresWhereTheTensorCoreKernelCannotServe) {
  auto reason_of = [](PagedAttentionDesc d) {
    const PagedAttentionPlan p = plan_paged_attention(d, {});
    EXPECT_EQ(p.kernel, AttentionKernel::kSimt);
    EXPECT_EQ(p.rows_per_item, 16);
    return p.reason;
  };
  PagedAttentionDesc d = llama(1, 1, 4096);
  d.dtype = DType::kF32;
  EXPECT_EQ(reason_of(d).rfind("simt (the query dtype is not f16 or bf16), 16-row items", 0), 0u) << reason_of(d);
  d = llama(1, 1, 4096), d.head_size = 96;
  EXPECT_NE(reason_of(d).find("the head size is not 64, 128 or 256"), std::string::npos);
  d = llama(1, 1, 4096), d.read_mode = AttentionReadMode::kFp8Compute;
  EXPECT_NE(reason_of(d).find("the fp8 compute read mode runs on CUDA cores"), std::string::npos);
  d = llama(1, 1, 4096), d.compute_capability = 75;
  EXPECT_NE(reason_of(d).find("needs sm_80"), std::string::npos);
  d = llama(1, 1, 4096), d.cache_rows_aligned16 = false;
  EXPECT_NE(reason_of(d).find("16-byte aligned"), std::string::npos);
  d = llama(2048, 1, 2048), d.dtype = DType::kF32;  // prefill on CUDA cores keeps 16-row items
  EXPECT_EQ(plan_paged_attention(d, {}).rows_per_item, 16);
}

TEST(AttentionPlan, PrefillShapeOnlyWhereTheSharedMemoryHoldsIt) {
  // sm_89 opts in to 99 KiB a block: head size 256 with 64-row items needs 101888 bytes (Q, one
  // stage of K and V, the stage's key flags and the rows' q exponents).
  EXPECT_EQ(attention_mma_shared_bytes(256, 4), size_t(64 * 264 * 2 + 64 * 264 * 2 * 2 + 64 * 4 + 64 * 4));
  PagedAttentionDesc d = llama(2048, 1, 2048);
  d.head_size = 256, d.compute_capability = 89, d.max_shared_bytes = 101376;
  const PagedAttentionPlan p = plan_paged_attention(d, {});
  EXPECT_EQ(p.kernel, AttentionKernel::kMma);
  EXPECT_EQ(p.rows_per_item, 16);
  d.max_shared_bytes = 232448;
  EXPECT_EQ(plan_paged_attention(d, {}).rows_per_item, 64);
  d.max_shared_bytes = 48 * 1024;  // not even the decode shape
  EXPECT_EQ(plan_paged_attention(d, {}).kernel, AttentionKernel::kSimt);
}

TEST(AttentionPlan, OverridesForceKernelAndSplits) {
  Overrides o;
  o.attention_kernel = AttentionKernelOverride::kSimt;
  EXPECT_EQ(plan_paged_attention(llama(2048, 1, 2048), o).kernel, AttentionKernel::kSimt);
  EXPECT_EQ(plan_paged_attention(llama(2048, 1, 2048), o).rows_per_item, 16);
  o = {};
  o.attention_splits = 7;
  EXPECT_EQ(plan_paged_attention(llama(2048, 1, 2048), o).splits, 7);
  PagedAttentionDesc fp8 = llama(1, 1, 4096);
  fp8.read_mode = AttentionReadMode::kFp8Compute;
  EXPECT_EQ(plan_paged_attention(fp8, o).splits, 1);  // the row max comes first: one split
  o.attention_splits = 64;  // 64 x 4096 rows x 32 heads x 130 floats would be 4.3 GB: halved to 4
  EXPECT_EQ(plan_paged_attention(llama(4096, 4096, 4096), o).splits, 4);
  o = {};
  o.attention_kernel = AttentionKernelOverride::kMma;
  PagedAttentionDesc f32 = llama(1, 1, 4096);
  f32.dtype = DType::kF32;
  expect_error([&] { plan_paged_attention(f32, o); }, ErrorCode::kUnsupported,
               "paged_attention: FP8KIT_ATTENTION_KERNEL=mma cannot serve this call: the query dtype is not f16 or "
               "bf16");
}

TEST(AttentionPlan, UnsupportedShapesAndEmptyBatches) {
  PagedAttentionDesc d = llama(1, 1, 4096);
  d.head_size = 640;
  expect_error([&] { plan_paged_attention(d, {}); }, ErrorCode::kUnsupported,
               "paged_attention: head_size 640 is not supported on CUDA (1 to 512)");
  d = llama(0, 3, 4096);
  const PagedAttentionPlan p = plan_paged_attention(d, {});
  EXPECT_EQ(p.items_bound, 0);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(plan_paged_attention(llama(5, 0, 4096), {}).items_bound, 0);
}

// Every FP8 code widened to f16 / bf16 bits equals the bits of its exact value (NaN: a NaN of the
// same sign).
TEST(AttentionPlan, Fp8WidensExactlyToSixteenBits) {
  for (uint32_t b = 0; b < 256; ++b) {
    const float e4 = e4m3fn_bits_to_float(uint8_t(b)), e5 = e5m2_bits_to_float(uint8_t(b));
    const uint16_t got[4] = {fp8_widen::e4m3_to_16<5>(b), fp8_widen::e4m3_to_16<8>(b), fp8_widen::e5m2_to_f16(b),
                             fp8_widen::e5m2_to_bf16(b)};
    const float got_f[4] = {f16_to_float(Float16{got[0]}), bf16_to_float(BFloat16{got[1]}),
                            f16_to_float(Float16{got[2]}), bf16_to_float(BFloat16{got[3]})};
    const float want[4] = {e4, e4, e5, e5};
    for (int k = 0; k < 4; ++k) {
      if (std::isnan(want[k])) {
        EXPECT_TRUE(std::isnan(got_f[k])) << "code " << b << " form " << k;
        EXPECT_EQ(std::signbit(got_f[k]), std::signbit(want[k])) << "code " << b << " form " << k;
      } else {
        EXPECT_EQ(float_to_bits(got_f[k]), float_to_bits(want[k])) << "code " << b << " form " << k;
      }
    }
  }
}

// The kernels' branch-free division of key positions by the block size equals j / bs: every
// position below 2^16 for the block sizes up to 1024, and positions near the top of the int32
// range (and every residue around a multiple) for block sizes up to 2^31 - 1.
TEST(AttentionPlan, BlockDividerDividesExactly) {
  std::vector<uint32_t> sizes;
  for (uint32_t bs = 1; bs <= 1024; ++bs) sizes.push_back(bs);
  for (uint32_t bs : {1536u, 4095u, 65537u, 1000003u, 1u << 20, (1u << 30) - 1, 1u << 30, (1u << 30) + 1,
                      2147483647u}) {
    sizes.push_back(bs);
  }
  for (const uint32_t bs : sizes) {
    const BlockDividerMagic d = block_divider_magic(bs);
    const uint32_t dense = bs <= 1024 ? (1u << 16) : 4096u;
    for (uint32_t j = 0; j < dense; ++j) {
      ASSERT_EQ(block_divider_quotient(j, d), j / bs) << "j " << j << " bs " << bs;
    }
    for (uint32_t j = 0x7fffffffu - 4096u; j <= 0x7fffffffu - 1u; ++j) {
      ASSERT_EQ(block_divider_quotient(j, d), j / bs) << "j " << j << " bs " << bs;
    }
    ASSERT_EQ(block_divider_quotient(0x7fffffffu, d), 0x7fffffffu / bs) << "bs " << bs;
    for (uint64_t q = 1; q * bs < 0x7fffffffu; q = q * 3 + 1) {
      for (int64_t delta = -2; delta <= 1; ++delta) {
        const uint64_t j = q * bs + uint64_t(delta);
        if (j >= 0x80000000u) continue;
        ASSERT_EQ(block_divider_quotient(uint32_t(j), d), uint32_t(j) / bs) << "j " << j << " bs " << bs;
      }
    }
  }
}

}  // namespace
}  // namespace fp8kit::ops
