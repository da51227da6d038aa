// Public entry point of moe_align_block_size (include/fp8kit/ops/moe_routing.h, spec 1.10):
// validates once, allocates the three outputs and routes to moe_align_ref.cpp or
// moe_align_cuda.cu. Tested by tests/cpu/test_moe_routing_align.cpp.
#include <limits>

#include "fp8kit/ops/moe_routing.h"
#include "ops/moe/routing_cuda.h"
#include "ops/moe/routing_ref.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

MoeAlignResult moe_align_block_size(const ForwardContext& ctx, const Tensor& topk_ids, int64_t block_size,
                                    int64_t num_experts, const Tensor& expert_map, bool pad_sorted_ids) {
  constexpr std::string_view kOp = "moe_align_block_size";
  const Stream stream = ctx.stream();
  require_defined(kOp, topk_ids, "topk_ids");
  require_same_device(kOp, expert_map, "expert_map", topk_ids, "topk_ids");
  require_backend(kOp, topk_ids.device());
  FP8KIT_CHECK_ARG(topk_ids.dtype() == DType::kI32 || topk_ids.dtype() == DType::kI64,
                   "{}: `topk_ids` must be i32 or i64, got {}", kOp, topk_ids.description());
  FP8KIT_CHECK_ARG(block_size >= 1, "{}: `block_size` must be positive, got {}", kOp, block_size);
  FP8KIT_CHECK_ARG(num_experts >= 1, "{}: `num_experts` must be positive, got {}", kOp, num_experts);
  if (expert_map.defined()) {
    FP8KIT_CHECK_ARG(expert_map.dtype() == DType::kI32 && expert_map.dim() == 1 && expert_map.size(0) == num_experts,
                     "{}: `expert_map` must be i32 of shape [{}] (num_experts, the global count), got {}", kOp,
                     num_experts, expert_map.description());
  }
  const int64_t numel = topk_ids.numel();
  int64_t max_padded = numel + num_experts * (block_size - 1);
  if (pad_sorted_ids) max_padded = (max_padded + block_size - 1) / block_size * block_size;
  // The outputs are i32 (spec 2.5), and the sentinel numel must fit as well.
  FP8KIT_CHECK_ARG(max_padded <= std::numeric_limits<int32_t>::max(),
                   "{}: {} routed slots padded for {} experts of block {} exceed the i32 range of `sorted_token_ids`",
                   kOp, numel, num_experts, block_size);
  const int64_t num_blocks = (max_padded + block_size - 1) / block_size;

  const Tensor ids = contiguous_on(topk_ids, stream);
  const Tensor map = expert_map.defined() ? contiguous_on(expert_map, stream) : Tensor();
  const Device device = topk_ids.device();
  MoeAlignResult r;
  r.sorted_token_ids = Tensor::empty({max_padded}, DType::kI32, device);
  r.expert_ids = Tensor::empty({num_blocks}, DType::kI32, device);
  r.num_tokens_post_padded = Tensor::empty({1}, DType::kI32, device);

  MoeAlignArgs a;
  a.topk_ids = ids.data_ptr();
  a.ids_dtype = ids.dtype();
  a.numel = numel;
  a.num_experts = num_experts;
  a.block_size = block_size;
  a.expert_map = map.defined() ? static_cast<const int32_t*>(map.data_ptr()) : nullptr;
  a.sorted_token_ids = static_cast<int32_t*>(r.sorted_token_ids.data_ptr());
  a.max_padded = max_padded;
  a.expert_ids = static_cast<int32_t*>(r.expert_ids.data_ptr());
  a.num_blocks = num_blocks;
  a.num_tokens_post_padded = static_cast<int32_t*>(r.num_tokens_post_padded.data_ptr());
  const Tensor scratch = device.is_cuda() ? Tensor::empty({kMoeAlignMaxWarps * num_experts}, DType::kI32, device) : Tensor();
  if (scratch.defined()) a.warp_offsets = static_cast<int32_t*>(scratch.data_ptr());
  route(kOp, ctx, device, a, moe_align_ref, moe_align_cuda);
  return r;
}

}  // namespace fp8kit::ops
