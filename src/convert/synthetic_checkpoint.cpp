#include "convert/synthetic_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/check.h"
#include "core/parallel.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/half.h"
#include "fp8kit/safetensors.h"

namespace fp8kit::convert {
namespace {

struct Planned {
  enum class Fill { kMatrix, kNorm, kBias };
  Planned(std::string n, Shape s, Fill f = Fill::kMatrix, std::optional<DType> d = std::nullopt)
      : name(std::move(n)), shape(std::move(s)), fill(f), dtype(d) {}
  std::string name;
  Shape shape;
  Fill fill;
  std::optional<DType> dtype;  // unset: the spec's dtype
};

using Fill = Planned::Fill;
constexpr float kStddev = 0.02f;

bool is_moe_layer(const SyntheticModelSpec& s, int64_t layer) {
  switch (s.architecture) {
    case SyntheticArchitecture::kMixtral: return true;
    case SyntheticArchitecture::kDeepseekV3: return layer >= s.first_k_dense_replace;
    case SyntheticArchitecture::kQwen3Moe: break;
  }
  return std::find(s.moe_layers.begin(), s.moe_layers.end(), layer) != s.moe_layers.end();
}

void add_dense_mlp(std::vector<Planned>& p, const std::string& mlp, int64_t h, int64_t inter) {
  p.push_back({mlp + "gate_proj.weight", {inter, h}});
  p.push_back({mlp + "up_proj.weight", {inter, h}});
  p.push_back({mlp + "down_proj.weight", {h, inter}});
}

// DeepSeek's multi-head latent attention, as DeepSeek-V3's checkpoints name and shape it: the
// query through a q_lora_rank bottleneck, the latent kv plus the shared rope key from one
// projection, then kv_b_proj expanding the latent into per-head nope keys and values.
void add_mla_attention(std::vector<Planned>& p, const std::string& a, const SyntheticModelSpec& s) {
  const int64_t h = s.hidden_size, heads = s.num_heads;
  p.push_back({a + "q_a_proj.weight", {s.q_lora_rank, h}});
  p.push_back({a + "q_a_layernorm.weight", {s.q_lora_rank}, Fill::kNorm});
  p.push_back({a + "q_b_proj.weight", {heads * (s.qk_nope_head_dim + s.qk_rope_head_dim), s.q_lora_rank}});
  p.push_back({a + "kv_a_proj_with_mqa.weight", {s.kv_lora_rank + s.qk_rope_head_dim, h}});
  p.push_back({a + "kv_a_layernorm.weight", {s.kv_lora_rank}, Fill::kNorm});
  p.push_back({a + "kv_b_proj.weight", {heads * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank}});
  p.push_back({a + "o_proj.weight", {h, heads * s.v_head_dim}});
}

void add_gqa_attention(std::vector<Planned>& p, const std::string& a, const SyntheticModelSpec& s) {
  const int64_t h = s.hidden_size, q = s.num_heads * s.head_dim, kv = s.num_kv_heads * s.head_dim;
  p.push_back({a + "q_proj.weight", {q, h}});
  p.push_back({a + "k_proj.weight", {kv, h}});
  p.push_back({a + "v_proj.weight", {kv, h}});
  p.push_back({a + "o_proj.weight", {h, q}});
  if (s.architecture == SyntheticArchitecture::kQwen3Moe) {
    p.push_back({a + "q_norm.weight", {s.head_dim}, Fill::kNorm});
    p.push_back({a + "k_norm.weight", {s.head_dim}, Fill::kNorm});
  }
}

// The router and experts of a sparse layer; DeepSeek's also the correction bias (F32 in its
// checkpoints whatever torch_dtype is) and the shared experts.
void add_sparse_mlp(std::vector<Planned>& p, const std::string& L, const SyntheticModelSpec& s) {
  const int64_t h = s.hidden_size, inter = s.moe_intermediate_size;
  if (s.architecture == SyntheticArchitecture::kMixtral) {
    const std::string B = L + "block_sparse_moe.";
    p.push_back({B + "gate.weight", {s.num_experts, h}});
    for (int64_t e = 0; e < s.num_experts; ++e) {
      const std::string E = B + "experts." + std::to_string(e) + ".";
      p.push_back({E + "w1.weight", {inter, h}});  // gate
      p.push_back({E + "w2.weight", {h, inter}});  // down
      p.push_back({E + "w3.weight", {inter, h}});  // up
    }
    return;
  }
  p.push_back({L + "mlp.gate.weight", {s.num_experts, h}});
  if (s.architecture == SyntheticArchitecture::kDeepseekV3) {
    p.push_back({L + "mlp.gate.e_score_correction_bias", {s.num_experts}, Fill::kBias, DType::kF32});
  }
  for (int64_t e = 0; e < s.num_experts; ++e) add_dense_mlp(p, L + "mlp.experts." + std::to_string(e) + ".", h, inter);
  if (s.architecture == SyntheticArchitecture::kDeepseekV3 && s.n_shared_experts > 0) {
    add_dense_mlp(p, L + "mlp.shared_experts.", h, inter * s.n_shared_experts);
  }
}

std::vector<Planned> plan_tensors(const SyntheticModelSpec& s) {
  const int64_t h = s.hidden_size;
  std::vector<Planned> p;
  p.push_back({"model.embed_tokens.weight", {s.vocab_size, h}});
  for (int64_t l = 0; l < s.num_layers; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".";
    p.push_back({L + "input_layernorm.weight", {h}, Fill::kNorm});
    p.push_back({L + "post_attention_layernorm.weight", {h}, Fill::kNorm});
    if (s.architecture == SyntheticArchitecture::kDeepseekV3) {
      add_mla_attention(p, L + "self_attn.", s);
    } else {
      add_gqa_attention(p, L + "self_attn.", s);
    }
    if (is_moe_layer(s, l)) {
      add_sparse_mlp(p, L, s);
    } else {
      add_dense_mlp(p, L + "mlp.", h, s.intermediate_size);
    }
  }
  p.push_back({"model.norm.weight", {h}, Fill::kNorm});
  if (!s.tie_word_embeddings) p.push_back({"lm_head.weight", {s.vocab_size, h}});
  return p;
}

DType dtype_of(const Planned& p, const SyntheticModelSpec& s) { return p.dtype.value_or(s.dtype); }

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Approximately normal values (sum of four uniforms), one in 2048 an outlier of 8 sigma.
float draw(uint64_t& state, float stddev) {
  const uint64_t a = splitmix64(state), b = splitmix64(state);
  const float u = float((a & 0xffff) + ((a >> 16) & 0xffff) + ((a >> 32) & 0xffff) + (a >> 48)) / 65536.0f - 2.0f;
  const float x = u * 1.7320508f * stddev;  // sum of 4 U(-0.5, 0.5) has variance 1/3
  return (b & 2047) == 0 ? x * 8.0f : x;
}

// Trained weight matrices have rows of very different magnitude; a log-uniform factor over
// e^-3 .. e^3 per output row gives per-tensor scaling something to lose against per-row or
// per-block scales.
float row_factor(uint64_t name_hash, uint64_t seed, int64_t row) {
  uint64_t state = seed ^ name_hash ^ (uint64_t(row) * 0xd1b54a32d192ed03ull) ^ 0x5bd1e995ull;
  const double u = double(splitmix64(state) >> 11) / double(1ull << 53);
  return float(std::exp(6.0 * u - 3.0));
}

void fill(Tensor& t, const Planned& p, uint64_t seed) {
  const int64_t n = t.numel();
  const int64_t cols = t.dim() == 2 ? t.size(1) : n;
  constexpr int64_t kChunk = 1 << 16;  // each chunk has its own stream: the result does not depend on threads
  uint64_t name_hash = 1469598103934665603ull;
  for (char c : p.name) name_hash = (name_hash ^ uint8_t(c)) * 1099511628211ull;
  parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      uint64_t state = seed ^ name_hash ^ (uint64_t(c) * 0x632be59bd9b4e019ull);
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
        // Norms near 1; correction biases small next to the sigmoid scores (~0.5 +- 0.1) but
        // large enough to change which experts are picked, as DeepSeek-V3's are.
        const float v = p.fill == Fill::kNorm   ? 1.0f + draw(state, 0.05f)
                        : p.fill == Fill::kBias ? draw(state, 0.05f)
                                                : draw(state, kStddev * row_factor(name_hash, seed, i / cols));
        switch (t.dtype()) {
          case DType::kBF16: t.data<BFloat16>()[i] = float_to_bf16(v); break;
          case DType::kF16: t.data<Float16>()[i] = float_to_f16(v); break;
          default: t.data<float>()[i] = v; break;
        }
      }
    }
  });
}

