// Paged attention over block tables for a batch of sequences (spec KV_CACHE_ATTENTION.md 1.5,
// 1.7; vLLM's FlashAttention backend): prefill, chunked prefill and decode in one call, GQA,
// bottom-right causal mask, sliding window, logit soft-cap, an auto or FP8 KV cache. The new
// tokens' K/V are written to the cache first (reshape_and_cache_flash, as vLLM's
// do_kv_cache_update runs before forward), then every key, the new ones included, is read back
// from the cache, so an FP8 cache sees its own quantization. CPU reference:
// src/ops/attention/attention_ref.cpp; tests: tests/cpu/test_paged_attention*.cpp.
#pragma once

#include <cstdint>
#include <optional>

#include "fp8kit/ops/kv_cache.h"
#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

// One layer's paged KV cache (kv_cache.h): caches [num_blocks, block_size, num_kv_heads,
// head_size] by strides, their element format and the dequantization scales of an FP8 cache
// (f32 [1] or [num_kv_heads]; ignored for auto).
struct PagedKvCache {
  Tensor key_cache, value_cache;
  KvCacheDtype dtype = KvCacheDtype::kAuto;
  Tensor k_scale, v_scale;
};

// Where the batch's tokens are (vLLM's attention metadata). R sequences; sequence r owns query
// rows [query_start_loc[r], query_start_loc[r + 1]) (q_len of them) and has seq_lens[r] = L
// tokens including them, so ctx = L - q_len tokens are already cached. Its token at position j
// lives in block block_table[r][j / block_size], offset j % block_size.
struct AttentionMetadata {
  Tensor query_start_loc;  // i32 [R + 1]: 0, then non-decreasing, last <= num_tokens (cu_seqlens_q)
  Tensor seq_lens;         // i32 [R]: L >= q_len
  Tensor block_table;      // i32 [R, max_blocks_per_seq], last dimension contiguous
  // i64 [num_new]: the slots of the new tokens' K/V (kv_cache.h). Entries below
  // query_start_loc[R] must be the block table's slot of their token; entries past it (padding)
  // must be negative. Unused (may be undefined) when k and v are not given.
  Tensor slot_mapping;
};

// How the cache is read.
//   kDequantize (default): k^ = f32(decode(byte)) * k_scale[kv_head] in f32 (auto: the cached
//     element widened), dot products in f32, P in f32, the output rounded once to q's dtype.
//   kFp8Compute: an emulation of FlashAttention-3's all-FP8 path, which bounds a future FP8
//     tensor-core kernel: q8 = e4m3(clamp(f32(q) * (1 / q_scale), +-448)) (vLLM's static query
//     quantization; NaN -> +448), raw e4m3 K/V, descales folded into the logit, P~ = exp2(x - (max
//     - 8)) quantized to e4m3, row sums of the unrounded P~, O = acc * ((1 / rowsum) * v_scale).
//     Needs an fp8_e4m3 cache and q_scale. Formulas: docs/numerics.md.
enum class AttentionReadMode : uint8_t { kDequantize, kFp8Compute };

struct PagedAttentionOptions {
  // Softmax scale; default head_size^-0.5. Finite and positive.
  std::optional<float> scale;
  // FlashAttention's (left, right) window around a query at absolute position pos: keys j with
  // pos - window_left <= j <= pos + window_right are visible; -1 is unbounded. vLLM's
  // sliding_window W is (W - 1, 0): W keys, the query's own included. With causal (the default),
  // j <= pos as well (bottom-right aligned: the last query sees the last key).
  int64_t window_left = -1, window_right = -1;
  bool causal = true;
  // Logit soft-cap c > 0: s = c * tanh(s / c), before masking; 0 is off.
  float softcap = 0.0f;
  AttentionReadMode read_mode = AttentionReadMode::kDequantize;
  Tensor q_scale;  // kFp8Compute: f32 [1], or [num_kv_heads] (query heads of group g share q_scale[g])
  Tensor out;      // optional preallocated output: contiguous [num_tokens, num_heads, head_size], q's dtype
};

// ---------------------------------------------------------------------------------------------
// paged_attention(ctx, q, k, v, cache, metadata, options) -> out [num_tokens, num_heads, head_size]
//   q    [num_tokens, num_heads, head_size] f32|f16|bf16, last dimension contiguous, any other
//        strides. num_heads = G * num_kv_heads; query head h reads KV head h / G (GQA).
//   k, v [>= num_new, num_kv_heads, head_size] of q's dtype (strided rows allowed): this step's
//        new keys and values, written to the cache at metadata.slot_mapping before any read. Both
//        undefined: the cache already holds them.
// For query i of sequence r (row query_start_loc[r] + i), head h, pos = ctx + i, the visible keys
// are j in [0, L) with j <= pos (causal) and inside the window; with those,
//   s_j = scale * <q, k^_j>  (then softcap),  out = sum_j softmax(s)_j v^_j,
// computed with the online softmax in key order (m' = max(m, s), l' = l e^(m - m') + e^(s - m'),
// acc' = acc e^(m - m') + e^(s - m') v^). Keys a query does not see, and cache slots past L, are
// never read: NaN or inf there cannot reach the output (vLLM's paged kernel zeroes V rows past L
// for the same reason). A NaN in a visible K or V propagates to the outputs that see it; an inf
// in an auto cache's visible K or V gives inf or NaN there too (an FP8 cache stores +-inf as
// +-max, so it stays finite). A logit of -inf weighs zero. Rows
// past query_start_loc[R] (padding) are zero; no visible key (all logits -inf) gives zeros, as
// FlashAttention does.
// Errors (kInvalidArgument) name the argument: shapes, dtypes, a non-monotone query_start_loc,
// seq_lens below q_len, a sequence longer than its block table, a block id outside the cache, a
// slot that is not the block table's, a bad option; kUnsupported for CUDA tensors (no kernel yet).
// ---------------------------------------------------------------------------------------------
Tensor paged_attention(const ForwardContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                       const PagedKvCache& cache, const AttentionMetadata& metadata,
                       const PagedAttentionOptions& options = {});

}  // namespace fp8kit::ops
