// Engine (include/fp8kit/model/engine.h): the model, its KV pool and the scheduler; step() runs
// the scheduled chunks through DecoderModel::forward, samples with ops::sample and finishes
// requests on a stop id or max_tokens. On CUDA the batch is uploaded (or a decode step replays its
// CUDA graph, decode_graphs.h), the forward runs on the device (weights and KV pool there), and
// greedy rows are sampled there too; other steps bring the wanted logit rows back for sampling.
// Tested by tests/cpu/test_engine.cpp, tests/cpu/test_engine_batching.cpp and
// tests/gpu/test_engine_cuda.cpp.
#include "fp8kit/model/engine.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/check.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/log.h"
#include "fp8kit/ops/embedding.h"
#include "model/runner/engine_impl.h"
#include "ops/sampling/sampling_args.h"

namespace fp8kit {
namespace runner {
namespace {

constexpr int64_t kDefaultKvTokens = 4096;

std::string describe_quantization(const LoadedModel& m) {
  const auto* fp8 = dynamic_cast<const Fp8Config*>(m.quant_config.get());
  if (m.quant_config == nullptr) return "none";
  if (fp8 == nullptr) return m.quant_config->get_name();
  if (!fp8->is_checkpoint_fp8_serialized) return "fp8 online (per-tensor weights, dynamic activations)";
  if (fp8->weight_block_size) {
    return "fp8 block " + std::to_string((*fp8->weight_block_size)[0]) + "x" +
           std::to_string((*fp8->weight_block_size)[1]) + " (dynamic 1x" +
           std::to_string((*fp8->weight_block_size)[1]) + " activations)";
  }
  return "fp8 per-tensor (" + fp8->activation_scheme + " activations)";
}

std::vector<int32_t> model_eos_ids(const Checkpoint& checkpoint, const DecoderConfig& config) {
  std::vector<int32_t> ids = config.eos_token_ids;
  if (const auto generation = checkpoint.read_json("generation_config.json")) {
    const auto add = [&](const nlohmann::ordered_json& v) {
      if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX) ids.push_back(v.get<int32_t>());
    };
    if (generation->contains("eos_token_id")) {
      const auto& e = (*generation)["eos_token_id"];
      if (e.is_array()) {
        for (const auto& v : e) add(v);
      } else {
        add(e);
      }
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

LoadOptions load_options(const EngineOptions& o) {
  LoadOptions l = o.load;
  l.kv_cache_dtype = o.kv_cache.dtype;
  l.calculate_kv_scales = o.kv_cache.calculate_kv_scales;
  return l;
}

void check_sampling(int64_t id, const ops::SamplingParams& s) {
  FP8KIT_CHECK_ARG(std::isfinite(s.temperature) && s.temperature >= 0, "request {}: temperature must be >= 0, got {}",
                   id, s.temperature);
  FP8KIT_CHECK_ARG(s.top_p > 0 && s.top_p <= 1, "request {}: top_p must be in (0, 1], got {}", id, s.top_p);
  FP8KIT_CHECK_ARG(s.min_p >= 0 && s.min_p <= 1, "request {}: min_p must be in [0, 1], got {}", id, s.min_p);
}

Tensor download(const Tensor& t, const ForwardContext& ctx) {
  Tensor h = Tensor::empty(t.shape(), t.dtype(), Device::cpu());
  h.copy_(t, ctx.stream());  // complete when it returns
  return h;
}

}  // namespace

EngineImpl::EngineImpl(const std::string& dir, const EngineOptions& o)
    : model_dir(dir), options(o), model(dir, load_options(o)) {
  const DecoderConfig& c = model.config();
  KvCacheLayout layout;
  layout.num_layers = c.num_layers;
  layout.num_kv_heads = c.num_kv_heads;
  layout.head_dim = c.head_dim;
  layout.model_dtype = model.dtype();
  layout.dtype = ops::parse_kv_cache_dtype(o.kv_cache.dtype);
  layout.block_size = o.kv_cache.block_size;
  const bool unset = o.kv_cache.num_tokens <= 0 && o.kv_cache.memory_bytes <= 0;
  FP8KIT_CHECK_ARG(o.kv_cache.num_tokens >= 0 && o.kv_cache.memory_bytes >= 0,
                   "KV cache: the token count and memory size must not be negative");
  pool = std::make_unique<KvCachePool>(
      layout, kv_pool_blocks(layout, unset ? kDefaultKvTokens : o.kv_cache.num_tokens, o.kv_cache.memory_bytes),
      o.load.device);
  scheduler = std::make_unique<Scheduler>(*pool, o.max_tokens_per_step, o.max_num_seqs);
#if FP8KIT_WITH_CUDA
  if (o.load.device.is_cuda() && o.cuda_graphs) {
    // A sequence's block table is at most as wide as the longest sequence needs (or the pool holds).
    const int64_t width = std::min(pool->blocks_for(c.max_model_len), pool->num_blocks());
    graphs = std::make_unique<DecodeGraphs>(model, *pool, std::max<int64_t>(1, o.max_num_seqs), std::max<int64_t>(1, width));
  }
#endif
  info.architecture = c.architecture;
  info.dtype = model.dtype();
  info.quantization = describe_quantization(model.loaded());
  info.vocab_size = model.vocab_size();
  info.num_layers = c.num_layers;
  info.max_model_len = c.max_model_len;
  eos = model_eos_ids(Checkpoint::open(dir), c);
}

int64_t EngineImpl::add_request(std::vector<int32_t> prompt, const GenerationParams& params) {
  const int64_t id = next_id;
  FP8KIT_CHECK_ARG(!prompt.empty(), "request {}: the prompt has no tokens", id);
  for (size_t i = 0; i < prompt.size(); ++i) {
    FP8KIT_CHECK_ARG(prompt[i] >= 0 && prompt[i] < info.vocab_size,
                     "request {}: prompt token {} is id {}, outside the vocabulary [0, {})", id, i, prompt[i],
                     info.vocab_size);
  }
  const int64_t n = int64_t(prompt.size());
  FP8KIT_CHECK_ARG(params.max_tokens >= 0, "request {}: max_tokens must be >= 0, got {}", id, params.max_tokens);
  FP8KIT_CHECK_ARG(n + params.max_tokens <= info.max_model_len,
                   "request {}: {} prompt tokens + max_tokens {} exceed the model's maximum length {}", id, n,
                   params.max_tokens, info.max_model_len);
  for (int32_t s : params.stop_token_ids) {
    FP8KIT_CHECK_ARG(s >= 0 && s < info.vocab_size, "request {}: stop token id {} is outside the vocabulary", id, s);
  }
  check_sampling(id, params.sampling);
  const int64_t need = blocks_needed(*pool, n, params.max_tokens);
  FP8KIT_CHECK_ARG(need <= pool->num_blocks(),
                   "request {}: {} prompt tokens + max_tokens {} need {} KV-cache blocks of {} tokens, the pool has {} "
                   "(a larger --kv-cache-memory or --kv-cache-tokens)",
                   id, n, params.max_tokens, need, pool->block_size(), pool->num_blocks());
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->tokens = std::move(prompt);
  seq->prompt_len = n;
  seq->params = params;
  seq->seed = params.seed.value_or(options.seed + uint64_t(id));
  scheduler->add(std::move(seq));
  ++next_id;
  return id;
}

StepOutput EngineImpl::step(const ForwardContext& ctx) {
  FP8KIT_CHECK_ARG(ctx.device() == options.load.device, "Engine::step: the context is on {}, the model on {}",
                   ctx.device().str(), options.load.device.str());
  StepOutput out;
  StepPlan plan = scheduler->schedule();
  if (plan.chunks.empty()) return out;
  out.num_prefill_tokens = plan.num_prefill_tokens;
  out.num_decode_tokens = plan.num_decode_tokens;
  const bool on_device = ctx.device().is_cuda();
  Tensor logits;  // [rows, vocab]
#if FP8KIT_WITH_CUDA
  if (graphs != nullptr && on_device && plan.num_prefill_tokens == 0 && graphs->serves(plan.batch)) {
    try {
      logits = graphs->run(ctx, plan.batch);
      out.cuda_graph = true;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kCuda) throw;
      log_warning(std::string("CUDA graphs are off for this engine, its steps run eagerly: ") + e.what());
      graphs.reset();
    }
  }
#endif
  if (!logits.defined()) logits = model.forward(ctx, on_device ? to_device(plan.batch, ctx) : plan.batch, *pool);

  std::vector<int64_t> rows;
  std::vector<ops::SamplingParams> params;
  bool all_greedy = true, logits_returned = false;
  for (const ScheduledChunk& c : plan.chunks) {
    logits_returned = logits_returned || c.seq->params.return_logits;
    if (!c.samples || c.seq->params.max_tokens == 0) continue;
    rows.push_back(c.first_logit_row + c.num_logit_rows - 1);
    ops::SamplingParams p = c.seq->params.sampling;
    p.seed = c.seq->seed;
    p.step = uint64_t(c.seq->num_generated);
    all_greedy = all_greedy && p.temperature < ops::kSamplingEps;
    params.push_back(p);
  }
  // On CUDA a step whose logit rows are all greedy samples, with none returned, samples on the
  // device and brings back two numbers a row. Otherwise the wanted logit rows come back once and
  // sampling and the returned logits are the host's. Either way that is the step's one wait.
  const bool device_sampling =
      on_device && !rows.empty() && all_greedy && !logits_returned && int64_t(rows.size()) == logits.size(0);
  ops::SamplingResult sampled;
  if (device_sampling) {
    const ops::SamplingResult d = ops::sample(ctx, logits, params);
    sampled.token_ids = download(d.token_ids, ctx);
    sampled.logprobs = download(d.logprobs, ctx);
  } else {
    std::optional<ForwardContext> host_ctx;
    if (on_device) {
      logits = download(logits, ctx);
      host_ctx.emplace(Device::cpu(), ctx.overrides());
    }
    const ForwardContext& sample_ctx = host_ctx ? *host_ctx : ctx;
    if (!rows.empty()) {
      const bool all_rows = int64_t(rows.size()) == logits.size(0);  // then rows is 0, 1, ...
      const Tensor picked = all_rows ? logits : ops::embedding(sample_ctx, Tensor::from_vector(rows), logits);
      sampled = ops::sample(sample_ctx, picked, params);
    }
  }

  size_t k = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence& seq = *c.seq;
    seq.num_computed += c.count;
    RequestOutput o;
    o.request_id = seq.id;
    o.num_prompt_tokens_done = std::min(seq.num_computed, seq.prompt_len);
    if (seq.params.return_logits) {
      // The rows from return_logits_from on (and the sampled last row, which is one of them or,
      // when the chunk ends before return_logits_from, the only row: then no logits are kept).
      const int64_t first = std::max(c.start, seq.params.return_logits_from);
      const int64_t n = std::max<int64_t>(c.start + c.count - first, 0);
      o.first_logits_position = first;
      o.logits = logits.narrow(0, c.first_logit_row + c.num_logit_rows - n, n);
    }
    if (c.samples && seq.params.max_tokens == 0) {
      seq.finish_reason = FinishReason::kLength;
    } else if (c.samples) {
      const auto token = int32_t(sampled.token_ids.data<int64_t>()[k]);
      o.new_token_ids.push_back(token);
      o.logprobs.push_back(sampled.logprobs.data<float>()[k]);
      ++k;
      seq.tokens.push_back(token);
      ++seq.num_generated;
      const auto& stops = seq.params.stop_token_ids;
      if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
        seq.finish_reason = FinishReason::kStop;
      } else if (seq.num_generated >= seq.params.max_tokens) {
        seq.finish_reason = FinishReason::kLength;
      }
    }
    o.finish_reason = seq.finish_reason;
    out.outputs.push_back(std::move(o));
  }
  scheduler->retire_finished();
  ctx.workspace().reset();
  return out;
}

}  // namespace runner

