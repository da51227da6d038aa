// Argument block of paged_attention (include/fp8kit/ops/attention.h), validated by
// attention.cpp: raw pointers, strides in elements, the metadata arrays and the options. The CPU
// reference (attention_ref.h), the fast CPU path (attention_cpu.h) and the CUDA launcher
// (attention_cuda.h) take the same struct. Pointers live on the op's device; `scratch` is
// workspace memory of the CPU paths, `plan` and `device_scratch` are the CUDA launcher's
// (attention_plan.h).
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"
#include "fp8kit/ops/attention.h"
#include "ops/attention/attention_plan.h"
#include "ops/kv_cache/kv_cache_args.h"

namespace fp8kit::ops {

struct PagedAttentionArgs {
  int64_t num_tokens = 0;  // rows of q and out; rows past query_start_loc[num_seqs] are padding
  int64_t num_heads = 0, num_kv_heads = 0, head_size = 0;
  int64_t num_seqs = 0;
  const void* q = nullptr;  // [num_tokens, num_heads, head_size] of dtype
  int64_t q_token_stride = 0, q_head_stride = 0;
  DType dtype = DType::kBF16;  // of q and out (and of an auto cache)
  void* out = nullptr;         // [num_tokens, num_heads, head_size], contiguous

  const void* key_cache = nullptr;  // elements of dtype (auto) or bytes (fp8)
  const void* value_cache = nullptr;
  PagedCacheLayout key_layout, value_layout;
  KvCacheDtype cache_dtype = KvCacheDtype::kAuto;
  const float* k_scale = nullptr;  // fp8 caches: [num_kv_heads] or [1]
  const float* v_scale = nullptr;
  int64_t kv_scale_stride = 0;  // 0: per tensor, 1: per KV head

  const int32_t* query_start_loc = nullptr;  // [num_seqs + 1]
  const int32_t* seq_lens = nullptr;         // [num_seqs]
  const int32_t* block_table = nullptr;      // [num_seqs, *], row r at block_table + r * block_table_stride
  int64_t block_table_stride = 0;
  int64_t max_blocks_per_seq = 0;  // block_table.size(1)
  int64_t max_seq_len = 0;         // CPU: max over seq_lens (sizes the scratch); CUDA: unused

  float scale = 1.0f;
  float softcap = 0.0f;                         // 0: off
  int64_t window_left = -1, window_right = -1;  // -1: unbounded
  bool causal = true;
  AttentionReadMode read_mode = AttentionReadMode::kDequantize;
  const float* q_scale = nullptr;  // kFp8Compute: [num_kv_heads] or [1]
  int64_t q_scale_stride = 0;

  // CPU scratch: num_parts rows of scratch_floats_per_part() floats.
  float* scratch = nullptr;
  int num_parts = 1;

  // CUDA: what runs (plan_paged_attention) and its workspace scratch of plan.scratch_bytes.
  PagedAttentionPlan plan;
  void* device_scratch = nullptr;
};

// Floats of scratch one part needs: q, the accumulator and one widened K/V row (3 head_size), plus
// the logits of one row (max_seq_len: kFp8Compute in the reference, every row in the fast path).
inline int64_t scratch_floats_per_part(const PagedAttentionArgs& a) { return 3 * a.head_size + a.max_seq_len; }

// The keys query `pos` of a sequence of `seq_len` tokens sees: [first, last] (empty when first >
// last), from the causal flag and the window.
struct VisibleKeys {
  int64_t first = 0, last = -1;
};
inline VisibleKeys visible_keys(const PagedAttentionArgs& a, int64_t pos, int64_t seq_len) {
  VisibleKeys v{0, seq_len - 1};
  if (a.window_left >= 0) v.first = pos - a.window_left > 0 ? pos - a.window_left : 0;
  if (a.window_right >= 0 && pos + a.window_right < v.last) v.last = pos + a.window_right;
  if (a.causal && pos < v.last) v.last = pos;
  return v;
}

}  // namespace fp8kit::ops
