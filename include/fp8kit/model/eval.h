// Evaluation of a model on a token stream, as llama.cpp's perplexity tool measures it: the tokens
// cut into windows of ctx tokens (each a fresh sequence), the logits of the second half of each
// window scored against the next token (perplexity), and with a base model the distribution of
// MODEL against BASE at every scored position (KL divergence, top-1 agreement, change of the
// correct token's probability). Tests: tests/cpu/test_eval.cpp, tests/cpu/test_cli_runner.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "fp8kit/model/engine.h"

namespace fp8kit {

struct EvalOptions {
  int64_t ctx = 512;  // tokens per window: the text gives floor(tokens / ctx) windows
  // Logit rows first .. ctx - 2 of a window are scored (tokens first + 1 .. ctx - 1); default
  // ctx / 2 (llama.cpp's). 0 scores every token but the window's first.
  std::optional<int64_t> first;
  int64_t max_windows = 0;  // 0: every window
  std::function<void(int64_t windows_done, int64_t windows_total)> progress;
};

struct DistributionStats {      // MODEL against BASE over the scored positions
  double kld_mean = 0, kld_stderr = 0, kld_median = 0, kld_p99 = 0, kld_max = 0;  // KL(BASE || MODEL), nats
  double top1_agreement = 0;  // fraction of positions where the argmax ids agree (ties: the lowest id)
  double delta_p_rms = 0;     // RMS of p_model(correct) - p_base(correct), a fraction
};

struct EvalResult {
  int64_t windows = 0, tokens = 0;  // scored tokens
  double ppl = 0;                   // exp(mean negative log-likelihood) of MODEL
  std::optional<double> base_ppl;
  std::optional<DistributionStats> vs_base;
  double seconds = 0, base_seconds = 0;  // forward time of each model
};

// Both engines must be idle (no requests). With a base: the same architecture and vocabulary
// (Error(kInvalidArgument) naming both otherwise). Logits that hold a NaN or infinity are an
// Error naming the window and position. Both models stay resident; memory per window: the
// base's logits of the scored rows.
EvalResult evaluate(const ForwardContext& ctx, Engine& model, Engine* base, std::span<const int32_t> tokens,
                    const EvalOptions& options = {});
// Several models against one base, which runs once per window (the FP8 schemes of one BF16
// model): one result per model, in order. The same checks as evaluate for each model.
std::vector<EvalResult> evaluate_many(const ForwardContext& ctx, const std::vector<Engine*>& models, Engine* base,
                                      std::span<const int32_t> tokens, const EvalOptions& options = {});

}  // namespace fp8kit
