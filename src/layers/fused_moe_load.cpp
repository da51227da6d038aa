// FusedMoE::weight_loader (include/fp8kit/layers/fused_moe.h; spec 1.9): vLLM's MoE weight loader
// with its cases in its order: expert map, shard id, input scales, weight scales by scale kind,
// weights; _load_w13 / _load_w2 narrow the checkpoint tensor to this TP rank's slice of the
// intermediate dimension. Tested by tests/cpu/test_fused_moe.cpp.
#include <string>

#include "core/check.h"
#include "fp8kit/layers/fused_moe.h"
#include "layers/parameter_load.h"

namespace fp8kit {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

struct ExpertLoad {
  const FusedMoE& layer;
  Parameter& p;
  std::optional<ShardId> key;  // "w1 of expert 3": error messages and Parameter::loaded_shards
  std::string_view shard_id;
  int64_t tp_rank, tp_size;

  std::string site() const { return detail::load_site(layer, p, key); }

  // The checkpoint holds every TP rank's slice along `dim`: a tensor of another size is a wrong
  // checkpoint, which narrowing would silently truncate.
  void require_full(const Tensor& loaded, int64_t dim, int64_t per_rank) const {
    FP8KIT_CHECK_ARG(dim < loaded.dim() && loaded.size(dim) == per_rank * tp_size,
                     "{}: expected a checkpoint tensor with {} entries along dimension {} ({} per TP rank x {}), got {}",
                     site(), per_rank * tp_size, dim, per_rank, tp_size, shape_to_string(loaded.shape()));
  }

  // _load_w13: w1 into the first half of dimension `dim`, w3 into the second; the checkpoint
  // narrowed to this rank's slice (MergedColumnParallel).
  void load_w13(const Tensor& expert_data, int64_t dim, const Tensor& loaded) {
    const int64_t shard_size = expert_data.size(dim) / 2;
    require_full(loaded, dim, shard_size);
    const Tensor src = detail::narrow_loaded(layer, p, loaded, dim, shard_size * tp_rank, shard_size, key);
    const Tensor dst = expert_data.narrow(dim, shard_id == "w1" ? 0 : shard_size, shard_size);
    detail::load_into(layer, p, dst, src, key);
  }

  // _load_w2: the checkpoint narrowed along the input dimension (RowParallel).
  void load_w2(const Tensor& expert_data, int64_t dim, const Tensor& loaded) {
    const int64_t shard_size = expert_data.size(dim);
    require_full(loaded, dim, shard_size);
    const Tensor src = detail::narrow_loaded(layer, p, loaded, dim, shard_size * tp_rank, shard_size, key);
    detail::load_into(layer, p, expert_data, src, key);
  }

  void load_weight_or_block(const Tensor& expert_data, int64_t dim, const Tensor& loaded) {
    if (shard_id == "w2") {
      load_w2(expert_data, dim, loaded);
    } else {
      load_w13(expert_data, dim, loaded);
    }
  }

  // One value into p.data[index...] (a slot of one element).
  void load_value(const Tensor& slot, const Tensor& loaded) {
    FP8KIT_CHECK_ARG(loaded.numel() == 1, "{}: expected a single value, got a checkpoint tensor of shape {}", site(),
                     shape_to_string(loaded.shape()));
    detail::load_into(layer, p, slot, loaded.contiguous().view(slot.shape()), key);
  }
};

}  // namespace

bool FusedMoE::weight_loader(std::string_view param_name, const Tensor& loaded, std::string_view weight_name,
                             std::string_view shard_id, int64_t expert_id) {
  Parameter& p = parameter(param_name);
  const std::string layer_name = prefix().empty() ? std::string("FusedMoE") : prefix();
  FP8KIT_CHECK_ARG(expert_id >= 0 && expert_id < global_num_experts_, "{}.{}: expert id {} is not one of the {} experts",
                   layer_name, p.name, expert_id, global_num_experts_);
  // The global (physical) expert id to this rank's index; -1: another rank's expert, skipped.
  int64_t local = expert_id;
  if (expert_map_.defined()) {
    local = expert_map_.to(Device::cpu()).data<int32_t>()[expert_id];
    if (local == -1) return false;
  }
  if (shard_id != "w1" && shard_id != "w2" && shard_id != "w3") {
    fail(ErrorCode::kInvalidArgument, "shard_id must be ['w1','w2','w3'] but got {}.", shard_id);
  }
  FP8KIT_CHECK_ARG(loaded.defined(), "{}.{}: the checkpoint tensor is undefined", layer_name, p.name);
  FP8KIT_CHECK_ARG(p.data.dim() >= 1 && p.data.size(0) == local_num_experts_,
                   "{}.{}: not a per-expert parameter (shape {})", layer_name, p.name, shape_to_string(p.data.shape()));

  ExpertLoad load{*this, p, ShardId(loaded_shard_key(shard_id, expert_id)), shard_id, parallel().tp_rank,
                  parallel().tp_size};
  // SHARD_ID_TO_SHARDED_DIM: w1, w3 along the output rows, w2 along the input columns; a 3-D
  // tensor holds every expert (full_load) and shifts the dimension by one.
  int64_t shard_dim = shard_id == "w2" ? 1 : 0;
  const bool full_load = loaded.dim() == 3;
  if (full_load) shard_dim += 1;
  const Tensor expert_data = full_load ? p.data : p.data.select(0, local);

  if (contains(weight_name, "input_scale")) {
    // w1 and w3 write the same slot; the last one loaded wins (only compressed-tensors checks them).
    load.load_value(p.data.narrow(0, local, 1), loaded);
    return true;
  }
  if (contains(weight_name, "scale") || contains(weight_name, "zero") || contains(weight_name, "offset")) {
    switch (p.kind) {
      case ParameterKind::kChannelScale:
        if (shard_id == "w2") {
          detail::load_into(*this, p, expert_data, loaded, load.key);
        } else {
          load.load_w13(expert_data, shard_dim, loaded);
        }
        return true;
      case ParameterKind::kBlockScale:
        load.load_weight_or_block(expert_data, shard_dim, loaded);
        return true;
      case ParameterKind::kPerTensorScale:
        // w1 and w3 keep their own slot: the w13 requantization after loading needs both.
        if (shard_id == "w2") {
          load.load_value(p.data.narrow(0, local, 1), loaded);
        } else {
          load.load_value(p.data.select(0, local).narrow(0, shard_id == "w1" ? 0 : 1, 1), loaded);
        }
        return true;
      default:
        fail(ErrorCode::kInvalidArgument, "quant method must be one of ['tensor', 'channel', 'group', 'block']");
    }
  }
  if (contains(weight_name, "weight")) {
    load.load_weight_or_block(expert_data, shard_dim, loaded);
    return true;
  }
  return false;
}

void FusedMoE::load_weight(std::string_view name, const Tensor&, const std::optional<ShardId>&) {
  fail(ErrorCode::kInvalidArgument,
       "{}.{}: a MoE parameter loads through weight_loader(param, loaded, weight_name, shard_id, expert_id)",
       prefix().empty() ? std::string("FusedMoE") : prefix(), name);
}

}  // namespace fp8kit
