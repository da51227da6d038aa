// The launcher of paged_attention on CUDA (attention_cuda.h): the kernels' parameter block from
// the args, then the schedule, the attention kernel of the plan and, for split items, the combine.
// Reference: attention_ref.cpp. Floors: attention_mma.cuh; tests: tests/gpu/test_attention_cuda.cpp.
#include "ops/attention/attention_common.cuh"
#include "ops/attention/attention_cuda.h"
#include "ops/attention/attention_launch.h"
#include "ops/cuda_launch.cuh"

namespace fp8kit::ops {

using namespace attention_kernels;
using namespace cuda_launch;

namespace {

AttnParams params_of(const PagedAttentionArgs& a) {
  AttnParams p{};
  p.num_tokens = a.num_tokens, p.num_heads = a.num_heads, p.num_kv_heads = a.num_kv_heads;
  p.head_size = a.head_size, p.num_seqs = a.num_seqs, p.group = a.num_heads / a.num_kv_heads;
  p.q = a.q, p.q_token_stride = a.q_token_stride, p.q_head_stride = a.q_head_stride;
  p.out = a.out;
  p.cache[0] = a.key_cache, p.cache[1] = a.value_cache;
  const PagedCacheLayout* layouts[2] = {&a.key_layout, &a.value_layout};
  for (int i = 0; i < 2; ++i) {
    p.block_stride[i] = layouts[i]->block_stride;
    p.page_stride[i] = layouts[i]->page_stride;
    p.head_stride[i] = layouts[i]->head_stride;
  }
  p.block_size = a.key_layout.block_size, p.num_blocks = a.key_layout.num_blocks;
  p.kv_scale[0] = a.k_scale, p.kv_scale[1] = a.v_scale, p.kv_scale_stride = a.kv_scale_stride;
  p.query_start_loc = a.query_start_loc, p.seq_lens = a.seq_lens, p.block_table = a.block_table;
  p.block_table_stride = a.block_table_stride, p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.scale = a.scale, p.softcap = a.softcap;
  p.window_left = a.window_left, p.window_right = a.window_right, p.causal = a.causal;
  p.q_scale = a.q_scale, p.q_scale_stride = a.q_scale_stride;
  const PagedAttentionPlan& plan = a.plan;
  p.rows_per_item = plan.rows_per_item, p.splits = plan.splits;
  auto* scratch = static_cast<uint8_t*>(a.device_scratch);
  p.items = reinterpret_cast<const int2*>(scratch + plan.items_offset);
  p.item_count = reinterpret_cast<const int*>(scratch + plan.count_offset);
  if (plan.splits > 1) {
    p.partial_acc = reinterpret_cast<float*>(scratch + plan.partial_acc_offset);
    p.partial_ml = reinterpret_cast<float*>(scratch + plan.partial_ml_offset);
  }
  p.ml_log2 = plan.kernel == AttentionKernel::kMma;
  return p;
}

}  // namespace

void describe_attention_device(PagedAttentionDesc& desc) {
  desc.sm_count = sm_count();
  desc.compute_capability = compute_capability();
  int bytes = 0;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, current_device()));
  desc.max_shared_bytes = bytes;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, current_device()));
  desc.shared_bytes_per_sm = bytes;
}

void paged_attention_cuda(const PagedAttentionArgs& a, Stream stream) {
  if (a.num_tokens == 0) return;
  const cudaStream_t s = to_cuda(stream);
  const AttnParams p = params_of(a);
  const PagedAttentionPlan& plan = a.plan;
  auto* scratch = static_cast<uint8_t*>(a.device_scratch);

  // Schedule: the item list (block 0) and the zeroed padding rows (the other blocks).
  const int64_t out_elements = a.num_tokens * a.num_heads * a.head_size;
  const int64_t zero_blocks = std::min<int64_t>(ceil_div(out_elements, int64_t(kScheduleThreads) * 4), 4 * sm_count());
  dispatch_float(a.dtype, [&](auto t) {
    cuda::launch_pdl(attention_schedule_kernel<decltype(t)>, unsigned(1 + zero_blocks), kScheduleThreads, 0, s, p,
                     reinterpret_cast<int2*>(scratch + plan.items_offset),
                     reinterpret_cast<int*>(scratch + plan.count_offset), plan.items_bound);
    FP8KIT_CHECK_LAUNCH(s, "attention_schedule_kernel");
  });
  if (plan.items_bound == 0) return;

  AttentionLaunch l;
  l.dtype = a.dtype, l.cache_dtype = a.cache_dtype, l.read_mode = a.read_mode;
  l.items_bound = plan.items_bound, l.warps_m = plan.warps_m, l.decode_stages = plan.decode_stages;
  const size_t cache_elem = a.cache_dtype == KvCacheDtype::kAuto ? dtype_size(a.dtype) : 1;
  l.cache_vector = a.head_size % 8 == 0 && aligned16(a.key_cache) && aligned16(a.value_cache) &&
                   strides_aligned16({a.key_layout.block_stride, a.key_layout.page_stride, a.key_layout.head_stride,
                                      a.value_layout.block_stride, a.value_layout.page_stride,
                                      a.value_layout.head_stride},
                                     cache_elem);
  l.q_vector = aligned16(a.q) && strides_aligned16({a.q_token_stride, a.q_head_stride}, dtype_size(a.dtype));
  if (plan.kernel == AttentionKernel::kSimt) {
    launch_attention_simt(p, l, s);
  } else if (a.head_size == 64) {
    launch_attention_mma_d64(p, l, s);
  } else if (a.head_size == 128) {
    launch_attention_mma_d128(p, l, s);
  } else {
    launch_attention_mma_d256(p, l, s);
  }
  if (plan.splits > 1) {
    const unsigned grid = grid_for(a.num_tokens * a.num_heads * 32, kCombineThreads);
    dispatch_float(a.dtype, [&](auto t) {
      cuda::launch_pdl(attention_combine_kernel<decltype(t)>, grid, kCombineThreads, 0, s, p);
      FP8KIT_CHECK_LAUNCH(s, "attention_combine_kernel");
    });
  }
}

}  // namespace fp8kit::ops
