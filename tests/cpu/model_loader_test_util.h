// Helpers of the checkpoint-loader tests (test_model_loader*.cpp): synthetic dense checkpoints
// written by `fp8kit quantize`'s library entry, rewriting a checkpoint's tensors or config, and
// each layer's output checked against the BF16 weights in double precision.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "convert/synthetic_checkpoint.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"
#include "fp8kit/half.h"
#include "fp8kit/model/model_loader.h"
#include "fp8kit/safetensors.h"
#include "test_context.h"

namespace fp8kit::loader_test {

inline convert::SyntheticModelSpec dense_spec() {
  convert::SyntheticModelSpec spec;
  spec.moe_layers = {};  // Qwen3ForCausalLM
  spec.num_layers = 2;
  return spec;
}

inline std::string make_bf16(const std::string& root) {
  convert::write_synthetic_checkpoint(root + "/bf16", dense_spec());
  return root + "/bf16";
}

inline std::string make_fp8(const std::string& root, QuantScheme scheme) {
  const std::string in = make_bf16(root);
  QuantizeOptions o;
  o.scheme = scheme;
  quantize_checkpoint(in, root + "/fp8", o);
  return root + "/fp8";
}

inline Tensor random_bf16(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor t = Tensor::empty(shape, DType::kBF16);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<BFloat16>()[i] = float_to_bf16(nd(rng));
  return t;
}

inline float to_float(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kBF16 ? bf16_to_float(t.data<BFloat16>()[i]) : t.data<float>()[i];
}

// x [M, K] times the concatenation of the BF16 checkpoint's `parts` ([N_i, K] each), in double.
inline std::vector<double> reference(const Tensor& x, const Checkpoint& bf16, const std::vector<std::string>& parts) {
  const int64_t m = x.size(0), k = x.size(1);
  std::vector<double> y;
  std::vector<std::vector<double>> rows(m);
  for (const std::string& name : parts) {
    const Tensor w = bf16.tensor(name);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < w.size(0); ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk) s += double(to_float(x, i * k + kk)) * double(to_float(w, j * k + kk));
        rows[i].push_back(s);
      }
    }
  }
  for (auto& r : rows) y.insert(y.end(), r.begin(), r.end());
  return y;
}

inline double rel_error(const Tensor& y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    num += std::pow(double(to_float(y, i)) - ref[size_t(i)], 2);
    den += ref[size_t(i)] * ref[size_t(i)];
  }
  return std::sqrt(num / den);
}

