// FusedMoE (spec 1.9, 4): the mixture-of-experts layer of vLLM's fused_moe/layer.py. It holds
// this rank's experts as two stacked weights, w13_weight [E, 2I, H] (gate rows [0, I), up rows
// [I, 2I)) and w2_weight [E, H, I], with E the local experts (expert parallelism: the expert map
// of determine_expert_map) and I = intermediate_size / tp_size (tensor parallelism: every
// expert's intermediate dimension is split). The quantization config's method creates the
// parameters (UnquantizedFusedMoEMethod without a config, Fp8MoEMethod with Fp8Config), the
// checkpoint's per-expert tensors load through weight_loader, and forward routes the tokens
// (select_experts) and runs the experts. Tested by tests/cpu/test_fused_moe*.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "fp8kit/layers/layer.h"
#include "fp8kit/layers/quantize_method.h"
#include "fp8kit/ops/moe_routing.h"

namespace fp8kit {

class QuantizationConfig;

struct FusedMoEOptions {
  int64_t num_experts = 0;  // logical experts of the model (all ranks)
  int64_t top_k = 1;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // per expert, all TP ranks together
  DType params_dtype = DType::kBF16;
  // Whether the engine all-reduces the output over the TP and EP ranks (spec 1.9 forward). fp8kit
  // has no collectives in the layer: forward returns this rank's partial sum either way.
  bool reduce_results = false;
  bool renormalize = true;
  bool use_grouped_topk = false;
  std::optional<int64_t> num_expert_group;
  std::optional<int64_t> topk_group;
  const QuantizationConfig* quant_config = nullptr;  // nullptr: unquantized; must outlive the layer
  ParallelConfig parallel;                           // tensor parallelism of the intermediate dim
  int64_t ep_size = 1;                               // expert parallelism
  int64_t ep_rank = 0;
  int64_t num_redundant_experts = 0;  // extra physical replicas (EPLB)
  bool enable_eplb = false;
  ops::CustomRoutingFunction custom_routing_function;
  std::string scoring_func = "softmax";  // "softmax" or "sigmoid" (grouped top-k only)
  Tensor e_score_correction_bias;        // f32 [num_experts] or undefined (DeepSeek-V3)
  std::string activation = "silu";
  bool apply_router_weight_on_input = false;
  Device device = Device::cpu();
  // FP8 experts take the weight-only (W8A16) path whatever the device (Overrides::force_weight_only).
  bool force_weight_only = false;
};

// One entry of make_expert_params_mapping: (param_prefix, checkpoint name part, physical expert
// id, shard id), e.g. ("experts.w13_", "experts.3.gate_proj.", 3, "w1").
struct ExpertParamsMapping {
  std::string param_prefix;
  std::string weight_name;
  int64_t expert_id = 0;
  std::string shard_id;
};

class FusedMoE : public Layer {
 public:
  // A bare layer with no experts, parameters or method: what a config's dispatch is tested on.
  FusedMoE() = default;
  // Errors (kInvalidArgument): "Only softmax scoring function is supported for non-grouped
  // topk." (spec text); intermediate_size not divisible by tp_size; use_grouped_topk without
  // num_expert_group and topk_group; with EPLB, "EPLB is only supported for FP8 quantization for
  // now." (kUnsupported) and an expert count not divisible by ep_size; sizes that are not
  // positive, ranks out of range. The method's create_weights errors pass through.
  FusedMoE(std::string prefix, const FusedMoEOptions& options);

  // The spec's layer attributes.
  int64_t global_num_experts() const { return global_num_experts_; }
  int64_t local_num_experts() const { return local_num_experts_; }
  const Tensor& expert_map() const { return expert_map_; }  // i32 [global]; undefined when ep_size == 1
  int64_t hidden_size() const { return hidden_size_; }
  int64_t intermediate_size_per_partition() const { return intermediate_size_per_partition_; }
  const ParallelConfig& parallel() const { return options_.parallel; }
  int64_t ep_size() const { return options_.ep_size; }
  int64_t ep_rank() const { return options_.ep_rank; }
  int64_t top_k() const { return options_.top_k; }
  DType params_dtype() const { return options_.params_dtype; }
  const FusedMoEOptions& options() const { return options_; }
  FusedMoEMethodBase& moe_method() const;