Engine::Engine(const std::string& model_dir, const EngineOptions& options)
    : impl_(std::make_unique<runner::EngineImpl>(model_dir, options)) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

int64_t Engine::add_request(std::vector<int32_t> prompt_token_ids, const GenerationParams& params) {
  return impl_->add_request(std::move(prompt_token_ids), params);
}
void Engine::abort_request(int64_t request_id) { impl_->scheduler->abort(request_id); }
StepOutput Engine::step(const ForwardContext& ctx) { return impl_->step(ctx); }
bool Engine::has_unfinished_requests() const { return !impl_->scheduler->empty(); }
int64_t Engine::num_waiting_requests() const { return impl_->scheduler->num_waiting(); }
const ModelInfo& Engine::model_info() const { return impl_->info; }
const std::vector<int32_t>& Engine::eos_token_ids() const { return impl_->eos; }
const std::string& Engine::model_dir() const { return impl_->model_dir; }
const LoadedModel& Engine::loaded_model() const { return impl_->model.loaded(); }

KvCacheInfo Engine::kv_cache_info() const {
  const runner::KvCachePool& p = *impl_->pool;
  KvCacheInfo i;
  i.dtype = ops::kv_cache_dtype_name(p.layout().dtype);
  i.block_size = p.block_size();
  i.num_blocks = p.num_blocks();
  i.free_blocks = p.free_blocks();
  i.bytes = p.bytes();
  return i;
}

}  // namespace fp8kit
