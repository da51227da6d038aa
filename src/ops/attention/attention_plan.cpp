// plan_paged_attention (attention_plan.h): which kernel, how many rows per item, how many key
// splits, and the scratch they need. Pure host code; tests: tests/cpu/test_attention_plan.cpp.
#include "ops/attention/attention_plan.h"

#include <algorithm>

#include "core/check.h"
#include "ops/attention/attention_mma_shape.h"

namespace fp8kit::ops {
namespace {

// A split's fixed cost (its start, merge and partials) in keys streamed, and the fewest keys it
// takes: 256 for the kernels of 2 CTAs an SM; 512 for the FP8 cache's decode kernel (3 or 4 CTAs
// an SM, 3 or 4 stages to fill), fitted to its split sweeps on the H200 (docs/PERFORMANCE.md).
constexpr int64_t kSplitKeys = 256;
constexpr int64_t kSplitKeysFp8Decode = 512;
constexpr int64_t kMaxPartialBytes = int64_t(512) << 20;
constexpr int64_t kAlign = 256;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t align_up(int64_t v) { return ceil_div(v, kAlign) * kAlign; }

// Empty when the mma kernel serves the call, else why not.
std::string mma_rejects(const PagedAttentionDesc& d) {
  if (d.compute_capability < 80) return "mma.sync m16n8k16 needs sm_80";
  if (d.dtype != DType::kBF16 && d.dtype != DType::kF16) return "the query dtype is not f16 or bf16";
  if (d.head_size != 64 && d.head_size != 128 && d.head_size != 256) return "the head size is not 64, 128 or 256";
  if (d.read_mode != AttentionReadMode::kDequantize) return "the fp8 compute read mode runs on CUDA cores";
  if (!d.cache_rows_aligned16) return "cache rows are not 16-byte aligned";
  if (int64_t(attention_mma_shared_bytes(d.head_size, 1)) > d.max_shared_bytes) {
    return "the device has too little shared memory";
  }
  return {};
}

}  // namespace

const char* attention_kernel_name(AttentionKernel kernel) { return kernel == AttentionKernel::kMma ? "mma" : "simt"; }

PagedAttentionPlan plan_paged_attention(const PagedAttentionDesc& d, const Overrides& overrides) {
  FP8KIT_CHECK(d.head_size >= 1 && d.head_size <= kAttentionMaxHeadSizeSimt, ErrorCode::kUnsupported,
               "paged_attention: head_size {} is not supported on CUDA (1 to {})", d.head_size,
               kAttentionMaxHeadSizeSimt);
  FP8KIT_CHECK(d.num_kv_heads >= 1 && d.num_kv_heads <= 65535, ErrorCode::kUnsupported,
               "paged_attention: {} KV heads are more than a CUDA grid dimension holds (65535)", d.num_kv_heads);
  PagedAttentionPlan plan;
  const std::string rejected = mma_rejects(d);
  switch (overrides.attention_kernel) {
    case AttentionKernelOverride::kSimt: plan.kernel = AttentionKernel::kSimt; break;
    case AttentionKernelOverride::kMma:
      FP8KIT_CHECK(rejected.empty(), ErrorCode::kUnsupported,
                   "paged_attention: FP8KIT_ATTENTION_KERNEL=mma cannot serve this call: {}", rejected);
      plan.kernel = AttentionKernel::kMma;
      break;
    case AttentionKernelOverride::kAuto:
      plan.kernel = rejected.empty() ? AttentionKernel::kMma : AttentionKernel::kSimt;
      break;
  }
  const int64_t group = d.num_heads / d.num_kv_heads;
  const int64_t seqs = std::max<int64_t>(d.num_seqs, 1);
  const int64_t packed_rows = d.num_tokens * group;  // (token, group head) rows over the batch
  const double rows_per_seq = double(packed_rows) / double(seqs);
  const bool prefill_fits = int64_t(attention_mma_shared_bytes(d.head_size, 4)) <= d.max_shared_bytes;
  if (plan.kernel == AttentionKernel::kMma && rows_per_seq > 16.0 && prefill_fits) {
    plan.rows_per_item = 64, plan.warps_m = 4, plan.warps_n = 1;  // prefill: 4 warps of 16 rows
  } else {
    plan.rows_per_item = 16, plan.warps_m = 1, plan.warps_n = 4;  // decode: 4 warps share the keys
  }
  // 16-row items up to kAttentionMmaDecodeMaxHeadSize run the decode kernel (attention_mma_instances.cuh).
  const bool decode_kernel = plan.kernel == AttentionKernel::kMma && plan.rows_per_item == 16 &&
                             d.head_size <= kAttentionMmaDecodeMaxHeadSize;
  // Decode steps of at most 8 packed rows a sequence (a token's G <= 8 group heads): items of 8
  // rows, which the decode kernel runs with the operands swapped (attention_mma_decode.cuh), 4 CTAs
  // an SM with an FP8 cache.
  const bool n8 =
      decode_kernel && group <= kAttentionMmaDecodeN8Rows && rows_per_seq <= double(kAttentionMmaDecodeN8Rows);
  if (n8) plan.rows_per_item = kAttentionMmaDecodeN8Rows;
  const int64_t rows = plan.rows_per_item;
  // Sum over sequences of ceil(rows_r / rows) <= total / rows + num_seqs.
  plan.items_bound = (d.num_tokens == 0 || d.num_seqs == 0) ? 0 : ceil_div(packed_rows, rows) + d.num_seqs;
  FP8KIT_CHECK(plan.items_bound <= 0x7fffffff, ErrorCode::kUnsupported,
               "paged_attention: {} work items are more than a CUDA grid holds", plan.items_bound);
  const int64_t items_estimate = std::max(std::min(seqs, plan.items_bound), ceil_div(packed_rows, rows));
  const int64_t ctas = std::max<int64_t>(items_estimate * d.num_kv_heads, 1);

  // CTAs an SM: the launch bounds' count where the SM's shared memory holds that many (each CTA
  // also takes 1 KiB the system reserves). An FP8 cache's decode takes the most stages that keep
  // the residency of the fewest: on the H200 4 stages and 3 CTAs for 16-row items, 3 stages and 4
  // CTAs for 8-row ones.
  auto resident = [&](size_t shared, int bound) {
    return int(std::clamp<int64_t>(d.shared_bytes_per_sm / (int64_t(shared) + 1024), 1, bound));
  };
  if (decode_kernel && d.cache_dtype != KvCacheDtype::kAuto) {
    auto shared = [&](int stages) { return attention_mma_decode_shared_bytes(d.head_size, true, stages); };
    const int bound = n8 ? kAttentionMmaDecodeN8Fp8CtasPerSm : kAttentionMmaDecodeFp8CtasPerSm;
    plan.decode_stages = kAttentionMmaDecodeMinStages;
    plan.ctas_per_sm = resident(shared(plan.decode_stages), bound);
    for (int s = kAttentionMmaDecodeMinStages + 1; s <= kAttentionMmaDecodeMaxStages; ++s) {
      if (int64_t(shared(s)) <= d.max_shared_bytes && resident(shared(s), bound) >= plan.ctas_per_sm) {
        plan.decode_stages = s;
      }
    }
  } else if (decode_kernel) {
    plan.ctas_per_sm = resident(attention_mma_decode_shared_bytes(d.head_size, false, 0), kAttentionMmaCtasPerSm);
  }

  // Splits: the count with the least estimated time, waves of the kernel's CTAs an SM times a
  // CTA's keys plus a split's fixed cost, as long as a split keeps that many keys. On the H200,
  // with 2 CTAs an SM (a bf16 cache), 64 CTAs of 16k keys run best in 4 splits (one wave), not 5
  // (two waves) nor 33 (short splits), 256 CTAs of 4k keys unsplit; with the FP8 decode's 3 (16-row
  // items), 512 CTAs of 2k keys in 2 splits, 256 of 4k in 3; with its 4 (8-row items), 512 CTAs of
  // 2k keys unsplit, 256 of 4k in 2, 64 of 16k in 8, the best of 1, 2, 3, 4, 6 or 8 splits at
  // every shape measured (docs/PERFORMANCE.md).
  const int64_t slots = int64_t(plan.ctas_per_sm) * int64_t(d.sm_count);
  const int64_t keys = std::max<int64_t>(d.max_seq_len_bound, 1);
  const int64_t split_keys = plan.decode_stages > 0 ? kSplitKeysFp8Decode : kSplitKeys;
  const int64_t by_length = std::max<int64_t>(ceil_div(keys, split_keys), 1);
  auto time_of = [&](int64_t s) { return ceil_div(ctas * s, slots) * (ceil_div(keys, s) + split_keys); };
  int64_t splits = 1;
  for (int64_t s = 2; s <= std::min<int64_t>(by_length, kAttentionMaxSplits) && ctas * s <= 8 * slots; ++s) {
    if (time_of(s) < time_of(splits)) splits = s;
  }
  if (overrides.attention_splits > 0) splits = overrides.attention_splits;
  if (d.read_mode == AttentionReadMode::kFp8Compute) splits = 1;  // one pass for the row max first
  if (plan.items_bound == 0) splits = 1;
  splits = std::clamp<int64_t>(splits, 1, kAttentionMaxSplits);
  const int64_t partial_rows = d.num_tokens * d.num_heads;
  while (splits > 1 && splits * partial_rows * (d.head_size + 2) * 4 > kMaxPartialBytes) splits /= 2;
  plan.splits = int(splits);

  plan.items_offset = 0;
  plan.count_offset = align_up(std::max<int64_t>(plan.items_bound, 1) * 8);
  int64_t end = plan.count_offset + kAlign;
  if (plan.splits > 1) {
    plan.partial_acc_offset = end;
    end += align_up(splits * partial_rows * d.head_size * 4);
    plan.partial_ml_offset = end;
    end += align_up(splits * partial_rows * 2 * 4);
  }
  plan.scratch_bytes = end;
  plan.reason = std::string(attention_kernel_name(plan.kernel)) + (decode_kernel ? " decode" : "") +
                (rejected.empty() || plan.kernel == AttentionKernel::kMma ? "" : " (" + rejected + ")") + ", " +
                std::to_string(plan.rows_per_item) + "-row items (" + std::to_string(items_estimate) + " x " +
                std::to_string(d.num_kv_heads) + " KV heads), " + std::to_string(plan.splits) + " split(s)" +
                (plan.decode_stages > 0 ? ", " + std::to_string(plan.decode_stages) + " stages" : "") + ", " +
                std::to_string(plan.ctas_per_sm) + " CTAs an SM";
  return plan;
}

}  // namespace fp8kit::ops
