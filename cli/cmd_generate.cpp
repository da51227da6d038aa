// `fp8kit generate MODEL (--prompt TEXT | --prompt-ids IDS) [-n N] [--temperature T] [--top-k K]
// [--top-p P] [--seed S] [--kv-cache-dtype D] [--json]`: one request through the model runner
// (fp8kit::Engine), the text streamed as the tokens arrive (DecodeStream), then the prompt and
// decode speeds. Tested in tests/cpu/test_cli_runner.cpp.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/check.h"
#include "fp8kit/model/engine.h"
#include "fp8kit/model/tokenizer.h"
#include "run_options.h"

namespace fp8kit::cli {
namespace {

struct GenerateArgs {
  std::string model, prompt, prompt_ids;
  int64_t max_tokens = 128;
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool ignore_eos = false, json = false, chat = false;
  RunArgs run;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double per_second(int64_t n, double s) { return s > 0 ? double(n) / s : 0.0; }

int run_generate(const GenerateArgs& a) {
  FP8KIT_CHECK(!a.chat, ErrorCode::kUnsupported,
               "--chat: chat templates are Jinja programs and fp8kit has no Jinja engine; format the prompt yourself "
               "(--prompt with the template's text, or --prompt-ids)");
  FP8KIT_CHECK_ARG(a.prompt.empty() != a.prompt_ids.empty(), "give one of --prompt and --prompt-ids");
  std::optional<Tokenizer> tokenizer;
  if (std::filesystem::exists(std::filesystem::path(a.model) / "tokenizer.json")) {
    tokenizer = Tokenizer::from_directory(a.model);
  }
  FP8KIT_CHECK_ARG(tokenizer || a.prompt.empty(), "--prompt: {} has no tokenizer.json (use --prompt-ids)", a.model);
  const std::vector<int32_t> prompt = a.prompt.empty() ? parse_token_ids(a.prompt_ids, "--prompt-ids")
                                                       : tokenizer->encode(a.prompt);
  FP8KIT_CHECK_ARG(!prompt.empty(), "the prompt has no tokens");

  const auto load_start = std::chrono::steady_clock::now();
  Engine engine(a.model, engine_options(a.run, a.model, int64_t(prompt.size()) + a.max_tokens));
  const ModelInfo& info = engine.model_info();
  const KvCacheInfo kv = engine.kv_cache_info();
  std::fprintf(stderr, "fp8kit generate: %s (%s, %s, quantization %s), KV cache %s %lld x %lld tokens, loaded in %.2f s\n",
               a.model.c_str(), info.architecture.c_str(), dtype_name(info.dtype), info.quantization.c_str(),
               kv.dtype.c_str(), (long long)kv.num_blocks, (long long)kv.block_size, seconds_since(load_start));

  GenerationParams params;
  params.max_tokens = a.max_tokens;
  params.sampling.temperature = a.temperature;
  params.sampling.top_k = a.top_k;
  params.sampling.top_p = a.top_p;
  params.sampling.min_p = a.min_p;
  params.seed = a.seed;
  if (!a.ignore_eos) {
    params.stop_token_ids = engine.eos_token_ids();
    if (tokenizer && tokenizer->eos_id()) params.stop_token_ids.push_back(*tokenizer->eos_id());
  }
  engine.add_request(prompt, params);

  const ForwardContext ctx(Device::cpu(), run_overrides(a.run));
  std::unique_ptr<DecodeStream> stream;
  if (tokenizer && !a.json) stream = std::make_unique<DecodeStream>(*tokenizer, /*skip_special_tokens=*/true);
  std::vector<int32_t> ids;
  double prefill_s = 0, decode_s = 0;
  int64_t decode_tokens = 0;
  FinishReason reason = FinishReason::kNone;
  while (engine.has_unfinished_requests()) {
    const auto t0 = std::chrono::steady_clock::now();
    const StepOutput step = engine.step(ctx);
    const double s = seconds_since(t0);
    (step.num_prefill_tokens > 0 ? prefill_s : decode_s) += s;
    decode_tokens += step.num_prefill_tokens > 0 ? 0 : step.num_decode_tokens;
    for (const RequestOutput& o : step.outputs) {
      for (int32_t id : o.new_token_ids) {
        ids.push_back(id);
        if (stream) {
          std::fputs(stream->step(id).c_str(), stdout);
        } else if (!a.json) {
          std::printf("%s%d", ids.size() > 1 ? " " : "", id);
        }
        std::fflush(stdout);
      }
      reason = o.finish_reason;
    }
  }
  if (stream) std::fputs(stream->flush().c_str(), stdout);
  const char* finish = reason == FinishReason::kStop ? "stop" : "length";
  if (a.json) {
    nlohmann::ordered_json j;
    j["ids"] = ids;
    j["text"] = tokenizer ? nlohmann::ordered_json(tokenizer->decode(ids, true)) : nlohmann::ordered_json(nullptr);
    j["prompt_tokens"] = prompt.size();
    j["prompt_tokens_per_s"] = per_second(int64_t(prompt.size()), prefill_s);
    j["decode_tokens"] = decode_tokens;
    j["decode_tokens_per_s"] = per_second(decode_tokens, decode_s);
    j["finish_reason"] = finish;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr, "prompt: %zu tokens in %.2f s (%.2f tokens/s); decode: %lld tokens in %.2f s (%.2f tokens/s); "
                 "finished: %s\n", prompt.size(), prefill_s, per_second(int64_t(prompt.size()), prefill_s),
                 (long long)decode_tokens, decode_s, per_second(decode_tokens, decode_s), finish);
  }
  return 0;
}

}  // namespace

void add_generate(CLI::App& app, std::function<int()>& run) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text with a model (BF16/FP16 or FP8) on the model runner");
  cmd->add_option("MODEL", a->model, "checkpoint directory (config.json, safetensors, tokenizer.json)")->required();
  auto* prompt = cmd->add_option("--prompt", a->prompt, "prompt text, encoded with the model's tokenizer.json");
  auto* ids = cmd->add_option("--prompt-ids", a->prompt_ids, "prompt as space-separated token ids");
  prompt->excludes(ids);
  cmd->add_option("-n,--max-tokens", a->max_tokens, "new tokens at most (default 128)")->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--temperature", a->temperature, "sampling temperature (default 1; 0: greedy)")->check(CLI::Range(0.0f, 1e6f));
  cmd->add_option("--top-k", a->top_k, "keep the k most likely tokens (default 0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", a->top_p, "nucleus sampling mass in (0, 1] (default 1: off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", a->min_p, "drop tokens below min_p x the top probability (default 0: off)")
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--seed", a->seed, "sampling seed (default 0)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "do not stop at the model's EOS tokens");
  cmd->add_flag("--json", a->json, "print one JSON object: ids, text, prompt_tokens, prompt_tokens_per_s, "
                                   "decode_tokens, decode_tokens_per_s, finish_reason");
  cmd->add_flag("--chat", a->chat, "format the prompt with the chat template (not available: see the README)");
  add_run_options(cmd, a->run);
  cmd->callback([a, &run] { run = [a] { return run_generate(*a); }; });
}

}  // namespace fp8kit::cli
