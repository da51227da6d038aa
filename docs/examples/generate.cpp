// Embeds the model runner: loads a checkpoint into an fp8kit::Engine, queues two requests (token
// ids, greedy and sampled), steps until both finish and prints their tokens, then scores a prompt
// from its logits:
//   generate <checkpoint-dir> [fp8]      (fp8: quantize a 16-bit checkpoint online)
// Built and run by the tests (CliRunner.DocumentedEngineExampleRuns, tests/cpu/test_cli_runner.cpp);
// docs/usage.md walks through it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "fp8kit/checkpoint.h"
#include "fp8kit/half.h"
#include "fp8kit/model/engine.h"

namespace {

// Element (r, v) of a logits tensor, which is in the model dtype.
double logit(const fp8kit::Tensor& logits, int64_t r, int64_t v) {
  const int64_t i = r * logits.stride(0) + v;
  switch (logits.dtype()) {
    case fp8kit::DType::kBF16: return fp8kit::bf16_to_float(logits.data<fp8kit::BFloat16>()[i]);
    case fp8kit::DType::kF16: return fp8kit::f16_to_float(logits.data<fp8kit::Float16>()[i]);
    default: return logits.data<float>()[i];
  }
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <checkpoint-dir> [fp8]\n", argv[0]);
    return 2;
  }
  try {
    fp8kit::EngineOptions options;                      // CPU, KV cache in the model dtype
    options.load.overrides = fp8kit::process_overrides();  // the FP8KIT_* knobs, parsed once
    // An FP8 checkpoint runs as stored; a 16-bit one in 16 bits, or quantized online when asked
    // (vLLM's --quantization fp8).
    const bool fp8_checkpoint = fp8kit::Checkpoint::open(argv[1]).config().contains("quantization_config");
    options.load.quantize = fp8_checkpoint || (argc > 2 && std::strcmp(argv[2], "fp8") == 0);
    options.kv_cache.num_tokens = 1024;  // the paged KV pool: 64 blocks of 16 tokens
    fp8kit::Engine engine(argv[1], options);
    const fp8kit::ModelInfo& info = engine.model_info();
    std::printf("%s, quantization %s, KV cache %lld blocks\n", info.architecture.c_str(), info.quantization.c_str(),
                (long long)engine.kv_cache_info().num_blocks);

    // Requests are token ids (fp8kit::Tokenizer gives them for text) and sampling parameters.
    fp8kit::GenerationParams greedy;
    greedy.sampling.temperature = 0.0f;  // argmax
    greedy.max_tokens = 8;
    greedy.stop_token_ids = engine.eos_token_ids();
    fp8kit::GenerationParams sampled = greedy;
    sampled.sampling.temperature = 0.8f;
    sampled.sampling.top_k = 40;
    sampled.seed = 1234;  // the same seed gives the same tokens, whatever else is in the batch
    const std::vector<int32_t> prompt = {1, 5, 9, 14, 20, 27};
    const int64_t a = engine.add_request(prompt, greedy);
    const int64_t b = engine.add_request({3, 1, 4, 1, 5, 9, 2, 6}, sampled);

    // Each step is one batched forward over every running sequence (prefill chunks and decodes
    // together), then one new token for each sequence whose prompt is in the cache.
    const fp8kit::ForwardContext ctx(options.load.device, options.load.overrides);
    std::vector<int32_t> tokens[2];
    while (engine.has_unfinished_requests()) {
      for (const fp8kit::RequestOutput& out : engine.step(ctx).outputs) {
        std::vector<int32_t>& t = tokens[out.request_id == a ? 0 : 1];
        t.insert(t.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      }
    }
    std::printf("request %lld (greedy): %s\n", (long long)a, join(tokens[0]).c_str());
    std::printf("request %lld (sampled): %s\n", (long long)b, join(tokens[1]).c_str());

    // Evaluation reads the logits of every position: max_tokens 0 only scores the prompt. Row p
    // predicts token p + 1; here, the log-likelihood of the prompt's last token.
    fp8kit::GenerationParams score;
    score.max_tokens = 0;
    score.return_logits = true;
    engine.add_request(prompt, score);
    std::vector<double> row;
    while (engine.has_unfinished_requests()) {
      for (const fp8kit::RequestOutput& out : engine.step(ctx).outputs) {
        if (!out.logits.defined()) continue;
        const fp8kit::Tensor logits = out.logits.to(fp8kit::Device::cpu());
        const int64_t r = int64_t(prompt.size()) - 2 - out.first_logits_position;  // predicts prompt.back()
        if (r < 0 || r >= logits.size(0)) continue;
        row.clear();
        for (int64_t v = 0; v < logits.size(1); ++v) row.push_back(logit(logits, r, v));
      }
    }
    double max = row.at(0), sum = 0;
    for (double v : row) max = std::max(max, v);
    for (double v : row) sum += std::exp(v - max);
    std::printf("log p(token %d | prompt) = %.4f\n", prompt.back(), row.at(size_t(prompt.back())) - max - std::log(sum));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
