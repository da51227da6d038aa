// The model-runner part of `fp8kit demo`: every runnable scheme of the demo's synthetic model
// evaluated against its BF16 checkpoint with fp8kit::evaluate_many (one BF16 pass), plus a few
// greedy tokens of each with their prefill and decode speed. The synthetic model's weights are
// random, so its perplexity and its tokens are noise: the KL divergence and top-1 agreement
// against BF16 are what measure a scheme. Tested through Cli.DemoPrintsATablePerScheme (tests/cpu/test_cli.cpp).
#include <chrono>
#include <cstdio>

#include "demo_runner.h"
#include "fp8kit/model/eval.h"

namespace fp8kit::cli {
namespace {

constexpr int64_t kCtx = 128, kWindows = 2, kPrompt = 16, kGenerate = 8;

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ids.push_back(int32_t(x % uint64_t(vocab)));
  }
  return ids;
}

struct Generation {
  std::string ids;
  double prefill_per_s = 0, decode_per_s = 0;
};

Generation generate(Engine& engine, const ForwardContext& ctx, const std::vector<int32_t>& prompt) {
  GenerationParams p;
  p.sampling.temperature = 0.0f;
  p.max_tokens = kGenerate;
  engine.add_request(prompt, p);
  Generation g;
  double prefill = 0, decode = 0;
  int64_t decoded = 0;
  while (engine.has_unfinished_requests()) {
    const auto t0 = std::chrono::steady_clock::now();
    const StepOutput s = engine.step(ctx);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (s.num_prefill_tokens > 0 ? prefill : decode) += dt;
    if (s.num_prefill_tokens == 0) decoded += s.num_decode_tokens;
    for (const RequestOutput& o : s.outputs) {
      for (int32_t id : o.new_token_ids) g.ids += (g.ids.empty() ? "" : " ") + std::to_string(id);
    }
  }
  g.prefill_per_s = prefill > 0 ? double(prompt.size()) / prefill : 0;
  g.decode_per_s = decode > 0 ? double(decoded) / decode : 0;
  return g;
}

}  // namespace

void print_runner_section(const std::string& bf16_dir, const std::vector<DemoModel>& models) {
  EngineOptions options;
  options.load.overrides = process_overrides();
  options.kv_cache.num_tokens = kCtx;
  options.max_tokens_per_step = kCtx;
  EngineOptions base_options = options;
  base_options.load.quantize = false;
  Engine base(bf16_dir, base_options);
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<Engine*> runnable;
  for (const DemoModel& m : models) {
    if (!m.runnable.empty()) continue;
    engines.push_back(std::make_unique<Engine>(m.dir, options));
    runnable.push_back(engines.back().get());
  }
  if (runnable.empty()) return;  // nothing to compare (the demo always has runnable schemes)
  const ForwardContext ctx = ForwardContext::from_environment();
  const std::vector<int32_t> tokens = random_tokens(kCtx * kWindows, base.model_info().vocab_size);
  EvalOptions eval;
  eval.ctx = kCtx;
  const std::vector<EvalResult> results = evaluate_many(ctx, runnable, &base, tokens, eval);
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + kPrompt);

  std::printf("\n== model runner (CPU, %d threads): each scheme against BF16 over %lld random tokens (%lld windows of "
              "%lld, second halves scored), then %lld greedy tokens after a %lld-token prompt\n",
              ctx.num_threads(), (long long)tokens.size(), (long long)kWindows, (long long)kCtx, (long long)kGenerate,
              (long long)kPrompt);
  std::printf("  the synthetic model's weights are random: its perplexity and generated ids are noise; KL and top-1 "
              "against BF16 measure the quantization\n  (its logits are far sharper than a trained model's, so its KL "
              "is larger: SmolLM2-135M's figures are in docs/PERFORMANCE.md)\n");
  std::printf("  %-14s %9s %10s %10s %8s %9s %9s   %s\n", "scheme", "ppl", "KL mean", "KL p99", "top-1", "prefill/s",
              "decode/s", "generated ids");
  const Generation g = generate(base, ctx, prompt);
  std::printf("  %-14s %9.2f %10s %10s %8s %9.1f %9.1f   %s\n", "bf16", *results.front().base_ppl, "-", "-", "-",
              g.prefill_per_s, g.decode_per_s, g.ids.c_str());
  size_t next = 0;
  for (const DemoModel& m : models) {
    if (!m.runnable.empty()) {
      std::printf("  %-14s not run: %s\n", m.label.c_str(), m.runnable.c_str());
      continue;
    }
    const EvalResult& r = results[next];
    const Generation mg = generate(*runnable[next++], ctx, prompt);
    std::printf("  %-14s %9.2f %10.2e %10.2e %7.1f%% %9.1f %9.1f   %s\n", m.label.c_str(), r.ppl, r.vs_base->kld_mean,
                r.vs_base->kld_p99, 100 * r.vs_base->top1_agreement, mg.prefill_per_s, mg.decode_per_s, mg.ids.c_str());
  }
}

}  // namespace fp8kit::cli
