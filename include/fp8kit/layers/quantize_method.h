// QuantizeMethod (the spec's QuantizeMethodBase) and the bases of the methods per layer kind:
// LinearMethodBase (linear layers: unquantized_linear_method.h, fp8_linear_method.h),
// FusedMoEMethodBase (MoE layers: unquantized_fused_moe_method.h, fp8_moe_method.h) and
// BaseKVCacheMethod (attention: kv_cache_method.h). A method creates its layer's parameters,
// post-processes them once after loading (then builds the immutable prepared weights its forward
// reads: no parameter lookup by name on the hot path), and runs the layer's forward in the
// caller's ForwardContext (device stream, scratch workspace, kernel overrides).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/ops/moe_routing.h"
#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit {

class Fp8Config;
class FusedMoE;
class LinearBase;

class QuantizeMethod {
 public:
  virtual ~QuantizeMethod() = default;
  // The spec's class name: "UnquantizedLinearMethod", "Fp8LinearMethod", "Fp8MoEMethod",
  // "Fp8KVCacheMethod".
  virtual std::string name() const = 0;
};

class LinearMethodBase : public QuantizeMethod {
 public:
  // Registers the layer's parameters for this rank's partition (spec 1.2).
  virtual void create_weights(LinearBase& layer, int64_t input_size_per_partition,
                              const std::vector<int64_t>& output_partition_sizes, int64_t input_size,
                              int64_t output_size, DType params_dtype) = 0;
  // Once, after every checkpoint tensor is loaded (spec 1.3); device work on ctx's stream.
  virtual void process_weights_after_loading(const ForwardContext& ctx, LinearBase& layer) = 0;
  // y = x W^T (+ bias), in the layer's output dtype (spec 1.4). bias may be undefined.
  virtual Tensor apply(const ForwardContext& ctx, LinearBase& layer, const Tensor& x, const Tensor& bias) = 0;
};

// The keyword arguments of a MoE method's apply after (layer, x, router_logits) (spec 1.8):
// routing (FusedMoE.select_experts), expert parallelism and the experts' activation.
struct FusedMoEApplyOptions {
  int64_t top_k = 1;
  bool renormalize = false;
  bool use_grouped_topk = false;
  std::optional<int64_t> topk_group;
  std::optional<int64_t> num_expert_group;
  int64_t global_num_experts = -1;  // -1: the layer's local experts
  Tensor expert_map;                // i32 [global_num_experts]: local expert or -1; undefined without EP
  ops::CustomRoutingFunction custom_routing_function;
  std::string scoring_func = "softmax";
  Tensor e_score_correction_bias;  // f32 [E] or undefined
  bool apply_router_weight_on_input = false;
  std::string activation = "silu";
  bool enable_eplb = false;
  Tensor expert_load_view, logical_to_physical_map, logical_replica_count;
};

class FusedMoEMethodBase : public QuantizeMethod {
 public:
  // Registers w13_weight [E, 2I, H], w2_weight [E, H, I] and the method's scales, E the local
  // experts and I the intermediate size of this TP rank (spec 1.8).
  virtual void create_weights(FusedMoE& layer, int64_t num_experts, int64_t hidden_size,
                              int64_t intermediate_size_per_partition, DType params_dtype) = 0;
  // Once, after every checkpoint tensor is loaded; device work on ctx's stream.
  virtual void process_weights_after_loading(const ForwardContext& ctx, FusedMoE& layer) = 0;
  // select_experts, then the experts: [M, H] of x's dtype. In-place methods write the result
  // into x and return it.
  virtual Tensor apply(const ForwardContext& ctx, FusedMoE& layer, const Tensor& x, const Tensor& router_logits,
                       const FusedMoEApplyOptions& options) = 0;
};

}  // namespace fp8kit

// Fp8MoEMethod, which Fp8Config::get_quant_method returns for MoE layers, is declared with the
// bases it derives from.
#include "fp8kit/layers/fp8_moe_method.h"
