// The linear layers of the spec (vLLM linear.py; spec 1.2, 1.12): LinearBase and its subclasses
// with their sizes, tensor-parallel slices and weight loaders (weight_loader_v2 rules):
//   ReplicatedLinear             whole weight on every rank
//   ColumnParallelLinear         output features split across ranks
//   MergedColumnParallelLinear   several column layers stacked (gate_up_proj): shard ids 0, 1, ...
//   QKVParallelLinear            q, k, v stacked: shard ids "q", "k", "v"; kv heads replicated
//                                when tp_size > total kv heads
//   RowParallelLinear            input features split across ranks; the bias is added on rank 0
// Each layer asks the quantization config for its method (UnquantizedLinearMethod when none or
// skipped), which creates the parameters, post-processes them after loading and runs forward.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/layers/layer.h"
#include "fp8kit/runtime/forward_context.h"

namespace fp8kit {

class QuantizationConfig;
class LinearMethodBase;

struct LinearOptions {
  bool bias = false;
  DType params_dtype = DType::kBF16;                 // the model dtype: weights, bias, outputs
  const QuantizationConfig* quant_config = nullptr;  // nullptr: unquantized; only used while the layer is built
  ParallelConfig parallel;
  Device device = Device::cpu();
  // FP8 layers take the weight-only (W8A16) path whatever the device (Overrides::force_weight_only,
  // vLLM's VLLM_TEST_FORCE_FP8_MARLIN).
  bool force_weight_only = false;
};

class LinearBase : public Layer {
 public:
  int64_t input_size() const { return input_size_; }
  int64_t output_size() const { return output_size_; }
  int64_t input_size_per_partition() const { return input_size_per_partition_; }
  int64_t output_size_per_partition() const { return output_size_per_partition_; }
  // Output features of each logical shard on this rank (vLLM's output_partition_sizes).
  const std::vector<int64_t>& output_partition_sizes() const { return output_partition_sizes_; }
  DType params_dtype() const { return params_dtype_; }
  const ParallelConfig& parallel() const { return parallel_; }
  bool force_weight_only() const { return force_weight_only_; }
  LinearMethodBase& linear_method() const;

  // y[..., N_partition] = method.apply(ctx, x[..., K_partition]) (+ bias where this layer adds it).
  Tensor forward(const ForwardContext& ctx, const Tensor& x);
  // The method's post-processing (requantization, transposition, ...), once after loading; then
  // the bias this rank adds is kept for forward.
  void process_weights_after_loading(const ForwardContext& ctx);

  // Attributes the quantization methods keep on the layer (vLLM sets them on the module).
  std::vector<int64_t> logical_widths;
  DType orig_dtype = DType::kBF16;
  std::optional<std::vector<int64_t>> weight_block_size;

 protected:
  LinearBase(std::string prefix, int64_t input_size, int64_t output_size, const LinearOptions& options);
  // Subclasses set the partition sizes, then call this: the method creates the parameters, and
  // the bias (if any) is added.
  void create_weights(int64_t input_size_per_partition, std::vector<int64_t> output_partition_sizes, bool bias,
                      bool bias_is_partitioned);

  int64_t input_size_;
  int64_t output_size_;
  int64_t input_size_per_partition_ = 0;
  int64_t output_size_per_partition_ = 0;
  std::vector<int64_t> output_partition_sizes_;
  DType params_dtype_;
  ParallelConfig parallel_;
  bool force_weight_only_ = false;
  Tensor forward_bias_;  // the bias forward adds (undefined: none), set after processing

  // Whether this rank adds the bias (row-parallel layers: rank 0 only).
  virtual bool adds_bias() const { return true; }
};

class ReplicatedLinear : public LinearBase {
 public:
  ReplicatedLinear(std::string prefix, int64_t input_size, int64_t output_size, const LinearOptions& options = {});
  void load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) override;
};

class ColumnParallelLinear : public LinearBase {
 public:
  ColumnParallelLinear(std::string prefix, int64_t input_size, int64_t output_size, const LinearOptions& options = {});
  void load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) override;

 protected:
  // For subclasses that set their own output partition sizes.
  ColumnParallelLinear(std::string prefix, int64_t input_size, int64_t output_size, const LinearOptions& options,
                       std::vector<int64_t> output_partition_sizes);
};

class MergedColumnParallelLinear : public ColumnParallelLinear {
 public:
  // output_sizes: the full (all ranks) output features of each stacked layer, e.g. {I, I}.
  MergedColumnParallelLinear(std::string prefix, int64_t input_size, std::vector<int64_t> output_sizes,
                             const LinearOptions& options = {});
  const std::vector<int64_t>& output_sizes() const { return output_sizes_; }
  void load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) override;

 private:
  std::vector<int64_t> output_sizes_;
};

class QKVParallelLinear : public ColumnParallelLinear {
 public:
  QKVParallelLinear(std::string prefix, int64_t hidden_size, int64_t head_size, int64_t total_num_heads,
                    std::optional<int64_t> total_num_kv_heads = std::nullopt, const LinearOptions& options = {});
  int64_t head_size() const { return head_size_; }
  int64_t num_heads() const { return num_heads_; }        // on this rank
  int64_t num_kv_heads() const { return num_kv_heads_; }  // on this rank
  int64_t num_kv_head_replicas() const { return num_kv_head_replicas_; }
  int64_t total_num_heads() const { return total_num_heads_; }
  int64_t total_num_kv_heads() const { return total_num_kv_heads_; }
  void load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) override;

 private:
  int64_t head_size_, total_num_heads_, total_num_kv_heads_;
  int64_t num_heads_ = 0, num_kv_heads_ = 0, num_kv_head_replicas_ = 1;
};

class RowParallelLinear : public LinearBase {
 public:
  RowParallelLinear(std::string prefix, int64_t input_size, int64_t output_size, const LinearOptions& options = {});
  void load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) override;
  // forward gives the partial product of this rank; the bias only on rank 0, so the sum over
  // ranks (the all-reduce) adds it once.

 protected:
  bool adds_bias() const override { return parallel_.tp_rank == 0; }
};

}  // namespace fp8kit