// Every linear layer of layer 0 against the BF16 weights: FP8 keeps the error to a few percent.
inline void expect_layers_close(const LoadedModel& model, const std::string& bf16_dir, double tolerance) {
  const Checkpoint bf16 = Checkpoint::open(bf16_dir);
  const std::string p = "model.layers.0.";
  struct Case {
    std::string layer;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {p + "self_attn.qkv_proj", {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"}},
      {p + "self_attn.o_proj", {p + "self_attn.o_proj.weight"}},
      {p + "mlp.gate_up_proj", {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}},
      {p + "mlp.down_proj", {p + "mlp.down_proj.weight"}}};
  for (const Case& c : cases) {
    LinearBase& layer = model.linear(c.layer);
    const Tensor x = random_bf16({5, layer.input_size()}, 7);  // on the host, for the reference
    const ForwardContext ctx(layer.device());  // the GPU tests share this check
    const Tensor y = layer.forward(ctx, x.to(layer.device())).to(Device::cpu());
    const double err = rel_error(y, reference(x, bf16, c.parts));
    EXPECT_TRUE(err <= tolerance) << c.layer << " error " << err;
  }
}

using Tensors = std::vector<std::pair<std::string, Tensor>>;

// Rewrites the single-file checkpoint in `dir`: `edit` may change, add or drop tensors (they are
// copied out of the mapping first) and the config.
inline void rewrite_checkpoint(const std::string& dir, const std::function<void(Tensors&, nlohmann::ordered_json&)>& edit) {
  Tensors tensors;
  nlohmann::ordered_json config;
  {
    const Checkpoint ckpt = Checkpoint::open(dir);
    for (const std::string& name : ckpt.tensor_names()) tensors.push_back({name, ckpt.tensor(name).clone()});
    config = ckpt.config();
  }
  edit(tensors, config);
  save_safetensors(dir + "/model.safetensors", tensors);
  write_json_file(dir + "/config.json", config);
}

inline Tensor& find_tensor(Tensors& tensors, const std::string& name) {
  for (auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  static Tensor none;
  return none;
}

// ---- MoE (test_fused_moe*.cpp, test_model_loader_moe.cpp) ----------------------------------------

// The synthetic Qwen3-MoE checkpoint: layer 0 dense, layer 1 sparse (8 experts, top 2).
inline convert::SyntheticModelSpec moe_spec() {
  convert::SyntheticModelSpec spec;
  spec.num_layers = 2;
  spec.moe_layers = {1};
  return spec;
}

// A synthetic Mixtral: 2 layers, both sparse (block_sparse_moe, 8 experts w1/w2/w3, top 2).
inline convert::SyntheticModelSpec mixtral_spec() {
  convert::SyntheticModelSpec spec;
  spec.architecture = convert::SyntheticArchitecture::kMixtral;
  spec.num_layers = 2;
  spec.num_experts = 8;
  spec.top_k = 2;
  spec.moe_intermediate_size = 128;
  return spec;
}

// A synthetic DeepSeek-V3: 3 layers, layer 0 dense (first_k_dense_replace 1), layers 1 and 2
// with 16 routed experts in 4 groups (top 2 groups, top 4 experts, sigmoid, correction bias) and
// one shared expert; MLA attention with every projection's input a multiple of 128, so block FP8
// applies to all of them (kv_a_proj_with_mqa's 144 rows end in a partial block, as the real
// model's 576 do).
inline convert::SyntheticModelSpec deepseek_v3_spec() {
  convert::SyntheticModelSpec spec;
  spec.architecture = convert::SyntheticArchitecture::kDeepseekV3;
  spec.num_layers = 3;
  spec.intermediate_size = 512;
  spec.first_k_dense_replace = 1;
  spec.num_experts = 16;
  spec.n_group = 4;
  spec.topk_group = 2;
  spec.top_k = 4;
  spec.moe_intermediate_size = 128;
  spec.n_shared_experts = 1;
  return spec;
}

// A BF16 MoE in double: y[t] = sum_k topk_weights[t, k] * W2_e (silu(W1_e x_t) * (W3_e x_t)) with
// e = topk_ids[t, k]; weight(e, "w1" | "w2" | "w3") gives expert e's [I, H], [H, I], [I, H]
// weights (bf16 or f32). x: [M, H] bf16 or f32. Returns [M, H].
inline std::vector<double> moe_reference(const Tensor& x, const Tensor& topk_weights, const Tensor& topk_ids,
                                         const std::function<Tensor(int64_t, const char*)>& weight) {
  const int64_t m = x.size(0), h = x.size(1), top_k = topk_ids.size(1);
  std::vector<double> y(size_t(m * h), 0.0);
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t e = topk_ids.data<int32_t>()[t * top_k + k];
      const double rw = topk_weights.data<float>()[t * top_k + k];
      const Tensor w1 = weight(e, "w1"), w3 = weight(e, "w3"), w2 = weight(e, "w2");
      const int64_t inter = w1.size(0);
      std::vector<double> act(static_cast<size_t>(inter));
      for (int64_t i = 0; i < inter; ++i) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < h; ++c) {
          const double xv = to_float(x, t * h + c);
          g += xv * to_float(w1, i * h + c);
          u += xv * to_float(w3, i * h + c);
        }
        act[size_t(i)] = g / (1.0 + std::exp(-g)) * u;
      }
      for (int64_t c = 0; c < h; ++c) {
        double s = 0;
        for (int64_t i = 0; i < inter; ++i) s += act[size_t(i)] * to_float(w2, c * inter + i);
        y[size_t(t * h + c)] += rw * s;
      }
    }
  }
  return y;
}

}  // namespace fp8kit::loader_test
