// Checkpoint conversion: what `fp8kit quantize`, `dequantize` and `inspect` do, as a library.
//
// quantize_checkpoint turns a Hugging Face BF16/FP16/F32 checkpoint directory into an FP8
// checkpoint that vLLM loads unchanged:
//   per-tensor  quant_method "fp8", activation_scheme "dynamic"; `X.weight` F8_E4M3 [N, K] and
//               `X.weight_scale` F32 [] (AutoFP8's layout). The shards of a fused module (q/k/v,
//               gate/up, and each expert's gate/up) share one scale, so vLLM's
//               requantize_with_max_scale leaves them as written.
//   per-channel compressed-tensors "float-quantized" (the FP8_DYNAMIC preset): `X.weight`
//               F8_E4M3 [N, K], `X.weight_scale` F32 [N, 1]; dynamic per-token activations.
//   block       quant_method "fp8" + weight_block_size [bn, bk] (DeepSeek-V3 / Qwen3 layout):
//               `X.weight` F8_E4M3 [N, K], `X.weight_scale_inv` F32 [ceil(N/bn), ceil(K/bk)].
// Linear weights are quantized; embeddings, norms, MoE routers and lm_head (unless asked) are
// copied unchanged and the linear ones are listed in the ignored layers. Tensors stream one at a
// time from the memory-mapped input (bounded memory, all cores); the output is written under
// OUT.partial.<pid>.<random> and renamed to OUT only when complete, while the run holds OUT's
// lock; the input's other files and subdirectories are copied with it (README.md: "The
// command-line tool").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/dtype.h"

namespace fp8kit {

enum class QuantScheme { kPerTensor, kPerChannel, kBlock };
const char* quant_scheme_name(QuantScheme scheme);  // "per-tensor", "per-channel", "block"

// Progress of a long conversion: bytes of input tensors done out of the total.
struct ConversionProgress {
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  std::string current_tensor;
};
using ProgressCallback = std::function<void(const ConversionProgress&)>;

struct QuantizeOptions {
  QuantScheme scheme = QuantScheme::kBlock;
  // Block scheme only: from 1 to 1048576 each (2^20: larger tiles than any FP8 kernel takes, and
  // larger than any weight dimension, where a block that size is one partial block anyway).
  int64_t block_n = 128;
  int64_t block_k = 128;
  bool ue8m0_scales = false;  // block scheme: power-of-two scales, "scale_fmt": "ue8m0"
  // Modules to keep unquantized: an exact module path ("model.layers.0.mlp.down_proj") or a
  // regular expression prefixed "re:" that must match the whole module path ("re:.*mlp\.gate$").
  std::vector<std::string> ignore;
  bool quantize_lm_head = false;
  bool force = false;  // replace an existing output directory
  ProgressCallback progress;
};

struct ConversionReport {
  int64_t tensors_quantized = 0;  // quantize: weights made FP8; dequantize: weights made 16-bit
  int64_t tensors_copied = 0;
  uint64_t input_tensor_bytes = 0;
  uint64_t output_tensor_bytes = 0;
  double seconds = 0.0;
  std::vector<std::string> ignored_layers;  // as written to the output config
  std::vector<std::string> notes;           // things the user should know (skipped files...)
};

ConversionReport quantize_checkpoint(const std::string& input_dir, const std::string& output_dir,
                                     const QuantizeOptions& options);

struct DequantizeOptions {
  std::optional<DType> out_dtype;  // default: the config's torch_dtype if bf16/f16, else bf16
  bool force = false;
  ProgressCallback progress;
};

// FP8 (per-tensor, per-channel or block; vLLM fp8, compressed-tensors or ModelOpt layouts) back
// to a plain 16-bit checkpoint: weights dequantized, scale tensors dropped, quantization_config
// removed from config.json.
ConversionReport dequantize_checkpoint(const std::string& input_dir, const std::string& output_dir,
                                       const DequantizeOptions& options);

// What inspect finds in a checkpoint.
struct InspectedTensor {
  std::string name;
  std::string dtype;             // safetensors name
  std::vector<int64_t> shape;
  std::string role;              // "weight", "weight-scale", "input-scale", "kv-scale", "other"
  std::string scheme;            // for FP8 weights: "per-tensor", "per-channel", "block"; else ""
  std::string scale_name;        // for FP8 weights: the scale tensor
  std::optional<float> scale_min, scale_max;  // over the scale tensor (weights) or the value (scales)
};

// How fp8kit's model loader would place one checkpoint tensor (inspect --loading).
struct TensorLoading {
  std::string tensor;
  std::string target;     // "linear", "attention", "plain", "skipped", or "unplaced"
  std::string module;     // engine module (layer prefix) or plain tensor name
  std::string parameter;  // "weight", "weight_scale", "k_scale", ...
  std::string shard;      // "q", "k", "v", "0", "1", or "all"
  std::string method;     // the layer's quantization method: "Fp8LinearMethod", ...
};

struct InspectReport {
  std::string dir;
  std::string format;  // "fp8", "fp8-block", "compressed-tensors", "modelopt", "unquantized", ...
  nlohmann::ordered_json quantization_config;  // null when absent
  std::vector<std::string> ignored_layers;
  std::vector<std::string> kv_cache_scales;     // tensor names
  std::vector<InspectedTensor> tensors;
  std::vector<std::string> problems;            // empty for a healthy checkpoint
  uint64_t tensor_bytes = 0;
  // Filled with `loading` for the architectures the model loader knows; otherwise a note says why.
  std::vector<TensorLoading> loading;
  std::string loading_note;

  nlohmann::ordered_json to_json() const;
  std::string to_text() const;
};

// With `loading`, also how the model loader would place every tensor (method, shard, parameter).
InspectReport inspect_checkpoint(const std::string& dir, bool loading = false);

}  // namespace fp8kit
