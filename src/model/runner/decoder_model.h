// A decoder-only transformer built from fp8kit's layers: the checkpoint loaded by load_model
// (its linear, attention and MoE layers with their quantization methods) wired into vLLM's
// Llama-family forward, embedding -> per layer [norm, qkv_proj, (q/k norm), RoPE, paged
// attention, o_proj, fused add + norm, MLP or MoE] -> final norm -> lm_head. Every step is an op
// taking the ForwardContext; the host only builds the batch's metadata. Tested through the
// engine (tests/cpu/test_engine*.cpp) and against numpy (tests/python/test_runner_forward.py).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/model/model_loader.h"
#include "fp8kit/ops/attention.h"
#include "model/runner/decoder_config.h"
#include "model/runner/kv_cache_pool.h"

namespace fp8kit::runner {

// The tokens of one step: T new tokens of R sequences, laid out sequence after sequence.
struct ForwardBatch {
  Tensor token_ids;                 // i32 [T]
  Tensor positions;                 // i64 [T]: absolute positions
  ops::AttentionMetadata metadata;  // query_start_loc, seq_lens, block_table, slot_mapping of the T tokens
  // i64 [N]: the rows whose logits are wanted, ascending; undefined: all T rows.
  Tensor logit_rows;
};

// `batch` (on the host) on ctx's device, queued on its stream; the copies from host memory have
// completed when it returns. The engine uploads a step's batch before any kernel of the step
// (the stream is idle then: the previous step ended reading its results).
ForwardBatch to_device(const ForwardBatch& batch, const ForwardContext& ctx);

class DecoderModel {
 public:
  DecoderModel(const std::string& model_dir, const LoadOptions& options);

  const DecoderConfig& config() const { return config_; }
  const LoadedModel& loaded() const { return model_; }
  DType dtype() const { return dtype_; }  // the compute dtype
  int64_t vocab_size() const { return vocab_size_; }
  // The attention layer of decoder layer i (its KV-cache dtype and scales).
  Attention& attention(int64_t layer) const { return *layers_[static_cast<size_t>(layer)].attn; }

  // Logits [N, vocab] in the compute dtype of batch.logit_rows (every row when undefined). The new
  // tokens' K/V go into `pool` at the batch's slots before attention reads them.
  Tensor forward(const ForwardContext& ctx, const ForwardBatch& batch, const KvCachePool& pool) const;

 private:
  struct Layer {
    LinearBase* qkv = nullptr;
    LinearBase* o_proj = nullptr;
    Attention* attn = nullptr;
    Tensor input_norm, post_attention_norm, q_norm, k_norm;
    LinearBase* gate_up = nullptr;  // dense MLP
    LinearBase* down = nullptr;
    FusedMoE* moe = nullptr;  // or a sparse block with its router [E, hidden]
    Tensor router;
    std::optional<int64_t> sliding_window;
  };

  Tensor attention_block(const ForwardContext& ctx, int64_t i, const Tensor& x, const ForwardBatch& batch,
                         const KvCachePool& pool) const;
  Tensor mlp_block(const ForwardContext& ctx, int64_t i, const Tensor& x) const;

  DecoderConfig config_;
  LoadedModel model_;
  DType dtype_;
  int64_t vocab_size_ = 0;
  std::vector<Layer> layers_;
  Tensor embed_tokens, final_norm, lm_head;
};

}  // namespace fp8kit::runner
