// The model-runner section of `fp8kit demo` (demo_runner.cpp): each scheme's checkpoint run on
// fp8kit::Engine against the BF16 one. Tested through Cli.DemoPrintsATablePerScheme.
#pragma once

#include <string>
#include <vector>

namespace fp8kit::cli {

struct DemoModel {
  std::string label;     // "per-tensor"
  std::string dir;       // its checkpoint (FP8, or a 16-bit one, quantized online)
  std::string runnable;  // empty, or why the model runner does not run it
};

// Prints, per model, perplexity, KL divergence and top-1 agreement against the BF16 checkpoint at
// bf16_dir, and a few greedy tokens with prefill and decode tokens/s.
void print_runner_section(const std::string& bf16_dir, const std::vector<DemoModel>& models);

}  // namespace fp8kit::cli