// The keys every architecture shares, after its own.
void add_common_config(nlohmann::ordered_json& c, const SyntheticModelSpec& s) {
  c["hidden_act"] = "silu";
  c["rms_norm_eps"] = 1e-6;
  c["rope_theta"] = s.architecture == SyntheticArchitecture::kDeepseekV3 ? 10000.0 : 1000000.0;
  c["max_position_embeddings"] = 4096;
  c["attention_bias"] = false;
  c["tie_word_embeddings"] = s.tie_word_embeddings;
  c["bos_token_id"] = 1;
  c["eos_token_id"] = 2;
  c["torch_dtype"] = s.dtype == DType::kBF16 ? "bfloat16" : s.dtype == DType::kF16 ? "float16" : "float32";
}

nlohmann::ordered_json qwen3_config(const SyntheticModelSpec& s) {
  std::vector<int64_t> dense;
  for (int64_t l = 0; l < s.num_layers; ++l) {
    if (!is_moe_layer(s, l)) dense.push_back(l);
  }
  const bool moe = !s.moe_layers.empty();
  nlohmann::ordered_json c = {{"architectures", {moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"}},
                              {"model_type", moe ? "qwen3_moe" : "qwen3"},
                              {"vocab_size", s.vocab_size},
                              {"hidden_size", s.hidden_size},
                              {"intermediate_size", s.intermediate_size}};
  if (moe) {
    c["moe_intermediate_size"] = s.moe_intermediate_size;
  }
  c["num_hidden_layers"] = s.num_layers;
  c["num_attention_heads"] = s.num_heads;
  c["num_key_value_heads"] = s.num_kv_heads;
  c["head_dim"] = s.head_dim;
  if (moe) {
    c["num_experts"] = s.num_experts;
    c["num_experts_per_tok"] = s.top_k;
    c["norm_topk_prob"] = true;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = dense;
  }
  return c;
}

// Mixtral-8x7B's keys: no head_dim (hidden_size / num_attention_heads) and intermediate_size is
// the experts' size, every layer being sparse.
nlohmann::ordered_json mixtral_config(const SyntheticModelSpec& s) {
  return {{"architectures", {"MixtralForCausalLM"}},
          {"model_type", "mixtral"},
          {"vocab_size", s.vocab_size},
          {"hidden_size", s.hidden_size},
          {"intermediate_size", s.moe_intermediate_size},
          {"num_hidden_layers", s.num_layers},
          {"num_attention_heads", s.num_heads},
          {"num_key_value_heads", s.num_kv_heads},
          {"num_local_experts", s.num_experts},
          {"num_experts_per_tok", s.top_k},
          {"router_aux_loss_coef", 0.02},
          {"sliding_window", nullptr}};
}

// DeepSeek-V3's keys (config_671B.json), minus the multi-token-prediction layer, which the
// synthetic checkpoint does not write (num_nextn_predict_layers 0).
nlohmann::ordered_json deepseek_v3_config(const SyntheticModelSpec& s) {
  return {{"architectures", {"DeepseekV3ForCausalLM"}},
          {"model_type", "deepseek_v3"},
          {"vocab_size", s.vocab_size},
          {"hidden_size", s.hidden_size},
          {"intermediate_size", s.intermediate_size},
          {"moe_intermediate_size", s.moe_intermediate_size},
          {"num_hidden_layers", s.num_layers},
          {"num_nextn_predict_layers", 0},
          {"num_attention_heads", s.num_heads},
          {"num_key_value_heads", s.num_heads},
          {"n_shared_experts", s.n_shared_experts},
          {"n_routed_experts", s.num_experts},
          {"ep_size", 1},
          {"routed_scaling_factor", s.routed_scaling_factor},
          {"kv_lora_rank", s.kv_lora_rank},
          {"q_lora_rank", s.q_lora_rank},
          {"qk_rope_head_dim", s.qk_rope_head_dim},
          {"v_head_dim", s.v_head_dim},
          {"qk_nope_head_dim", s.qk_nope_head_dim},
          {"topk_method", "noaux_tc"},
          {"n_group", s.n_group},
          {"topk_group", s.topk_group},
          {"num_experts_per_tok", s.top_k},
          {"moe_layer_freq", 1},
          {"first_k_dense_replace", s.first_k_dense_replace},
          {"norm_topk_prob", true},
          {"scoring_func", "sigmoid"}};
}

nlohmann::ordered_json make_config(const SyntheticModelSpec& s) {
  nlohmann::ordered_json c;
  switch (s.architecture) {
    case SyntheticArchitecture::kQwen3Moe: c = qwen3_config(s); break;
    case SyntheticArchitecture::kMixtral: c = mixtral_config(s); break;
    case SyntheticArchitecture::kDeepseekV3: c = deepseek_v3_config(s); break;
  }
  add_common_config(c, s);
  return c;
}

}  // namespace

uint64_t synthetic_checkpoint_bytes(const SyntheticModelSpec& spec) {
  uint64_t total = 0;
  for (const Planned& p : plan_tensors(spec)) total += uint64_t(shape_numel(p.shape)) * dtype_size(dtype_of(p, spec));
  return total;
}

void write_synthetic_checkpoint(const std::string& dir, const SyntheticModelSpec& spec) {
  FP8KIT_CHECK_ARG(spec.dtype == DType::kBF16 || spec.dtype == DType::kF16 || spec.dtype == DType::kF32,
                   "synthetic checkpoint: dtype must be bf16, f16 or f32");
  FP8KIT_CHECK_ARG(
      spec.architecture != SyntheticArchitecture::kMixtral || spec.num_heads * spec.head_dim == spec.hidden_size,
      "synthetic checkpoint: Mixtral's config has no head_dim, so head_dim must be hidden_size / num_heads");
  std::filesystem::create_directories(dir);
  const std::vector<Planned> tensors = plan_tensors(spec);
  // Shards: consecutive tensors up to max_shard_bytes each.
  std::vector<std::vector<const Planned*>> shards(1);
  uint64_t in_shard = 0;
  for (const Planned& p : tensors) {
    const uint64_t bytes = uint64_t(shape_numel(p.shape)) * dtype_size(dtype_of(p, spec));
    if (spec.max_shard_bytes && in_shard > 0 && in_shard + bytes > spec.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&p);
    in_shard += bytes;
  }
  SafetensorsIndex index;
  uint64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file = spec.max_shard_bytes == 0
                                 ? std::string("model.safetensors")
                                 : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    std::vector<TensorSpec> specs;
    for (const Planned* p : shards[i]) specs.push_back({p->name, dtype_of(*p, spec), p->shape});
    SafetensorsWriter writer(dir + "/" + file, specs);
    for (const Planned* p : shards[i]) {
      Tensor t = Tensor::empty(p->shape, dtype_of(*p, spec));
      fill(t, *p, spec.seed);
      writer.write(p->name, t);
      index.weight_map[p->name] = file;
      total += t.nbytes();
    }
    writer.finish();
  }
  if (spec.max_shard_bytes != 0) {
    index.total_size = total;
    write_safetensors_index(dir + "/model.safetensors.index.json", index);
  }
  write_json_file(dir + "/config.json", make_config(spec));
  write_json_file(dir + "/generation_config.json", {{"bos_token_id", 1}, {"eos_token_id", 2}, {"do_sample", false}});
}

}  // namespace fp8kit::convert
