// Loading rules shared by the linear layers (linear_load.h).
#include "layers/linear_load.h"

#include "core/check.h"
#include "layers/parameter_load.h"

namespace fp8kit::detail {

const std::string& layer_name(const std::string& prefix) {
  static const std::string kLayer = "linear layer";
  return prefix.empty() ? kLayer : prefix;
}

int64_t divide_for_tp(const std::string& prefix, int64_t size, int tp_size, std::string_view what) {
  FP8KIT_CHECK_ARG(tp_size >= 1, "{}: tp_size must be positive, got {}", layer_name(prefix), tp_size);
  FP8KIT_CHECK_ARG(size % tp_size == 0, "{}: {} = {} is not divisible by the tensor-parallel size {}",
                   layer_name(prefix), what, size, tp_size);
  return size / tp_size;
}

bool follows_output_dim(ParameterKind kind) {
  return kind == ParameterKind::kModelWeight || kind == ParameterKind::kBlockScale ||
         kind == ParameterKind::kChannelScale || kind == ParameterKind::kBias;
}

int64_t block_n_of(const LinearBase& layer, const Parameter& p) {
  FP8KIT_CHECK(layer.weight_block_size.has_value() && !layer.weight_block_size->empty() &&
                   (*layer.weight_block_size)[0] > 0,
               ErrorCode::kInternal, "{}: a block-scale parameter on a layer without weight_block_size",
               load_site(layer, p, std::nullopt));
  return (*layer.weight_block_size)[0];
}

void require_no_shard(const LinearBase& layer, const Parameter& p, const std::optional<ShardId>& shard) {
  FP8KIT_CHECK_ARG(!shard.has_value(), "{}: this layer is not fused and takes no shard id",
                   load_site(layer, p, shard));
}

void load_rows(const LinearBase& layer, Parameter& p, const Tensor& loaded, int64_t offset, int64_t size,
               int64_t src_offset, const std::optional<ShardId>& shard) {
  FP8KIT_CHECK(p.data.dim() >= 1 && offset >= 0 && offset + size <= p.data.size(0), ErrorCode::kInternal,
               "{}: rows [{}, {}) are outside the parameter {}", load_site(layer, p, shard), offset, offset + size,
               p.data.description());
  const Tensor src = narrow_loaded(layer, p, loaded, 0, src_offset, size, shard);
  load_into(layer, p, p.data.narrow(0, offset, size), src, shard);
}

void load_scale_into_slot(const LinearBase& layer, Parameter& p, const Tensor& loaded, int64_t slot,
                          const std::optional<ShardId>& shard) {
  const std::string site = load_site(layer, p, shard);
  FP8KIT_CHECK_ARG(loaded.defined(), "{}: the checkpoint tensor is undefined", site);
  Tensor value = loaded;
  if (value.dim() != 0) {
    FP8KIT_CHECK_ARG(value.size(0) == 1, "{}: a per-tensor scale must be 0-dim or of shape [1], got shape {}", site,
                     shape_to_string(value.shape()));
    value = value.select(0, 0);
  }
  FP8KIT_CHECK(p.data.dim() == 1 && slot < p.data.size(0), ErrorCode::kInternal,
               "{}: no slot {} in the per-tensor scale {}", site, slot, p.data.description());
  load_into(layer, p, p.data.select(0, slot), value, shard);
}

void load_column_parallel(const LinearBase& layer, Parameter& p, const Tensor& loaded,
                          const std::optional<ShardId>& shard) {
  const Tensor value = scalar_as_1d(loaded);
  if (!follows_output_dim(p.kind)) return assert_and_load(layer, p, value, shard);
  const int64_t rows = p.data.size(0);
  load_rows(layer, p, value, 0, rows, layer.parallel().tp_rank * rows, shard);
}

}  // namespace fp8kit::detail
