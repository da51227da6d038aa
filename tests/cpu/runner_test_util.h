// Helpers of the model-runner tests (test_engine*.cpp, test_eval.cpp, test_cli_runner.cpp): small
// synthetic checkpoints of the runner's architectures, a context on the exact reference ops, and
// one request run to its end with every output kept.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "convert/synthetic_checkpoint.h"
#include "fp8kit/convert.h"
#include "fp8kit/half.h"
#include "fp8kit/model/engine.h"

namespace fp8kit::runner_test {

// Two layers, hidden 64, 4 heads of 16 (2 KV heads), vocabulary 128: Qwen3-MoE with layer 1 sparse
// (4 experts, top-2), or none sparse (dense Qwen3), or Mixtral.
inline convert::SyntheticModelSpec small_spec(convert::SyntheticArchitecture arch = convert::SyntheticArchitecture::kQwen3Moe,
                                              bool moe = true) {
  convert::SyntheticModelSpec s;
  s.architecture = arch;
  s.vocab_size = 128;
  s.hidden_size = 64;
  s.intermediate_size = 96;
  s.num_layers = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 16;
  s.num_experts = 4;
  s.top_k = 2;
  s.moe_intermediate_size = 32;
  s.moe_layers = moe ? std::vector<int64_t>{1} : std::vector<int64_t>{};
  return s;
}

inline std::string write_model(const std::string& dir, const convert::SyntheticModelSpec& spec = small_spec()) {
  convert::write_synthetic_checkpoint(dir, spec);
  return dir;
}

inline std::string quantize(const std::string& in, const std::string& out, QuantScheme scheme) {
  QuantizeOptions o;
  o.scheme = scheme;
  o.block_n = o.block_k = 32;
  quantize_checkpoint(in, out, o);
  return out;
}

// The exact CPU reference, whatever FP8KIT_CPU_BACKEND says: the bit-exactness tests need it.
inline ForwardContext reference_ctx() {
  Overrides o;
  o.cpu_backend = CpuBackend::kReference;
  return ForwardContext(Device::cpu(), o);
}

// The fast CPU backend, whatever FP8KIT_CPU_BACKEND says.
inline ForwardContext fast_ctx() {
  Overrides o;
  o.cpu_backend = CpuBackend::kFast;
  return ForwardContext(Device::cpu(), o);
}

inline std::vector<int32_t> ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> out;
  uint32_t x = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    out.push_back(int32_t((x >> 8) % uint32_t(vocab)));
  }
  return out;
}

// Rows of a logits tensor as floats, appended to `out`.
inline void append_rows(const Tensor& logits, std::vector<std::vector<float>>& out) {
  for (int64_t r = 0; r < logits.size(0); ++r) {
    std::vector<float> row(size_t(logits.size(1)));
    for (int64_t v = 0; v < logits.size(1); ++v) {
      const int64_t i = r * logits.stride(0) + v;
      row[size_t(v)] = logits.dtype() == DType::kBF16  ? bf16_to_float(logits.data<BFloat16>()[i])
                       : logits.dtype() == DType::kF16 ? f16_to_float(logits.data<Float16>()[i])
                                                       : logits.data<float>()[i];
    }
    out.push_back(std::move(row));
  }
}

struct RequestRun {
  std::vector<int32_t> tokens;               // generated
  std::vector<std::vector<float>> logits;    // every returned row, in order
  FinishReason reason = FinishReason::kNone;
  int steps = 0;
};

// Steps `engine` until nothing is left, collecting request `id`'s outputs into runs[id].
inline std::vector<RequestRun> run_all(Engine& engine, const ForwardContext& ctx, size_t requests) {
  std::vector<RequestRun> runs(requests);
  while (engine.has_unfinished_requests()) {
    for (const RequestOutput& o : engine.step(ctx).outputs) {
      RequestRun& r = runs.at(size_t(o.request_id));
      r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.logits.defined()) append_rows(o.logits, r.logits);
      r.reason = o.finish_reason;
      ++r.steps;
    }
  }
  return runs;
}

inline GenerationParams greedy(int64_t max_tokens, bool logits = false) {
  GenerationParams p;
  p.sampling.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.return_logits = logits;
  return p;
}

}  // namespace fp8kit::runner_test
