// Overrides::parse (include/fp8kit/runtime/overrides.h): one parser per kind of value, each
// error naming the variable, what it got and what it accepts; the process-wide instance.
// It lives in core (below the runtime that hands it to ops) because process-wide code there reads
// the process overrides: the thread pool and the CUDA launch checks. Tested by
// tests/cpu/test_overrides.cpp.
#include "fp8kit/runtime/overrides.h"

#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "core/check.h"
#include "core/parallel.h"

namespace fp8kit {
namespace {

using Lookup = std::function<const char*(const char*)>;

std::optional<std::string_view> read(const Lookup& lookup, const char* name) {
  const char* value = lookup(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string_view(value);
}

// A decimal integer in [lo, hi]; anything else (signs, spaces, exponents, overflow) is an error.
int64_t parse_integer(std::string_view name, std::string_view text, int64_t lo, int64_t hi) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  FP8KIT_CHECK_ARG(ec == std::errc() && end == text.data() + text.size() && value >= lo && value <= hi,
                   "{}='{}': expected an integer from {} to {}", name, text, lo, hi);
  return value;
}

void read_integer(const Lookup& lookup, const char* name, int64_t lo, int64_t hi, auto& field) {
  if (auto text = read(lookup, name)) field = static_cast<std::remove_reference_t<decltype(field)>>(parse_integer(name, *text, lo, hi));
}

void read_flag(const Lookup& lookup, const char* name, bool& field) {
  if (auto text = read(lookup, name)) {
    FP8KIT_CHECK_ARG(*text == "0" || *text == "1", "{}='{}': expected 0 or 1", name, *text);
    field = *text == "1";
  }
}

// One of `choices` (name, value) pairs; the error lists them.
template <typename E>
void read_choice(const Lookup& lookup, const char* name, std::initializer_list<std::pair<std::string_view, E>> choices,
                 E& field) {
  auto text = read(lookup, name);
  if (!text) return;
  std::string accepted;
  for (const auto& [word, value] : choices) {
    if (*text == word) {
      field = value;
      return;
    }
    accepted += accepted.empty() ? "" : ", ";
    accepted += word;
  }
  fail(ErrorCode::kInvalidArgument, "{}='{}': expected one of {}", name, *text, accepted);
}

std::mutex g_process_mutex;
std::optional<Overrides> g_process;

}  // namespace

Overrides Overrides::parse(const Lookup& lookup) {
  Overrides o;
  if (auto text = read(lookup, "FP8KIT_NUM_THREADS")) o.num_threads = parse_thread_count(*text, "FP8KIT_NUM_THREADS");
  read_flag(lookup, "FP8KIT_PIN_THREADS", o.pin_threads);
  read_choice<CpuBackend>(lookup, "FP8KIT_CPU_BACKEND",
                          {{"auto", CpuBackend::kAuto}, {"reference", CpuBackend::kReference}, {"fast", CpuBackend::kFast}},
                          o.cpu_backend);
  read_flag(lookup, "FP8KIT_DEBUG_SYNC", o.debug_sync);
  read_flag(lookup, "FP8KIT_PDL", o.pdl);
  read_choice<GemmBackendOverride>(lookup, "FP8KIT_GEMM_BACKEND",
                                   {{"decode", GemmBackendOverride::kDecode},
                                    {"wgmma", GemmBackendOverride::kWgmma},
                                    {"cublaslt", GemmBackendOverride::kCublasLt},
                                    {"fallback", GemmBackendOverride::kFallback}},
                                   o.gemm_backend);
  read_integer(lookup, "FP8KIT_DECODE_K_SPLITS", 1, 64, o.decode_k_splits);
  read_choice<WeightOnlyGemmOverride>(
      lookup, "FP8KIT_WEIGHT_ONLY_GEMM",
      {{"cuda_core", WeightOnlyGemmOverride::kCudaCore}, {"tiled", WeightOnlyGemmOverride::kTiled}}, o.weight_only_gemm);
  read_flag(lookup, "FP8KIT_FORCE_WEIGHT_ONLY", o.force_weight_only);
  read_integer(lookup, "FP8KIT_FUSED_MOE_CHUNK_SIZE", 1, int64_t(1) << 40, o.fused_moe_chunk_size);
  read_choice<MoeGemmOverride>(lookup, "FP8KIT_MOE_GEMM", {{"mma", MoeGemmOverride::kMma}, {"simt", MoeGemmOverride::kSimt}},
                               o.moe_gemm);
  if (auto text = read(lookup, "FP8KIT_MOE_BLOCK_M")) {
    FP8KIT_CHECK_ARG(*text == "16" || *text == "64" || *text == "128", "FP8KIT_MOE_BLOCK_M='{}': expected 16, 64 or 128",
                     *text);
    o.moe_block_m = static_cast<int>(parse_integer("FP8KIT_MOE_BLOCK_M", *text, 16, 128));
  }
  read_flag(lookup, "FP8KIT_MOE_FAST_ACCUM", o.moe_fast_accum);
  read_integer(lookup, "FP8KIT_MOE_K_SPLITS", 1, 64, o.moe_k_splits);
  read_choice<AttentionKernelOverride>(lookup, "FP8KIT_ATTENTION_KERNEL",
                                      {{"simt", AttentionKernelOverride::kSimt}, {"mma", AttentionKernelOverride::kMma}},
                                      o.attention_kernel);
  read_integer(lookup, "FP8KIT_ATTENTION_SPLITS", 1, 64, o.attention_splits);
  read_integer(lookup, "FP8KIT_Q_SCALE_CONSTANT", 1, 1 << 30, o.q_scale_constant);
  read_integer(lookup, "FP8KIT_K_SCALE_CONSTANT", 1, 1 << 30, o.k_scale_constant);
  read_integer(lookup, "FP8KIT_V_SCALE_CONSTANT", 1, 1 << 30, o.v_scale_constant);
  return o;
}

Overrides Overrides::from_environment() {
  return parse([](const char* name) { return std::getenv(name); });
}

const Overrides& process_overrides() {
  std::lock_guard<std::mutex> lock(g_process_mutex);
  if (!g_process) g_process = Overrides::from_environment();
  return *g_process;
}

void set_process_overrides(const Overrides& overrides) {
  std::lock_guard<std::mutex> lock(g_process_mutex);
  g_process = overrides;
}

const std::vector<std::string>& override_variable_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> seen;
    Overrides::parse([&](const char* name) -> const char* {
      seen.emplace_back(name);
      return nullptr;
    });
    return seen;
  }();
  return names;
}

}  // namespace fp8kit