  // Set by the method's create_weights (vLLM keeps them on the module).
  DType orig_dtype = DType::kBF16;
  std::optional<std::vector<int64_t>> weight_block_size;
  // DeepSeek-V3's router bias: the loader sets it once the checkpoint's tensor is read.
  Tensor e_score_correction_bias;

  // The spec's FusedMoE.weight_loader: `loaded` is one expert's checkpoint tensor (or, 3-D, all
  // experts at once) for parameter `param_name` (w13_weight, w2_weight_scale, w13_input_scale, ...).
  // expert_id is global: an expert of another EP rank is skipped (returns false); otherwise
  // true after loading, or false when weight_name is none of input_scale / scale / weight.
  // weight_name decides the case as in vLLM: "input_scale" -> param[e] = loaded; "scale" (or
  // "zero", "offset") -> by the parameter's scale kind: per-tensor w1 -> [e][0], w3 -> [e][1],
  // w2 -> [e]; block -> narrowed like the weights, in blocks; channel -> w2 whole, w1/w3 like
  // weights; "weight" -> w1/w3 rows [0, I) / [I, 2I) of expert e from checkpoint rows
  // [tp_rank I, (tp_rank + 1) I), w2 from checkpoint columns [tp_rank I, (tp_rank + 1) I).
  // Errors (kInvalidArgument): "shard_id must be ['w1','w2','w3'] but got {shard_id}."; "quant
  // method must be one of ['tensor', 'channel', 'group', 'block']" for a scale into a parameter
  // of no scale kind; shapes that do not match (naming the parameter, shard and expert).
  bool weight_loader(std::string_view param_name, const Tensor& loaded, std::string_view weight_name,
                     std::string_view shard_id, int64_t expert_id);
  // MoE tensors need an expert id: use weight_loader. Always an error.
  void load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) override;
  // The record weight_loader leaves in Parameter::loaded_shards: "w1 of expert 3" (global id).
  static std::string loaded_shard_key(std::string_view shard_id, int64_t expert_id);

  // The spec's make_expert_params_mapping: for every physical expert e (num_experts +
  // num_redundant_experts of them; redundant ones replicate logical expert i % num_experts) and
  // shard (w1: gate, w2: down, w3: up), ("experts.w13_" or "experts.w2_", "experts.{logical}.{name}.",
  // e, shard).
  static std::vector<ExpertParamsMapping> make_expert_params_mapping(const std::string& ckpt_gate_proj_name,
                                                                     const std::string& ckpt_down_proj_name,
                                                                     const std::string& ckpt_up_proj_name,
                                                                     int64_t num_experts,
                                                                     int64_t num_redundant_experts = 0);

  // The spec's static select_experts: grouped top-k, fused top-k or the custom function, then
  // EPLB when enabled. f32 weights and i32 global expert ids [M, top_k].
  static ops::TopkResult select_experts(const ForwardContext& ctx, const Tensor& x, const Tensor& router_logits,
                                        const FusedMoEApplyOptions& options);
  // The apply arguments this layer passes to its method (its routing settings and expert map).
  FusedMoEApplyOptions apply_options() const;
  // out [M, H] = the method's apply: routing of router_logits [M, num_experts] and this rank's
  // experts. x [M, H] in the model dtype, contiguous. The spec's methods run in place (the FP8
  // and unquantized ones write the result into x: pass x.clone() to keep it); the weight-only
  // path returns a new tensor. With TP or EP this is the rank's partial sum: the sum over ranks
  // is the layer's output (the all-reduce of reduce_results).
  Tensor forward(const ForwardContext& ctx, const Tensor& x, const Tensor& router_logits);
  // The method's post-processing, once after loading.
  void process_weights_after_loading(const ForwardContext& ctx);

 private:
  FusedMoEOptions options_;
  int64_t global_num_experts_ = 0;
  int64_t local_num_experts_ = 0;
  int64_t hidden_size_ = 0;
  int64_t intermediate_size_per_partition_ = 0;
  Tensor expert_map_;
};

}  // namespace fp8kit
