// Grouped GEMM kernel and block-size choice (grouped_gemm_choice.h).
#include "ops/moe/grouped_gemm_choice.h"

#include <algorithm>

namespace fp8kit::ops {

GroupedKernel choose_grouped_kernel(ExpertQuant quant, int sm, MoeGemmOverride forced) {
  if (quant == ExpertQuant::kWeightOnly && forced != MoeGemmOverride::kSimt && sm >= 80) return GroupedKernel::kW8A16;
  if (quant != ExpertQuant::kFp8W8A8 || forced == MoeGemmOverride::kSimt || sm < 89) return GroupedKernel::kSimt;
  if (forced == MoeGemmOverride::kMma) return GroupedKernel::kMma;
  return sm == 90 ? GroupedKernel::kWgmma : GroupedKernel::kMma;
}

int64_t choose_grouped_block_m(int64_t slots, int64_t global_num_experts, GroupedKernel kernel, int forced) {
  if (forced == 16 || forced == 64 || forced == 128) return forced;
  if (kernel == GroupedKernel::kW8A16) return slots <= 16 * global_num_experts ? 16 : 128;
  if (kernel != GroupedKernel::kWgmma) return slots <= 32 * global_num_experts ? 16 : 64;
  if (slots <= 12 * global_num_experts) return 16;
  return slots <= 384 * global_num_experts ? 64 : 128;
}

int64_t choose_grouped_k_splits(int64_t ctas, int64_t k_tiles, int sms, bool block, int forced) {
  if (forced > 0) return std::max<int64_t>(1, std::min<int64_t>(forced, k_tiles));
  if (!block || ctas <= 0 || k_tiles <= 0 || sms <= 0) return 1;
  const int64_t wanted = (4 * int64_t(sms) + ctas - 1) / ctas;
  const int64_t most = k_tiles / 8;
  return std::max<int64_t>(1, std::min(wanted, most));
}

}  // namespace fp8kit::ops
