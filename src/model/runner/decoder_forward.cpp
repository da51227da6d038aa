// DecoderModel::forward (decoder_model.h): vLLM's LlamaModel / Qwen2 / Qwen3 / Mixtral forward as
// a sequence of ops: the residual stream through fused_add_rms_norm, attention on strided views
// of the fused qkv output (no copies), the new K/V written to the paged cache before it is read
// (paged_attention), MLP or MoE, and lm_head on the rows whose logits are wanted.
#include "core/check.h"
#include "core/parallel.h"
#include "fp8kit/ops/embedding.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/moe_experts.h"
#include "fp8kit/ops/norm.h"
#include "fp8kit/ops/rope.h"
#include "model/runner/decoder_model.h"

namespace fp8kit::runner {
namespace {

// Heads [offset, offset + heads) of every row of the fused [T, width] qkv output as [T, heads, D].
Tensor heads_view(const Tensor& qkv, int64_t first_head, int64_t heads, int64_t head_dim) {
  return Tensor::from_storage(qkv.storage(), {qkv.size(0), heads, head_dim}, {qkv.stride(0), head_dim, 1},
                              qkv.storage_offset() + first_head * head_dim, qkv.dtype());
}

// The weight of the linear layer that comes next, to the CPU pool's idle workers (parallel.h
// prefetch_hint): named before the serial ops that precede the layer (RoPE and attention before
// o_proj, the norms before gate_up and the next qkv, silu before down, sampling before the next
// step's first layer), so that DRAM, idle during them, brings some of it in.
void hint(const LinearBase* layer) {
  const Parameter* w = layer != nullptr ? layer->find_parameter("weight") : nullptr;
  if (w != nullptr && w->data.defined() && w->data.device().is_cpu()) prefetch_hint(w->data.data_ptr(), w->data.nbytes());
}

}  // namespace

Tensor DecoderModel::attention_block(const ForwardContext& ctx, int64_t i, const Tensor& x, const ForwardBatch& batch,
                                     const KvCachePool& pool) const {
  const Layer& l = layers_[static_cast<size_t>(i)];
  const int64_t heads = config_.num_heads, kv_heads = config_.num_kv_heads, d = config_.head_dim;
  const Tensor qkv = l.qkv->forward(ctx, x);  // [T, (H + 2 Hkv) D]
  Tensor q = heads_view(qkv, 0, heads, d);
  Tensor k = heads_view(qkv, heads, kv_heads, d);
  const Tensor v = heads_view(qkv, heads + kv_heads, kv_heads, d);
  if (config_.qk_norm) {  // Qwen3: RMSNorm over each head, before RoPE
    q = ops::rms_norm(ctx, q, l.q_norm, config_.rms_norm_eps);
    k = ops::rms_norm(ctx, k, l.k_norm, config_.rms_norm_eps);
  }
  hint(l.o_proj);
  ops::apply_rope(ctx, config_.rope, batch.positions, q, k);
  if (l.attn->calculate_kv_scales) l.attn->calc_kv_scales(q, k, v);  // vLLM: post-RoPE q and k, first forward

  ops::PagedKvCache cache;
  cache.key_cache = pool.key_cache(i);
  cache.value_cache = pool.value_cache(i);
  cache.dtype = pool.layout().dtype;
  cache.k_scale = l.attn->k_scale.view({1});
  cache.v_scale = l.attn->v_scale.view({1});
  ops::PagedAttentionOptions options;
  if (l.sliding_window) {  // vLLM passes FlashAttention (W - 1, 0): W keys, the query's own included
    options.window_left = *l.sliding_window - 1;
    options.window_right = 0;
  }
  const Tensor out = ops::paged_attention(ctx, q, k, v, cache, batch.metadata, options);  // [T, H, D]
  return l.o_proj->forward(ctx, out.view({out.size(0), heads * d}));
}

Tensor DecoderModel::mlp_block(const ForwardContext& ctx, int64_t i, const Tensor& x) const {
  const Layer& l = layers_[static_cast<size_t>(i)];
  if (l.moe != nullptr) {
    // vLLM's router is an unquantized ReplicatedLinear in the model dtype; the experts run in
    // place on x (the normalized hidden states, not needed after).
    const Tensor router_logits = ops::matmul_16bit(ctx, x, l.router, Tensor());
    return l.moe->forward(ctx, x, router_logits);
  }
  const Tensor gate_up = l.gate_up->forward(ctx, x);
  hint(l.down);
  return l.down->forward(ctx, ops::silu_and_mul(ctx, gate_up));
}

Tensor DecoderModel::forward(const ForwardContext& ctx, const ForwardBatch& batch, const KvCachePool& pool) const {
  FP8KIT_CHECK(batch.token_ids.defined() && batch.token_ids.numel() > 0, ErrorCode::kInternal,
               "forward: an empty batch");
  Tensor hidden = ops::embedding(ctx, batch.token_ids, embed_tokens);  // [T, hidden]
  Tensor residual;
  const float eps = config_.rms_norm_eps;
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const Layer& l = layers_[static_cast<size_t>(i)];
    Tensor x;
    if (i == 0) {
      residual = hidden;
      x = ops::rms_norm(ctx, hidden, l.input_norm, eps);
    } else {
      ops::fused_add_rms_norm(ctx, hidden, residual, l.input_norm, eps);  // residual += hidden; hidden = norm
      x = hidden;
    }
    Tensor attn = attention_block(ctx, i, x, batch, pool);
    hint(l.gate_up);
    ops::fused_add_rms_norm(ctx, attn, residual, l.post_attention_norm, eps);
    hidden = mlp_block(ctx, i, attn);
    if (i + 1 < config_.num_layers) hint(layers_[static_cast<size_t>(i + 1)].qkv);
  }
  if (lm_head.device().is_cpu()) prefetch_hint(lm_head.data_ptr(), lm_head.nbytes());
  ops::fused_add_rms_norm(ctx, hidden, residual, final_norm, eps);
  // Only the wanted rows reach lm_head (a row gather through the embedding op).
  const Tensor rows = batch.logit_rows.defined() ? ops::embedding(ctx, batch.logit_rows, hidden) : hidden;
  Tensor logits = ops::matmul_16bit(ctx, rows, lm_head, Tensor());
  hint(layers_.front().qkv);  // the next step's first layer, during sampling
  return logits;
}

}  // namespace fp8kit::runner
