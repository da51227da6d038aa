// `fp8kit eval MODEL [MODEL...] [--base BASE] (--text FILE | --tokens FILE) [--ctx 512] [--json]`:
// perplexity of MODEL in windows of ctx tokens (the second half of each scored, as llama.cpp's
// perplexity tool does) and, with --base, MODEL's distribution against BASE's (fp8kit::evaluate);
// several MODELs share one pass of BASE. Tested in tests/cpu/test_cli_runner.cpp.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/check.h"
#include "fp8kit/model/eval.h"
#include "fp8kit/model/tokenizer.h"
#include "progress_bar.h"
#include "run_options.h"

namespace fp8kit::cli {
namespace {

constexpr size_t kMaxInputBytes = 64u << 20;

struct EvalArgs {
  std::vector<std::string> models;
  std::string base, text_file, tokens_file;
  int64_t ctx = 512, first = -1, max_windows = 0;
  bool json = false;
  RunArgs run;
};

std::vector<int32_t> read_tokens(const EvalArgs& a) {
  if (!a.tokens_file.empty()) return parse_token_ids(read_text_file(a.tokens_file, kMaxInputBytes), a.tokens_file);
  std::vector<std::string> dirs = a.models;
  if (!a.base.empty()) dirs.push_back(a.base);
  for (const std::string& dir : dirs) {
    if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) continue;
    return Tokenizer::from_directory(dir).encode(read_text_file(a.text_file, kMaxInputBytes));
  }
  std::string names;
  for (const std::string& dir : dirs) names += (names.empty() ? "" : ", ") + dir;
  fail(ErrorCode::kInvalidArgument, "--text: no tokenizer.json in {} (give --tokens)", names);
}

std::string describe(const Engine& e) {
  const ModelInfo& i = e.model_info();
  return e.model_dir() + " (" + i.architecture + ", " + dtype_name(i.dtype) + ", quantization " + i.quantization +
         ", KV cache " + e.kv_cache_info().dtype + ")";
}

nlohmann::ordered_json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json to_json(const EvalArgs& a, const std::string& model, const EvalResult& r, int64_t first,
                               bool has_base) {
  const std::optional<DistributionStats>& d = r.vs_base;
  const auto stat = [&](double DistributionStats::*field) {
    return d ? nlohmann::ordered_json((*d).*field) : nlohmann::ordered_json(nullptr);
  };
  nlohmann::ordered_json j;
  j["model"] = model;
  j["ppl"] = r.ppl;
  j["base_ppl"] = optional_number(r.base_ppl);
  j["kld_mean"] = stat(&DistributionStats::kld_mean);
  j["kld_stderr"] = stat(&DistributionStats::kld_stderr);
  j["kld_median"] = stat(&DistributionStats::kld_median);
  j["kld_p99"] = stat(&DistributionStats::kld_p99);
  j["kld_max"] = stat(&DistributionStats::kld_max);
  j["top1_agreement"] = stat(&DistributionStats::top1_agreement);
  j["delta_p_rms"] = stat(&DistributionStats::delta_p_rms);
  j["tokens"] = r.tokens;
  j["windows"] = r.windows;
  j["ctx"] = a.ctx;
  j["first"] = first;
  j["seconds"] = r.seconds;
  j["base_seconds"] = has_base ? nlohmann::ordered_json(r.base_seconds) : nlohmann::ordered_json(nullptr);
  return j;
}

void print_text(const EvalArgs& a, const Engine& model, const EvalResult& r, int64_t first) {
  std::printf("%s\n", describe(model).c_str());
  std::printf("  windows: %lld of %lld tokens; %lld tokens scored (window positions %lld-%lld)\n",
              (long long)r.windows, (long long)a.ctx, (long long)r.tokens, (long long)first + 1, (long long)a.ctx - 1);
  std::printf("  perplexity: %.4f", r.ppl);
  if (r.base_ppl) std::printf("   base: %.4f", *r.base_ppl);
  std::printf("\n");
  if (const auto& d = r.vs_base) {
    std::printf("  KL divergence: mean %.6f +- %.6f, median %.6f, p99 %.6f, max %.6f\n", d->kld_mean, d->kld_stderr,
                d->kld_median, d->kld_p99, d->kld_max);
    std::printf("  top-1 agreement: %.2f%%   RMS delta p: %.3f%%\n", 100 * d->top1_agreement, 100 * d->delta_p_rms);
  }
  const double per_s = r.seconds > 0 ? double(r.windows * a.ctx) / r.seconds : 0.0;
  std::printf("  time: %.1f s (%.1f tokens/s)", r.seconds, per_s);
  if (r.base_ppl) std::printf(", base %.1f s", r.base_seconds);
  std::printf("\n");
}

int run_eval(const EvalArgs& a) {
  FP8KIT_CHECK_ARG(a.text_file.empty() != a.tokens_file.empty(), "give one of --text and --tokens");
  const std::vector<int32_t> tokens = read_tokens(a);
  EvalOptions o;
  o.ctx = a.ctx;
  if (a.first >= 0) o.first = a.first;
  o.max_windows = a.max_windows;
  std::unique_ptr<Engine> base;
  if (!a.base.empty()) {
    RunArgs base_run = a.run;  // the base runs as its checkpoint is, with a cache in its own dtype
    base_run.quantization = "auto";
    base_run.kv_cache_dtype = "auto";
    base_run.calculate_kv_scales = false;
    base = std::make_unique<Engine>(a.base, engine_options(base_run, a.base, a.ctx));
  }
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<Engine*> models;
  for (const std::string& dir : a.models) {
    engines.push_back(std::make_unique<Engine>(dir, engine_options(a.run, dir, a.ctx)));
    models.push_back(engines.back().get());
    std::fprintf(stderr, "fp8kit eval: %s\n", describe(*models.back()).c_str());
  }
  if (base) std::fprintf(stderr, "  against %s\n", describe(*base).c_str());
  std::optional<ProgressBar> bar;
  bar.emplace("eval", !a.json);
  o.progress = [&](int64_t done, int64_t total) { bar->update_count(done, total, "windows"); };
  const std::vector<EvalResult> results =
      evaluate_many(ForwardContext(Device::cpu(), run_overrides(a.run)), models, base.get(), tokens, o);
  bar.reset();
  const int64_t first = o.first.value_or(o.ctx / 2);
  for (size_t m = 0; m < models.size(); ++m) {
    if (a.json) {
      std::printf("%s\n", to_json(a, a.models[m], results[m], first, base != nullptr).dump().c_str());
    } else {
      print_text(a, *models[m], results[m], first);
    }
  }
  return 0;
}

}  // namespace

