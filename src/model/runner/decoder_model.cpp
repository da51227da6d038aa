// DecoderModel construction (decoder_model.h): the checkpoint loaded into fp8kit's layers and each
// decoder layer's pieces looked up by vLLM's module names (self_attn.qkv_proj, mlp.gate_up_proj,
// mlp.experts / block_sparse_moe.experts, ...). The forward is in decoder_forward.cpp.
#include "model/runner/decoder_model.h"

#include "core/check.h"
#include "fp8kit/checkpoint.h"

namespace fp8kit::runner {
namespace {

const Tensor& plain(const LoadedModel& m, const std::string& name) {
  const auto it = m.plain.find(name);
  FP8KIT_CHECK(it != m.plain.end(), ErrorCode::kInternal, "the loaded model has no tensor {}", name);
  return it->second;
}

}  // namespace

DecoderModel::DecoderModel(const std::string& dir, const LoadOptions& options) {
  const Checkpoint checkpoint = Checkpoint::open(dir);
  config_ = parse_decoder_config(checkpoint.config().dump());
  FP8KIT_CHECK(options.parallel.tp_size == 1 && options.ep_size == 1, ErrorCode::kUnsupported,
               "the model runner runs one rank (tp_size {}, ep_size {} given)", options.parallel.tp_size,
               options.ep_size);
  const ModelDescription description = describe_hf_model(checkpoint.config());
  model_ = load_model(dir, description, options);
  dtype_ = options.dtype.value_or(description.dtype);

  embed_tokens = plain(model_, "model.embed_tokens.weight");
  final_norm = plain(model_, "model.norm.weight");
  lm_head = config_.tie_word_embeddings ? embed_tokens : plain(model_, "lm_head.weight");
  vocab_size_ = lm_head.size(0);
  FP8KIT_CHECK_ARG(embed_tokens.size(0) == config_.vocab_size && vocab_size_ == config_.vocab_size,
                   "{}: vocab_size {} does not match the embedding ({} rows) and lm_head ({} rows)", dir,
                   config_.vocab_size, embed_tokens.size(0), vocab_size_);

  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Layer l;
    l.qkv = &model_.linear(p + "self_attn.qkv_proj");
    l.o_proj = &model_.linear(p + "self_attn.o_proj");
    l.attn = &model_.attention(p + "self_attn.attn");
    l.input_norm = plain(model_, p + "input_layernorm.weight");
    l.post_attention_norm = plain(model_, p + "post_attention_layernorm.weight");
    if (config_.qk_norm) {
      l.q_norm = plain(model_, p + "self_attn.q_norm.weight");
      l.k_norm = plain(model_, p + "self_attn.k_norm.weight");
    }
    for (const MoESpec& m : description.moes) {
      if (m.prefix.compare(0, p.size(), p) != 0) continue;
      l.moe = &model_.moe(m.prefix);
      l.router = plain(model_, m.router);
    }
    if (l.moe == nullptr) {
      l.gate_up = &model_.linear(p + "mlp.gate_up_proj");
      l.down = &model_.linear(p + "mlp.down_proj");
    }
    l.sliding_window = config_.sliding_window[static_cast<size_t>(i)];
    layers_.push_back(l);
  }
}

namespace {

Tensor to_device(const Tensor& t, const ForwardContext& ctx) {
  if (!t.defined()) return t;
  Tensor d = Tensor::empty(t.shape(), t.dtype(), ctx.device());
  d.copy_(t, ctx.stream());
  return d;
}

}  // namespace

ForwardBatch to_device(const ForwardBatch& b, const ForwardContext& ctx) {
  ForwardBatch d;
  d.token_ids = to_device(b.token_ids, ctx);
  d.positions = to_device(b.positions, ctx);
  d.metadata.query_start_loc = to_device(b.metadata.query_start_loc, ctx);
  d.metadata.seq_lens = to_device(b.metadata.seq_lens, ctx);
  d.metadata.block_table = to_device(b.metadata.block_table, ctx);
  d.metadata.slot_mapping = to_device(b.metadata.slot_mapping, ctx);
  d.logit_rows = to_device(b.logit_rows, ctx);
  return d;
}

}  // namespace fp8kit::runner
