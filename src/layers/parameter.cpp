// Names of parameter kinds and shard ids (include/fp8kit/layers/parameter.h), used in the
// messages of the weight loaders and in Parameter::loaded_shards.
#include "fp8kit/layers/parameter.h"

namespace fp8kit {

const char* parameter_kind_name(ParameterKind kind) {
  switch (kind) {
    case ParameterKind::kModelWeight: return "ModelWeightParameter";
    case ParameterKind::kBlockScale: return "BlockQuantScaleParameter";
    case ParameterKind::kChannelScale: return "ChannelQuantScaleParameter";
    case ParameterKind::kPerTensorScale: return "PerTensorScaleParameter";
    case ParameterKind::kBias: return "bias";
    case ParameterKind::kPlain: return "plain";
  }
  return "unknown";
}

std::string shard_id_string(const std::optional<ShardId>& shard) {
  if (!shard) return "all";
  if (const auto* index = std::get_if<int64_t>(&*shard)) return std::to_string(*index);
  return std::get<std::string>(*shard);
}

}  // namespace fp8kit
