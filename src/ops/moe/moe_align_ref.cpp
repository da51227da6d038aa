// CPU reference of moe_align_block_size (spec 1.10): per-expert counts, segments padded to the
// block size, the block -> expert table (through expert_map), and the flat slot indices grouped by
// expert in ascending order inside each segment. The CUDA kernel (moe_align_cuda.cu) gives the
// same bytes. Tested by tests/cpu/test_moe_routing_align.cpp and tests/gpu/test_moe_routing_cuda.cpp.
#include <vector>

#include "core/check.h"
#include "ops/moe/routing_math.h"
#include "ops/moe/routing_ref.h"

namespace fp8kit::ops {

void moe_align_ref(const MoeAlignArgs& a) {
  const int64_t e = a.num_experts, bs = a.block_size;
  std::vector<int64_t> count(size_t(e), 0);
  for (int64_t i = 0; i < a.numel; ++i) {
    const int64_t id = routing::load_index(a.topk_ids, a.ids_dtype, i);
    FP8KIT_CHECK_ARG(id >= 0 && id < e, "moe_align_block_size: `topk_ids` holds expert {} at flat index {}, outside [0, {})",
                     id, i, e);
    ++count[size_t(id)];
  }
  std::vector<int64_t> start(size_t(e) + 1, 0);
  for (int64_t x = 0; x < e; ++x) start[size_t(x) + 1] = start[size_t(x)] + (count[size_t(x)] + bs - 1) / bs * bs;
  const int64_t total = start[size_t(e)];
  *a.num_tokens_post_padded = int32_t(total);

  // Blocks past the padded total keep expert 0 (the spec's zeros, mapped like the rest).
  const int32_t tail = a.expert_map != nullptr ? a.expert_map[0] : 0;
  for (int64_t b = 0; b < a.num_blocks; ++b) a.expert_ids[b] = tail;
  for (int64_t x = 0; x < e; ++x) {
    const int32_t mapped = a.expert_map != nullptr ? a.expert_map[x] : int32_t(x);
    for (int64_t b = start[size_t(x)] / bs; b < start[size_t(x) + 1] / bs; ++b) a.expert_ids[b] = mapped;
  }

  for (int64_t i = 0; i < a.max_padded; ++i) a.sorted_token_ids[i] = int32_t(a.numel);
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < a.numel; ++i) {
    const int64_t id = routing::load_index(a.topk_ids, a.ids_dtype, i);
    a.sorted_token_ids[next[size_t(id)]++] = int32_t(i);
  }
}

}  // namespace fp8kit::ops
