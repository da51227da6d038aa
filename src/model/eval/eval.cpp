// evaluate (include/fp8kit/model/eval.h): the windows of the token stream through each engine
// (one request per window that only scores its prompt), then the statistics of the scored rows.
// Tested by tests/cpu/test_eval.cpp.
#include "fp8kit/model/eval.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/check.h"
#include "model/eval/log_softmax_rows.h"

namespace fp8kit {
namespace {

// The logits of positions first .. ctx - 1 of one window, as the steps returned them.
struct WindowLogits {
  std::vector<Tensor> parts;
  // Row r of the window: part and row in it.
  std::pair<const Tensor*, int64_t> row(int64_t r) const {
    for (const Tensor& t : parts) {
      if (r < t.size(0)) return {&t, r};
      r -= t.size(0);
    }
    fail(ErrorCode::kInternal, "eval: a window has fewer logit rows than it scores");
  }
};

WindowLogits run_window(const ForwardContext& ctx, Engine& engine, std::span<const int32_t> window, int64_t first,
                        double& seconds) {
  GenerationParams p;
  p.max_tokens = 0;
  p.return_logits = true;
  p.return_logits_from = first;
  engine.add_request(std::vector<int32_t>(window.begin(), window.end()), p);
  WindowLogits w;
  while (engine.has_unfinished_requests()) {
    const auto t0 = std::chrono::steady_clock::now();
    StepOutput s = engine.step(ctx);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (RequestOutput& o : s.outputs) {
      if (o.logits.defined() && o.logits.size(0) > 0) w.parts.push_back(o.logits);
    }
  }
  return w;
}

}  // namespace

namespace {

void check_comparable(const Engine& model, const Engine* base) {
  FP8KIT_CHECK_ARG(!model.has_unfinished_requests() && (base == nullptr || !base->has_unfinished_requests()),
                   "eval: the engines must have no requests");
  if (base == nullptr) return;
  const ModelInfo &mi = model.model_info(), &bi = base->model_info();
  FP8KIT_CHECK_ARG(bi.architecture == mi.architecture, "eval: {} is {} but the base {} is {}", model.model_dir(),
                   mi.architecture, base->model_dir(), bi.architecture);
  FP8KIT_CHECK_ARG(bi.vocab_size == mi.vocab_size, "eval: {} has a vocabulary of {} tokens but the base {} has {}",
                   model.model_dir(), mi.vocab_size, base->model_dir(), bi.vocab_size);
}

}  // namespace

std::vector<EvalResult> evaluate_many(const ForwardContext& ctx, const std::vector<Engine*>& models, Engine* base,
                                      std::span<const int32_t> tokens, const EvalOptions& o) {
  FP8KIT_CHECK_ARG(!models.empty(), "eval: no model to evaluate");
  int64_t max_len = base != nullptr ? base->model_info().max_model_len : models[0]->model_info().max_model_len;
  for (Engine* m : models) {
    check_comparable(*m, base);
    max_len = std::min(max_len, m->model_info().max_model_len);
  }
  const int64_t vocab = models[0]->model_info().vocab_size;
  for (Engine* m : models) {
    FP8KIT_CHECK_ARG(m->model_info().vocab_size == vocab, "eval: {} has a vocabulary of {} tokens but {} has {}",
                     m->model_dir(), m->model_info().vocab_size, models[0]->model_dir(), vocab);
  }
  FP8KIT_CHECK_ARG(o.ctx >= 2 && o.ctx <= max_len, "eval: ctx must be in [2, {}] (the model's maximum length), got {}",
                   max_len, o.ctx);
  const int64_t first = o.first.value_or(o.ctx / 2);
  FP8KIT_CHECK_ARG(first >= 0 && first <= o.ctx - 2, "eval: the first scored row must be in [0, {}], got {}", o.ctx - 2,
                   first);
  FP8KIT_CHECK_ARG(o.max_windows >= 0, "eval: max_windows must not be negative");
  int64_t windows = int64_t(tokens.size()) / o.ctx;
  FP8KIT_CHECK_ARG(windows > 0, "eval: {} tokens do not fill one window of {}", tokens.size(), o.ctx);
  if (o.max_windows > 0) windows = std::min(windows, o.max_windows);
  for (int32_t t : tokens.subspan(0, size_t(windows * o.ctx))) {
    FP8KIT_CHECK_ARG(t >= 0 && t < vocab, "eval: token id {} is outside the vocabulary [0, {})", t, vocab);
  }

  std::vector<EvalResult> results(models.size());
  std::vector<eval::Accumulator> acc(models.size());
  std::vector<double> lp_model, lp_base;
  for (int64_t w = 0; w < windows; ++w) {
    const std::span<const int32_t> window = tokens.subspan(size_t(w * o.ctx), size_t(o.ctx));
    const std::string where = "window " + std::to_string(w) + ", position ";
    double base_seconds = 0;
    WindowLogits base_logits;
    if (base != nullptr) base_logits = run_window(ctx, *base, window, first, base_seconds);
    for (size_t m = 0; m < models.size(); ++m) {
      results[m].base_seconds += base_seconds;
      const WindowLogits model_logits = run_window(ctx, *models[m], window, first, results[m].seconds);
      for (int64_t j = 0; j + first + 1 < o.ctx; ++j) {
        const int32_t target = window[size_t(first + j + 1)];
        const auto [mt, mrow] = model_logits.row(j);
        eval::log_softmax_row(*mt, mrow, lp_model, models[m]->model_dir() + ": " + where + std::to_string(first + j));
        double base_nll = -1;
        if (base != nullptr) {
          const auto [bt, brow] = base_logits.row(j);
          eval::log_softmax_row(*bt, brow, lp_base, base->model_dir() + ": " + where + std::to_string(first + j));
          base_nll = -lp_base[size_t(target)];
          acc[m].add_distribution(lp_base, lp_model, target);
        }
        acc[m].add_nll(-lp_model[size_t(target)], base_nll);
      }
    }
    if (o.progress) o.progress(w + 1, windows);
  }
  for (size_t m = 0; m < models.size(); ++m) {
    EvalResult& r = results[m];
    r.windows = windows;
    r.tokens = acc[m].count();
    r.ppl = acc[m].ppl();
    if (base != nullptr) {
      r.base_ppl = acc[m].base_ppl();
      r.vs_base = acc[m].distribution();
    }
  }
  return results;
}

EvalResult evaluate(const ForwardContext& ctx, Engine& model, Engine* base, std::span<const int32_t> tokens,
                    const EvalOptions& o) {
  return evaluate_many(ctx, {&model}, base, tokens, o).front();
}

}  // namespace fp8kit
