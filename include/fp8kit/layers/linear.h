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

namespace fp8kit {

class QuantizationConfig;
class LinearMethodBase;

struct LinearOptions {
  bool bias = false;
  DType params_dtype = DType::kBF16;                 // the model dtype: weights, bias, outputs
  const QuantizationConfig* quant_config = nullptr;  // nullptr: unquantized; must outlive the layer
  ParallelConfig parallel;
  Device device = Device::cpu();
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
  LinearMethodBase& linear_method() const;

  // y[..., N_partition] = method.apply(x[..., K_partition]) (+ bias where this layer adds it).
  virtual Tensor forward(const Tensor& x);
  // The method's post-processing (requantization, transposition, ...), once after loading.
  void process_weights_after_loading();

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
  // The partial product of this rank; the bias only on rank 0, so the sum over ranks (the
  // all-reduce) adds it once.
  Tensor forward(const Tensor& x) override;
};

}  // namespace fp8kit
