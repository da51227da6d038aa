// The model options of `fp8kit generate` and `fp8kit eval` (run_options.h).
#include "run_options.h"

#include <limits>
#include <sstream>

#include "core/check.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/platform.h"
#include "model/tokenizer/tokenizer_impl.h"

namespace fp8kit::cli {

void add_run_options(CLI::App* cmd, RunArgs& a) {
  cmd->add_option("--quantization", a.quantization,
                  "auto: run the checkpoint as it is (FP8 or 16-bit); fp8: quantize a 16-bit checkpoint online "
                  "(vLLM's --quantization fp8)")
      ->check(CLI::IsMember({"auto", "fp8"}));
  cmd->add_option("--dtype", a.dtype, "compute dtype: auto (config.json's torch_dtype), bfloat16, float16, float32")
      ->check(CLI::IsMember({"auto", "bfloat16", "float16", "float32"}));
  cmd->add_option("--kv-cache-dtype", a.kv_cache_dtype, "KV cache: auto (the model dtype), fp8 (e4m3), fp8_e5m2")
      ->check(CLI::IsMember({"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}));
  cmd->add_option("--kv-cache-memory", a.kv_cache_memory, "KV cache pool size: bytes, or with K/M/G (KiB/MiB/GiB)");
  cmd->add_option("--kv-cache-tokens", a.kv_cache_tokens, "KV cache pool size in tokens")->check(CLI::PositiveNumber);
  cmd->add_flag("--calculate-kv-scales", a.calculate_kv_scales,
                "k/v (and q) scales of an FP8 KV cache from the first step's data (vLLM's --calculate-kv-scales)");
  cmd->add_option("--max-tokens-per-step", a.max_tokens_per_step,
                  "tokens one forward takes at most: longer prompts are prefilled in chunks")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--device", a.device, "where the model runs: cpu, or cuda (the first GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--backend", a.backend,
                  "CPU backend of the ops: fast (vectorized, f32 sums; the default) or reference (the exact "
                  "reference); default: FP8KIT_CPU_BACKEND, else fast")
      ->check(CLI::IsMember({"fast", "reference"}));
  cmd->add_flag("--enforce-eager", a.enforce_eager,
                "CUDA: run every step eagerly instead of replaying CUDA graphs of the decode steps (vLLM's "
                "--enforce-eager)");
}

Overrides run_overrides(const RunArgs& a) {
  Overrides o = process_overrides();
  if (a.backend == "fast") o.cpu_backend = CpuBackend::kFast;
  if (a.backend == "reference") o.cpu_backend = CpuBackend::kReference;
  return o;
}

Device run_device(const RunArgs& a) {
  if (a.device != "cuda") return Device::cpu();
  FP8KIT_CHECK_ARG(cuda_built(), "--device cuda: this fp8kit was built without CUDA");
  FP8KIT_CHECK_ARG(cuda_device_count() > 0, "--device cuda: no CUDA device is visible");
  return Device::cuda(0);
}

ForwardContext run_context(const RunArgs& a) { return ForwardContext(run_device(a), run_overrides(a)); }

EngineOptions engine_options(const RunArgs& a, const std::string& model_dir, int64_t default_kv_tokens) {
  FP8KIT_CHECK_ARG(a.kv_cache_memory.empty() || a.kv_cache_tokens == 0,
                   "give --kv-cache-memory or --kv-cache-tokens, not both");
  EngineOptions o;
  o.load.device = run_device(a);
  o.load.overrides = run_overrides(a);
  const Checkpoint checkpoint = Checkpoint::open(model_dir);
  const auto& config = checkpoint.config();
  const bool quantized_checkpoint = (config.contains("quantization_config") && !config["quantization_config"].is_null()) ||
                                    (config.contains("compression_config") && !config["compression_config"].is_null());
  o.load.quantize = quantized_checkpoint || a.quantization == "fp8";
  if (a.dtype == "bfloat16") o.load.dtype = DType::kBF16;
  if (a.dtype == "float16") o.load.dtype = DType::kF16;
  if (a.dtype == "float32") o.load.dtype = DType::kF32;
  o.kv_cache.dtype = a.kv_cache_dtype;
  o.kv_cache.calculate_kv_scales = a.calculate_kv_scales;
  if (!a.kv_cache_memory.empty()) {
    o.kv_cache.memory_bytes = parse_memory_size(a.kv_cache_memory, "--kv-cache-memory");
  } else {
    o.kv_cache.num_tokens = a.kv_cache_tokens > 0 ? a.kv_cache_tokens : default_kv_tokens;
  }
  o.max_tokens_per_step = a.max_tokens_per_step;
  o.cuda_graphs = !a.enforce_eager;
  return o;
}

std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    FP8KIT_CHECK_ARG(used == word.size() && v >= 0 && v <= std::numeric_limits<int32_t>::max(),
                     "{}: '{}' is not a token id", what, word);
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

int64_t parse_memory_size(const std::string& text, const std::string& what) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  if (unit == "K" || unit == "KiB") shift = 10;
  if (unit == "M" || unit == "MiB") shift = 20;
  if (unit == "G" || unit == "GiB") shift = 30;
  FP8KIT_CHECK_ARG(used > 0 && v > 0 && shift >= 0 && v <= (std::numeric_limits<int64_t>::max() >> shift),
                   "{}: '{}' is not a memory size (bytes, or a number with K, M, G / KiB, MiB, GiB)", what, text);
  return int64_t(v) << shift;
}

std::string read_text_file(const std::string& path, size_t max_bytes) { return tok::read_regular_file(path, max_bytes); }

}  // namespace fp8kit::cli
