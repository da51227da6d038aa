// determine_expert_map (spec 1.9): which global experts an expert-parallel rank owns. Ranks
// 0 .. ep_size-2 own floor(E / ep_size) consecutive experts each; the last rank owns the rest.
// Tested by tests/cpu/test_moe_routing_align.cpp.
#include <vector>

#include "core/check.h"
#include "fp8kit/ops/moe_routing.h"

namespace fp8kit::ops {

std::pair<int64_t, Tensor> determine_expert_map(int64_t ep_size, int64_t ep_rank, int64_t global_num_experts) {
  FP8KIT_CHECK_ARG(ep_size >= 1, "determine_expert_map: `ep_size` must be positive, got {}", ep_size);
  FP8KIT_CHECK_ARG(ep_rank >= 0 && ep_rank < ep_size, "determine_expert_map: `ep_rank` {} is outside [0, {})", ep_rank,
                   ep_size);
  FP8KIT_CHECK_ARG(global_num_experts >= 1, "determine_expert_map: `global_num_experts` must be positive, got {}",
                   global_num_experts);
  if (ep_size == 1) return {global_num_experts, Tensor()};
  const int64_t base = global_num_experts / ep_size;
  const int64_t first = ep_rank * base;
  const int64_t local = ep_rank < ep_size - 1 ? base : global_num_experts - first;
  std::vector<int32_t> map(size_t(global_num_experts), -1);
  for (int64_t i = 0; i < local; ++i) map[size_t(first + i)] = int32_t(i);
  return {local, Tensor::from_vector(map)};
}

}  // namespace fp8kit::ops
