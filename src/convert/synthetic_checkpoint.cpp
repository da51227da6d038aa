#include "convert/synthetic_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/check.h"
#include "core/parallel.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/half.h"
#include "fp8kit/safetensors.h"

namespace fp8kit::convert {
namespace {

struct Planned {
  std::string name;
  Shape shape;
  float stddev;  // 0: a norm weight (values near 1)
};

std::vector<Planned> plan_tensors(const SyntheticModelSpec& s) {
  const int64_t h = s.hidden_size, q = s.num_heads * s.head_dim, kv = s.num_kv_heads * s.head_dim;
  const float w = 0.02f;
  std::vector<Planned> p;
  p.push_back({"model.embed_tokens.weight", {s.vocab_size, h}, w});
  for (int64_t l = 0; l < s.num_layers; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".";
    p.push_back({L + "input_layernorm.weight", {h}, 0.0f});
    p.push_back({L + "post_attention_layernorm.weight", {h}, 0.0f});
    p.push_back({L + "self_attn.q_proj.weight", {q, h}, w});
    p.push_back({L + "self_attn.k_proj.weight", {kv, h}, w});
    p.push_back({L + "self_attn.v_proj.weight", {kv, h}, w});
    p.push_back({L + "self_attn.o_proj.weight", {h, q}, w});
    p.push_back({L + "self_attn.q_norm.weight", {s.head_dim}, 0.0f});
    p.push_back({L + "self_attn.k_norm.weight", {s.head_dim}, 0.0f});
    const bool moe = std::find(s.moe_layers.begin(), s.moe_layers.end(), l) != s.moe_layers.end();
    if (!moe) {
      p.push_back({L + "mlp.gate_proj.weight", {s.intermediate_size, h}, w});
      p.push_back({L + "mlp.up_proj.weight", {s.intermediate_size, h}, w});
      p.push_back({L + "mlp.down_proj.weight", {h, s.intermediate_size}, w});
      continue;
    }
    p.push_back({L + "mlp.gate.weight", {s.num_experts, h}, w});
    for (int64_t e = 0; e < s.num_experts; ++e) {
      const std::string E = L + "mlp.experts." + std::to_string(e) + ".";
      p.push_back({E + "gate_proj.weight", {s.moe_intermediate_size, h}, w});
      p.push_back({E + "up_proj.weight", {s.moe_intermediate_size, h}, w});
      p.push_back({E + "down_proj.weight", {h, s.moe_intermediate_size}, w});
    }
  }
  p.push_back({"model.norm.weight", {h}, 0.0f});
  if (!s.tie_word_embeddings) p.push_back({"lm_head.weight", {s.vocab_size, h}, w});
  return p;
}

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
        const float v = p.stddev == 0.0f ? 1.0f + draw(state, 0.05f)
                                         : draw(state, p.stddev * row_factor(name_hash, seed, i / cols));
        switch (t.dtype()) {
          case DType::kBF16: t.data<BFloat16>()[i] = float_to_bf16(v); break;
          case DType::kF16: t.data<Float16>()[i] = float_to_f16(v); break;
          default: t.data<float>()[i] = v; break;
        }
      }
    }
  });
}

nlohmann::ordered_json make_config(const SyntheticModelSpec& s) {
  std::vector<int64_t> dense;
  for (int64_t l = 0; l < s.num_layers; ++l) {
    if (std::find(s.moe_layers.begin(), s.moe_layers.end(), l) == s.moe_layers.end()) dense.push_back(l);
  }
  const char* dtype = s.dtype == DType::kBF16 ? "bfloat16" : s.dtype == DType::kF16 ? "float16" : "float32";
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
  c["hidden_act"] = "silu";
  c["rms_norm_eps"] = 1e-6;
  c["rope_theta"] = 1000000.0;
  c["max_position_embeddings"] = 4096;
  c["attention_bias"] = false;
  c["tie_word_embeddings"] = s.tie_word_embeddings;
  c["bos_token_id"] = 1;
  c["eos_token_id"] = 2;
  c["torch_dtype"] = dtype;
  return c;
}

}  // namespace

uint64_t synthetic_checkpoint_bytes(const SyntheticModelSpec& spec) {
  uint64_t total = 0;
  for (const Planned& p : plan_tensors(spec)) total += uint64_t(shape_numel(p.shape)) * dtype_size(spec.dtype);
  return total;
}

void write_synthetic_checkpoint(const std::string& dir, const SyntheticModelSpec& spec) {
  FP8KIT_CHECK_ARG(spec.dtype == DType::kBF16 || spec.dtype == DType::kF16 || spec.dtype == DType::kF32,
                   "synthetic checkpoint: dtype must be bf16, f16 or f32");
  std::filesystem::create_directories(dir);
  const std::vector<Planned> tensors = plan_tensors(spec);
  // Shards: consecutive tensors up to max_shard_bytes each.
  std::vector<std::vector<const Planned*>> shards(1);
  uint64_t in_shard = 0;
  for (const Planned& p : tensors) {
    const uint64_t bytes = uint64_t(shape_numel(p.shape)) * dtype_size(spec.dtype);
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
    for (const Planned* p : shards[i]) specs.push_back({p->name, spec.dtype, p->shape});
    SafetensorsWriter writer(dir + "/" + file, specs);
    for (const Planned* p : shards[i]) {
      Tensor t = Tensor::empty(p->shape, spec.dtype);
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
