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
    const Tensor x = random_bf16({5, layer.input_size()}, 7).to(layer.device());
    const Tensor y = layer.forward(x).to(Device::cpu());
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

}  // namespace fp8kit::loader_test
