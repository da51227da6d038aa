// The copy at the end of every weight loader (vLLM's `_assert_and_load` and `param.copy_`):
// shape checks whose errors name the layer, the parameter, the shard and both shapes; the dtype
// conversion torch's copy_ performs (bf16 or f16 scales into f32 parameters); host to device;
// and the record in Parameter::loaded_shards. Tested through tests/cpu/test_layer*.cpp and
// test_linear*.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fp8kit/layers/layer.h"

namespace fp8kit::detail {

// "model.layers.0.self_attn.qkv_proj.weight (shard k)": the prefix of messages about a load.
std::string load_site(const Layer& layer, const Parameter& p, const std::optional<ShardId>& shard);

// `src` with the values converted to `dtype`, as a contiguous CPU tensor (itself when nothing
// changes). Floating targets (f32, f16, bf16, f64) take floating or FP8 sources, rounded to
// nearest even as torch's copy_ does; other pairs are refused (a BF16 weight never silently
// becomes FP8 without a scale).
Tensor cast_for_load(const Tensor& src, DType dtype, const std::string& site);

// Copies `src` into `dst` (a view of p.data, same shape), converting the dtype, and records the
// shard as loaded.
void load_into(const Layer& layer, Parameter& p, const Tensor& dst, const Tensor& src,
               const std::optional<ShardId>& shard);

// The whole parameter from `src`: same shape, or one element into a one-element parameter (the
// spec's 1-D-and-scalar rule of `_assert_and_load`, and default_weight_loader's fill_ of scalars).
void assert_and_load(const Layer& layer, Parameter& p, const Tensor& src, const std::optional<ShardId>& shard);

// loaded.narrow(dim, start, length) with an error naming the load when the range or the
// dimension does not exist in the checkpoint tensor.
Tensor narrow_loaded(const Layer& layer, const Parameter& p, const Tensor& loaded, int64_t dim, int64_t start,
                     int64_t length, const std::optional<ShardId>& shard);

// A 0-dim checkpoint value as shape [1] (the column/row loaders' reshape of AutoFP8 scalars).
Tensor scalar_as_1d(const Tensor& loaded);

}  // namespace fp8kit::detail
