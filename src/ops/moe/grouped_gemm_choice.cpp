// Grouped GEMM kernel and block-size choice (grouped_gemm_choice.h).
#include "ops/moe/grouped_gemm_choice.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "core/check.h"

namespace fp8kit::ops {

GroupedKernel choose_grouped_kernel(ExpertQuant quant, int sm, const char* forced) {
  const std::string_view f = forced != nullptr ? forced : "";
  FP8KIT_CHECK_ARG(f.empty() || f == "mma" || f == "simt", "FP8KIT_MOE_GEMM={}: expected mma or simt", f);
  if (quant == ExpertQuant::kWeightOnly && f != "simt" && sm >= 80) return GroupedKernel::kW8A16;
  if (quant != ExpertQuant::kFp8W8A8 || f == "simt" || sm < 89) return GroupedKernel::kSimt;
  if (f == "mma") return GroupedKernel::kMma;
  return sm == 90 ? GroupedKernel::kWgmma : GroupedKernel::kMma;
}

int64_t choose_grouped_block_m(int64_t slots, int64_t global_num_experts, GroupedKernel kernel, const char* forced) {
  const std::string_view f = forced != nullptr ? forced : "";
  if (f == "16") return 16;
  if (f == "64") return 64;
  if (f == "128") return 128;
  FP8KIT_CHECK_ARG(f.empty(), "FP8KIT_MOE_BLOCK_M={}: expected 16, 64 or 128", f);
  if (kernel == GroupedKernel::kW8A16) return slots <= 16 * global_num_experts ? 16 : 128;
  if (kernel != GroupedKernel::kWgmma) return slots <= 32 * global_num_experts ? 16 : 64;
  if (slots <= 12 * global_num_experts) return 16;
  return slots <= 384 * global_num_experts ? 64 : 128;
}

int64_t choose_grouped_k_splits(int64_t ctas, int64_t k_tiles, int sms, bool block, const char* forced) {
  const std::string_view f = forced != nullptr ? forced : "";
  if (!f.empty()) {
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), n);
    FP8KIT_CHECK_ARG(ec == std::errc() && end == f.data() + f.size() && n >= 1 && n <= 64,
                     "FP8KIT_MOE_K_SPLITS={}: expected a count from 1 to 64", f);
    return std::max<int64_t>(1, std::min(n, k_tiles));
  }
  if (!block || ctas <= 0 || k_tiles <= 0 || sms <= 0) return 1;
  const int64_t wanted = (4 * int64_t(sms) + ctas - 1) / ctas;
  const int64_t most = k_tiles / 8;
  return std::max<int64_t>(1, std::min(wanted, most));
}

}  // namespace fp8kit::ops
