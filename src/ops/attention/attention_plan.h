// How paged_attention runs on CUDA: a pure function of what the host knows about a call (shapes,
// dtypes, the read mode, the device) and the overrides, with no device access, so that it is
// tested on the CPU (tests/cpu/test_attention_plan.cpp). The launcher (attention_cuda.cu)
// executes the plan; the entry (attention.cpp) takes the scratch it names from the workspace.
//
// Work is cut into items: an item is up to rows_per_item query rows of one sequence for one KV
// head, rows packed as (query token i, query head g of the KV group) -> i * G + g, so one item
// reads each of its KV head's cached blocks once for all G heads that share it (GQA). An item's
// keys may be split into `splits` ranges (flash-decoding), each written as f32 partials (running
// max, sum, unnormalized output) and merged by a combine kernel.
#pragma once

#include <cstdint>
#include <string>

#include "fp8kit/dtype.h"
#include "fp8kit/ops/attention.h"
#include "fp8kit/runtime/overrides.h"

namespace fp8kit::ops {

enum class AttentionKernel : uint8_t {
  kSimt,  // CUDA cores: any dtype and head size up to kAttentionMaxHeadSizeSimt, both read modes
  kMma,   // mma.sync m16n8k16 (sm_80+): f16/bf16 queries, head sizes 64/128/256, kDequantize
};
const char* attention_kernel_name(AttentionKernel kernel);  // "simt", "mma"

inline constexpr int64_t kAttentionMaxHeadSizeSimt = 512;
inline constexpr int kAttentionMaxSplits = 64;

// What the host knows about a call: no metadata values (they live on the device).
struct PagedAttentionDesc {
  int64_t num_tokens = 0;  // rows of q (padding included)
  int64_t num_seqs = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_size = 0;
  // An upper bound of every seq_len: the block table's width times the block size (the host does
  // not read seq_lens on CUDA).
  int64_t max_seq_len_bound = 0;
  DType dtype = DType::kBF16;  // of q and out
  KvCacheDtype cache_dtype = KvCacheDtype::kAuto;
  AttentionReadMode read_mode = AttentionReadMode::kDequantize;
  // The caches' base pointers and strides allow 16-byte loads of every head row.
  bool cache_rows_aligned16 = false;
  int sm_count = 132;
  int compute_capability = 90;                // major * 10 + minor
  int64_t max_shared_bytes = 232448;          // dynamic shared memory a block may opt in to (H100/H200: 227 KiB)
  int64_t shared_bytes_per_sm = 233472;       // shared memory of an SM (H100/H200: 228 KiB)
};

struct PagedAttentionPlan {
  AttentionKernel kernel = AttentionKernel::kSimt;
  int rows_per_item = 16;   // query rows (token x group head) of one item: 8 (mma decode, G <= 8), 16 or 64
  int warps_m = 1;          // mma: warps along the rows (16 each); warps_m * warps_n = 4
  int warps_n = 4;          // mma: warps along a tile's keys
  int splits = 1;           // key ranges per item, merged by the combine kernel when > 1
  // mma decode kernel with an FP8 cache: its tiles' stages in shared memory a warp (2 to 4, as
  // many as the device's shared memory holds for its CTAs an SM; 0 otherwise).
  int decode_stages = 0;
  int ctas_per_sm = 2;      // of the kernel, by its launch bounds and shared memory: the splits' slots
  int64_t items_bound = 0;  // grid size along the items: at least the items any metadata can need
  // Scratch on the device (workspace bytes, 256-byte aligned offsets): the item list and its count,
  // then (splits > 1) the partials.
  int64_t items_offset = 0, count_offset = 0, partial_acc_offset = 0, partial_ml_offset = 0;
  int64_t scratch_bytes = 0;
  std::string reason;  // why this kernel and split count (for tests and the benchmark's report)
};

// The plan, or Error(kUnsupported) naming what CUDA cannot serve (a head size above
// kAttentionMaxHeadSizeSimt). Overrides: attention_kernel (simt | mma; mma where it cannot serve
// is an error naming the reason), attention_splits (1..64; kFp8Compute always takes 1).
PagedAttentionPlan plan_paged_attention(const PagedAttentionDesc& desc, const Overrides& overrides);

}  // namespace fp8kit::ops
