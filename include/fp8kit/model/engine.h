// The model runner an engine embeds: a decoder-only checkpoint (Llama, Mistral, Qwen2, Qwen3,
// Qwen3-MoE, Mixtral; BF16/FP16, BF16 quantized online, or any FP8 format the loader reads) loaded
// into fp8kit's layers, a paged KV cache of fixed size, and step(): one batched forward over every
// running sequence (prefill chunks and decodes together, within a token budget), then sampling.
// Every op runs through the ForwardContext, so the CPU reference, the fast CPU backend and CUDA
// serve the same runner. Example: docs/examples/generate.cpp; tests: tests/cpu/test_engine*.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/model/model_loader.h"
#include "fp8kit/ops/sampling.h"
#include "fp8kit/runtime/forward_context.h"

namespace fp8kit {

namespace runner {
struct EngineImpl;
}

struct KvCacheOptions {
  std::string dtype = "auto";        // auto (the model dtype) | fp8 | fp8_e4m3 | fp8_e5m2
  bool calculate_kv_scales = false;  // k/v/q scales from the first step's data (vLLM's --calculate-kv-scales)
  int64_t block_size = 16;           // tokens per block
  // The pool: at most one of the two (0: unset). Tokens are rounded up to whole blocks; bytes
  // down. Neither: 4096 tokens. More than the machine's memory is an error.
  int64_t num_tokens = 0;
  int64_t memory_bytes = 0;
};

struct EngineOptions {
  // The load: device, overrides, quantize (false: a 16-bit checkpoint unquantized), dtype (the
  // compute dtype; kF32 runs 16-bit weights widened), one rank. load.kv_cache_dtype and
  // load.calculate_kv_scales are taken from kv_cache.
  LoadOptions load;
  KvCacheOptions kv_cache;
  int64_t max_tokens_per_step = 512;  // token budget of one step: decodes first, then prefill chunks
  int64_t max_num_seqs = 64;          // sequences in one step
  // CUDA: a step that only decodes replays a CUDA graph captured for its batch size (padded to
  // 1, 2, 4, 8, then multiples of 8, up to max_num_seqs); false runs every step eagerly (vLLM's
  // enforce_eager). A graph that cannot be captured turns them off with a warning.
  bool cuda_graphs = true;
  uint64_t seed = 0;                  // requests without a seed draw with seed + request id
};

struct GenerationParams {
  ops::SamplingParams sampling;  // temperature (0: greedy), top_k, top_p, min_p; seed and step are set here
  std::optional<uint64_t> seed;
  int64_t max_tokens = 16;  // new tokens at most; 0 only scores the prompt
  // Generation ends after one of these ids (kept in the output); the engine adds none by itself:
  // Engine::eos_token_ids() gives the model's.
  std::vector<int32_t> stop_token_ids;
  // Keep the logits of every position >= return_logits_from the request computes (its prompt,
  // then each sampled step): what evaluation reads.
  bool return_logits = false;
  int64_t return_logits_from = 0;
};

enum class FinishReason : uint8_t { kNone, kStop, kLength };

struct RequestOutput {
  int64_t request_id = 0;
  int64_t num_prompt_tokens_done = 0;  // prompt tokens in the cache after this step
  std::vector<int32_t> new_token_ids;  // the token sampled this step (none while the prompt is prefilled)
  std::vector<float> logprobs;         // the raw log-probability of each new token
  // return_logits: [n, vocab] in the model dtype on the host, one row per position computed this step from
  // return_logits_from on, in order (position p's row predicts token p + 1), starting at position
  // first_logits_position; undefined otherwise.
  Tensor logits;
  int64_t first_logits_position = 0;
  FinishReason finish_reason = FinishReason::kNone;
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

struct StepOutput {
  std::vector<RequestOutput> outputs;  // the requests that ran this step, in scheduling order
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;
  bool cuda_graph = false;  // the step replayed a captured CUDA graph (EngineOptions::cuda_graphs)
};

struct ModelInfo {
  std::string architecture;
  DType dtype = DType::kBF16;  // the compute dtype
  std::string quantization;    // "none", "fp8 (online)", or the checkpoint's fp8 scheme
  int64_t vocab_size = 0, num_layers = 0, max_model_len = 0;
};

struct KvCacheInfo {
  std::string dtype;  // "auto", "fp8_e4m3", "fp8_e5m2"
  int64_t block_size = 0, num_blocks = 0, free_blocks = 0;
  int64_t bytes = 0;  // of the whole pool
};

class Engine {
 public:
  // Loads `model_dir` (Error naming the architecture and the supported ones for another).
  explicit Engine(const std::string& model_dir, const EngineOptions& options = {});
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  // Queues a request; returns its id (0, 1, ...). Errors (kInvalidArgument): an empty prompt, an
  // id outside the vocabulary, prompt + max_tokens beyond max_model_len, a request the whole KV
  // pool cannot hold (naming the blocks it needs and has). A request that fits the pool but not
  // the blocks free now waits until running ones finish.
  int64_t add_request(std::vector<int32_t> prompt_token_ids, const GenerationParams& params);
  void abort_request(int64_t request_id);  // frees its blocks; unknown ids are ignored

  // One batched forward over the scheduled sequences, then one sampled token for each whose
  // prompt is complete. Deterministic: a request's tokens depend on its seed, not on the batch.
  // `ctx` is on the load device (options.load.device); on CUDA the forward runs on its stream and
  // the step waits once, for the logit rows it samples from (sampling runs on the host).
  StepOutput step(const ForwardContext& ctx);
  bool has_unfinished_requests() const;
  int64_t num_waiting_requests() const;

  const ModelInfo& model_info() const;
  KvCacheInfo kv_cache_info() const;
  // EOS ids of the model: config.json's and generation_config.json's eos_token_id.
  const std::vector<int32_t>& eos_token_ids() const;
  const std::string& model_dir() const;
  // The loaded layers (their quantization methods, the attention layers' KV scales, ...).
  const LoadedModel& loaded_model() const;

 private:
  std::unique_ptr<runner::EngineImpl> impl_;
};

}  // namespace fp8kit