void add_eval(CLI::App& app, std::function<int()>& run) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "Perplexity of a model, and its KL divergence against a base model");
  cmd->add_option("MODEL", a->models, "checkpoint directories (each evaluated; one pass of --base serves all)")
      ->required();
  cmd->add_option("--base", a->base, "base checkpoint (e.g. the BF16 model of an FP8 one): same architecture and vocabulary");
  auto* text = cmd->add_option("--text", a->text_file, "UTF-8 text, encoded with the model's tokenizer.json");
  auto* ids = cmd->add_option("--tokens", a->tokens_file, "file of whitespace-separated token ids");
  text->excludes(ids);
  cmd->add_option("--ctx", a->ctx, "tokens per window (default 512)")->check(CLI::Range(int64_t(2), int64_t(1) << 20));
  cmd->add_option("--first", a->first,
                  "first scored logit row of a window (default ctx/2, llama.cpp's; 0: every token but the first)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-windows", a->max_windows, "evaluate at most this many windows (default: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", a->json, "print one JSON object a model, a line each (model, ppl, base_ppl, kld_mean, "
                                   "kld_stderr, kld_median, kld_p99, kld_max, top1_agreement, delta_p_rms, tokens, ...)");
  add_run_options(cmd, a->run);
  cmd->callback([a, &run] { run = [a] { return run_eval(*a); }; });
}

}  // namespace fp8kit::cli
