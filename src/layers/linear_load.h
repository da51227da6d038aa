// Loading rules the linear layers share (vLLM's weight_loader_v2 and the parameter classes'
// load_* methods; spec 1.12): which kinds follow the output dimension, the column slice of one
// rank, a per-tensor scale into its shard's slot, and the block size of block-scale offsets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/checked_math.h"
#include "fp8kit/layers/linear.h"

namespace fp8kit::detail {

// The layer's prefix, or "linear layer" when it has none: the subject of error messages.
const std::string& layer_name(const std::string& prefix);

// size / tp_size, or an error naming the layer and `what` when it does not divide (vLLM's divide).
int64_t divide_for_tp(const std::string& prefix, int64_t size, int tp_size, std::string_view what);

// Weights, block scales, channel scales and biases: their dimension 0 is the output dimension.
bool follows_output_dim(ParameterKind kind);

// block_n of the layer's weight_block_size, which block-scale offsets are counted in.
int64_t block_n_of(const LinearBase& layer, const Parameter& p);

// Error unless `shard` is nullopt: unfused layers take no shard ids.
void require_no_shard(const LinearBase& layer, const Parameter& p, const std::optional<ShardId>& shard);

// p.data[offset : offset + size] (dimension 0) from loaded[src_offset : src_offset + size].
void load_rows(const LinearBase& layer, Parameter& p, const Tensor& loaded, int64_t offset, int64_t size,
               int64_t src_offset, const std::optional<ShardId>& shard);

// PerTensorScaleParameter._load_into_shard_id: a 0-dim value, or the first entry of a value whose
// first dimension is 1 (compressed-tensors' [1] scales), into p.data[slot].
void load_scale_into_slot(const LinearBase& layer, Parameter& p, const Tensor& loaded, int64_t slot,
                          const std::optional<ShardId>& shard);

// ColumnParallelLinear.weight_loader_v2 (also the bias loader): this rank's rows of the output
// dimension; per-tensor scales and plain parameters load whole. A 0-dim value loads as [1].
void load_column_parallel(const LinearBase& layer, Parameter& p, const Tensor& loaded,
                          const std::optional<ShardId>& shard);

}  // namespace fp8kit::detail
