// What `fp8kit generate` and `fp8kit eval` share: the model options (quantization, dtype, KV
// cache, step budget) registered on a subcommand and turned into EngineOptions, and the parsing
// of token-id lists and memory sizes. Tested through tests/cpu/test_cli_runner.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "fp8kit/model/engine.h"

namespace fp8kit::cli {

struct RunArgs {
  std::string quantization = "auto";  // auto (as the checkpoint is) | fp8 (online for 16-bit checkpoints)
  std::string dtype = "auto";         // auto | bfloat16 | float16 | float32
  std::string kv_cache_dtype = "auto";
  std::string kv_cache_memory;  // "512MiB", "1G", "1048576"
  int64_t kv_cache_tokens = 0;
  bool calculate_kv_scales = false;
  int64_t max_tokens_per_step = 512;
  std::string device = "cpu";  // cpu | cuda (the first GPU: weights, KV pool and forward there)
  // The CPU backend of the ops: "" (not given: FP8KIT_CPU_BACKEND, whose default is the fast
  // backend), "fast" or "reference" (the exact reference, the executable spec).
  std::string backend;
  bool enforce_eager = false;  // CUDA: no decode graphs (EngineOptions::cuda_graphs)
};

// Registers --quantization, --dtype, --kv-cache-dtype, --kv-cache-memory, --kv-cache-tokens,
// --calculate-kv-scales, --max-tokens-per-step, --device, --backend and --enforce-eager on `cmd`.
void add_run_options(CLI::App* cmd, RunArgs& args);

// The process's overrides with --backend applied: what the engines load with and what the
// forward context of the run carries (parsed once, here).
Overrides run_overrides(const RunArgs& args);
// The device of --device; Error when it is cuda and no CUDA device is there (or the build has none).
Device run_device(const RunArgs& args);
// The context the steps run in: run_device's, with run_overrides.
ForwardContext run_context(const RunArgs& args);

// EngineOptions for `model_dir` on run_device with run_overrides(args). When the KV cache size is
// not given, it holds `default_kv_tokens` tokens.
EngineOptions engine_options(const RunArgs& args, const std::string& model_dir, int64_t default_kv_tokens);

// "1 2 3" (whitespace-separated non-negative ids); Error naming `what` and the bad word.
std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& what);
// "1048576", "512K", "256MiB", "1G", "2GiB" (powers of 1024) -> bytes; Error naming `what`.
int64_t parse_memory_size(const std::string& text, const std::string& what);
// The whole file (at most `max_bytes`); Error naming the file.
std::string read_text_file(const std::string& path, size_t max_bytes);

}  // namespace fp8kit::cli
