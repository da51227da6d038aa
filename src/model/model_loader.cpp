// load_model and place_tensor (include/fp8kit/model/model_loader.h): layers created from a
// ModelDescription with the checkpoint's quantization config, checkpoint tensors placed and
// loaded one at a time from the mapped shards, then the post-processing of every layer.
// Tested by tests/cpu/test_model_loader*.cpp (and on CUDA by tests/gpu/test_layers_cuda.cpp).
#include <algorithm>
#include <set>

#include "core/check.h"
#include "core/names.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/model/model_loader.h"
#include "fp8kit/platform.h"
#include "layers/parameter_load.h"

namespace fp8kit {
namespace {

const char* const kParameterNames[] = {"weight_scale_inv", "weight_scale", "input_scale", "weight", "bias"};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string last_component(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

std::string parent_of(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? std::string() : module.substr(0, dot);
}

bool has_linear(const ModelDescription& d, const std::string& prefix) {
  return std::any_of(d.linears.begin(), d.linears.end(), [&](const LinearSpec& l) { return l.prefix == prefix; });
}

// "{moe.prefix}.{e}.{proj}.{param}" -> the expert's placement; nullopt for other names.
std::optional<TensorPlacement> place_expert(const MoESpec& m, const std::string& name) {
  if (name.size() <= m.prefix.size() + 1 || name.compare(0, m.prefix.size(), m.prefix) != 0 || name[m.prefix.size()] != '.') {
    return std::nullopt;
  }
  const std::string rest = name.substr(m.prefix.size() + 1);  // "3.gate_proj.weight_scale"
  const size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos || rest.find_first_not_of("0123456789") != dot) return std::nullopt;
  if (dot > 9) return std::nullopt;  // not an expert id of any real model (and keeps stoll in range)
  const int64_t expert = std::stoll(rest.substr(0, dot));
  if (expert >= m.num_experts) return std::nullopt;
  const std::string tail = rest.substr(dot + 1);  // "gate_proj.weight_scale"
  const std::pair<const std::string*, const char*> shards[] = {{&m.gate_proj, "w1"}, {&m.down_proj, "w2"}, {&m.up_proj, "w3"}};
  for (const auto& [proj, shard] : shards) {
    if (tail.compare(0, proj->size() + 1, *proj + ".") != 0) continue;
    const std::string param = tail.substr(proj->size() + 1);
    for (const char* known : {"weight", "weight_scale", "weight_scale_inv", "input_scale"}) {
      if (param != known) continue;
      TensorPlacement p;
      p.target = TensorPlacement::Target::kMoE;
      p.module = m.prefix;
      p.parameter = (std::string(shard) == "w2" ? "w2_" : "w13_") + param;
      p.shard = std::string(shard);
      p.expert_id = expert;
      return p;
    }
  }
  return std::nullopt;
}

// Every local expert's shards must be loaded into the parameters the checkpoint fills: the
// weights always; scales only from an FP8 checkpoint (online quantization makes its own). A
// missing per-tensor scale would otherwise silently stay 1.0 (hazard H5). The message naming the
// first missing shard, or nullopt when the layer is complete.
std::optional<std::string> missing_shard(const FusedMoE& layer, const QuantizationConfig& config, const std::string& dir) {
  const auto* fp8 = dynamic_cast<const Fp8Config*>(&config);
  const bool serialized = fp8 != nullptr && fp8->is_checkpoint_fp8_serialized;
  const Tensor map = layer.expert_map().defined() ? layer.expert_map().to(Device::cpu()) : Tensor();
  for (const auto& [name, param] : layer.parameters()) {
    if (!ends_with(name, "_weight") && !serialized) continue;
    const bool w13 = name.rfind("w13_", 0) == 0;
    for (int64_t e = 0; e < layer.global_num_experts(); ++e) {
      if (map.defined() && map.data<int32_t>()[e] < 0) continue;
      for (const char* shard : {"w1", "w3", "w2"}) {
        if ((std::string(shard) == "w2") == w13) continue;
        if (param.loaded_shards.count(FusedMoE::loaded_shard_key(shard, e)) != 0) continue;
        return fmt::format("{}: no checkpoint tensor filled {}.{} ({}; shard {} of expert {})", shown_path(dir),
                           layer.prefix(), name, layer.quant_method()->name(), shard, e);
      }
    }
  }
  return std::nullopt;
}

std::unique_ptr<FusedMoE> make_moe(const MoESpec& s, const ModelDescription& d, const QuantizationConfig* config,
                                   const LoadOptions& options) {
  FusedMoEOptions o;
  o.num_experts = s.num_experts;
  o.top_k = s.top_k;
  o.hidden_size = s.hidden_size;
  o.intermediate_size = s.intermediate_size;
  o.params_dtype = d.dtype;
  o.renormalize = s.renormalize;
  o.use_grouped_topk = s.use_grouped_topk;
  o.num_expert_group = s.num_expert_group;
  o.topk_group = s.topk_group;
  o.scoring_func = s.scoring_func;
  o.quant_config = config;
  o.parallel = options.parallel;
  o.ep_size = options.ep_size;
  o.ep_rank = options.ep_rank;
  o.device = options.device;
  o.force_weight_only = options.overrides.force_weight_only;
  return std::make_unique<FusedMoE>(s.prefix, o);
}

bool has_attention(const ModelDescription& d, const std::string& prefix) {
  return std::any_of(d.attentions.begin(), d.attentions.end(), [&](const AttentionSpec& a) { return a.prefix == prefix; });
}

std::unique_ptr<LinearBase> make_linear(const LinearSpec& s, const LinearOptions& options) {
  LinearOptions o = options;
  o.bias = s.bias;
  switch (s.kind) {
    case LinearSpec::Kind::kReplicated:
      return std::make_unique<ReplicatedLinear>(s.prefix, s.input_size, s.output_size, o);
    case LinearSpec::Kind::kColumn:
      return std::make_unique<ColumnParallelLinear>(s.prefix, s.input_size, s.output_size, o);
    case LinearSpec::Kind::kMergedColumn:
      return std::make_unique<MergedColumnParallelLinear>(s.prefix, s.input_size, s.output_sizes, o);
    case LinearSpec::Kind::kQKV:
      return std::make_unique<QKVParallelLinear>(s.prefix, s.input_size, s.head_size, s.num_heads, s.num_kv_heads, o);
    case LinearSpec::Kind::kRow:
      return std::make_unique<RowParallelLinear>(s.prefix, s.input_size, s.output_size, o);
  }
  fail(ErrorCode::kInternal, "unknown linear kind for {}", s.prefix);
}

// The shards a parameter of `layer` must have received: every stacked shard, or the fused tensor.
std::vector<std::set<std::string>> complete_shard_sets(const LinearBase& layer) {
  if (dynamic_cast<const QKVParallelLinear*>(&layer) != nullptr) return {{"q", "k", "v"}, {"all"}};
  if (const auto* merged = dynamic_cast<const MergedColumnParallelLinear*>(&layer)) {
    std::set<std::string> shards;
    for (size_t i = 0; i < merged->output_sizes().size(); ++i) shards.insert(std::to_string(i));
    return {shards, {"all"}};
  }
  return {{"all"}};
}

std::optional<std::string> missing_shard(const LinearBase& layer, const std::string& dir) {
  const auto sets = complete_shard_sets(layer);
  for (const auto& [name, param] : layer.parameters()) {
    const std::set<std::string>& loaded = param.loaded_shards;  // clang 14 cannot capture a structured binding
    const bool complete = std::any_of(sets.begin(), sets.end(), [&](const std::set<std::string>& need) {
      return std::includes(loaded.begin(), loaded.end(), need.begin(), need.end());
    });
    if (complete) continue;
    std::string got;
    for (const std::string& s : param.loaded_shards) got += (got.empty() ? "" : ", ") + s;
    return fmt::format("{}: no checkpoint tensor filled {}.{} ({}; shards loaded: {})", shown_path(dir),
                       layer.prefix(), name, layer.quant_method() ? layer.quant_method()->name() : "no method",
                       got.empty() ? "none" : got);
  }
  return std::nullopt;
}

// The dtype a plain tensor keeps: the model's for floating tensors, except a MoE router bias
// (DeepSeek's e_score_correction_bias, f32 in vLLM whatever the model dtype).
DType kept_dtype(const ModelDescription& d, const std::string& name, DType stored) {
  if (stored != DType::kBF16 && stored != DType::kF16 && stored != DType::kF32) return stored;
  for (const MoESpec& m : d.moes) {
    if (m.e_score_correction_bias == name) return stored;
  }
  return d.dtype;
}

Tensor plain_tensor(const Tensor& t, DType dtype, Device device, const std::string& name) {
  if (t.dtype() != dtype) return detail::cast_for_load(t, dtype, name).to(device);
  return device.is_cuda() ? t.to(device) : t.clone();
}

}  // namespace

LinearBase& LoadedModel::linear(const std::string& prefix) const {
  const auto it = linears.find(prefix);
  FP8KIT_CHECK_ARG(it != linears.end(), "the model has no linear layer {}", prefix);
  return *it->second;
}

FusedMoE& LoadedModel::moe(const std::string& prefix) const {
  const auto it = moes.find(prefix);
  FP8KIT_CHECK_ARG(it != moes.end(), "the model has no MoE layer {}", prefix);
  return *it->second;
}

Attention& LoadedModel::attention(const std::string& prefix) const {
  const auto it = attentions.find(prefix);
  FP8KIT_CHECK_ARG(it != attentions.end(), "the model has no attention layer {}", prefix);
  return *it->second;
}

std::optional<TensorPlacement> place_tensor(const ModelDescription& d, const QuantizationConfig& config,
                                            const std::string& name) {
  TensorPlacement p;
  // KV-cache (and q / prob) scales, in every naming scheme.
  std::optional<std::string> kv = config.get_cache_scale(name);
  if (!kv) kv = remap_kv_scale_name(name);
  if (kv) {
    const std::string module = parent_of(*kv);
    if (!has_attention(d, module)) return std::nullopt;
    p.target = TensorPlacement::Target::kAttention;
    p.module = module;
    p.parameter = last_component(*kv);
    return p;
  }
  if (std::find(d.plain_tensors.begin(), d.plain_tensors.end(), name) != d.plain_tensors.end()) {
    p.target = TensorPlacement::Target::kPlain;
    p.module = name;
    return p;
  }
  for (const std::string& suffix : d.ignored_suffixes) {
    if (ends_with(name, suffix)) return p;  // kSkipped
  }
  for (const std::string& prefix : d.ignored_prefixes) {
    if (name.compare(0, prefix.size(), prefix) == 0) return p;  // kSkipped
  }
  for (const MoESpec& m : d.moes) {
    if (name.compare(0, m.prefix.size(), m.prefix) == 0) return place_expert(m, name);
  }
  for (const char* param : kParameterNames) {
    const std::string suffix = std::string(".") + param;
    if (!ends_with(name, suffix)) continue;
    std::string module = name.substr(0, name.size() - suffix.size());
    std::optional<ShardId> shard;
    for (const StackedParam& s : d.stacked_params) {
      if (last_component(module) == s.weight_name) {
        module = parent_of(module) + "." + s.param_name;
        shard = s.shard_id;
        break;
      }
    }
    if (!has_linear(d, module)) return std::nullopt;
    p.target = TensorPlacement::Target::kLinear;
    p.module = module;
    p.parameter = param;
    p.shard = shard;
    return p;
  }
  return std::nullopt;
}

LoadedModel load_model(const std::string& dir, const LoadOptions& options) {
  const Checkpoint checkpoint = Checkpoint::open(dir);
  ModelDescription description;
  try {
    description = describe_hf_model(checkpoint.config());
  } catch (const Error& e) {
    throw Error(e.code(), shown_path(dir) + ": " + e.what());  // "<dir>: config.json: `key` must be ..."
  }
  return load_model(dir, description, options);
}

LoadedModel load_model(const std::string& dir, const ModelDescription& checkpoint_description,
                       const LoadOptions& options) {
  const Checkpoint checkpoint = Checkpoint::open(dir);
  ModelDescription description = checkpoint_description;
  if (options.dtype) description.dtype = *options.dtype;
  LoadedModel model;
  // Placement reads the checkpoint's config (KV-scale names) whether or not the layers quantize.
  std::unique_ptr<QuantizationConfig> placement;
  try {
    placement = get_quant_config(checkpoint.config());
  } catch (const Error& e) {
    throw Error(e.code(), shown_path(dir) + "/config.json: " + e.what());
  }
  // configure_quant_config: the model class's packed modules (used by ignored_layers matching).
  placement->packed_modules_mapping = description.packed_modules_mapping;
  if (options.quantize) {
    const int capability = options.device.is_cuda() ? get_device_capability(options.device.index).as_int() : 90;
    const bool f32_allowed = options.allow_f32_quantized && description.dtype == DType::kF32;
    verify_quantization_support(*placement, capability, f32_allowed ? DType::kBF16 : description.dtype);
  } else {
    const auto* fp8 = dynamic_cast<const Fp8Config*>(placement.get());
    FP8KIT_CHECK_ARG(fp8 != nullptr && !fp8->is_checkpoint_fp8_serialized,
                     "{}: the checkpoint is quantized ({}): it cannot be loaded unquantized", shown_path(dir), placement->get_name());
  }
  const QuantizationConfig* layer_config = options.quantize ? placement.get() : nullptr;

  LinearOptions linear_options;
  linear_options.params_dtype = description.dtype;
  linear_options.quant_config = layer_config;
  linear_options.parallel = options.parallel;
  linear_options.device = options.device;
  linear_options.force_weight_only = options.overrides.force_weight_only;
  for (const LinearSpec& spec : description.linears) model.linears.emplace(spec.prefix, make_linear(spec, linear_options));
  AttentionOptions attention_options;
  attention_options.kv_cache_dtype = options.kv_cache_dtype;
  attention_options.calculate_kv_scales = options.calculate_kv_scales;
  attention_options.quant_config = layer_config;
  attention_options.device = options.device;
  attention_options.q_range = options.overrides.q_scale_constant;
  attention_options.k_range = options.overrides.k_scale_constant;
  attention_options.v_range = options.overrides.v_scale_constant;
  for (const MoESpec& spec : description.moes) {
    model.moes.emplace(spec.prefix, make_moe(spec, description, layer_config, options));
  }
  for (const AttentionSpec& spec : description.attentions) {
    model.attentions.emplace(spec.prefix, std::make_unique<Attention>(spec.prefix, spec.num_heads, spec.head_size,
                                                                        spec.num_kv_heads, attention_options));
  }

  // A layer is post-processed as soon as its last tensor is in, so that a 16-bit checkpoint
  // quantized online never holds more than one layer in 16 bits (results do not depend on the
  // order: each layer's processing reads only its own parameters).
  const ForwardContext ctx(options.device, options.overrides);
  std::set<std::string> processed;
  const auto refuse_processed = [&](const std::string& module) {
    FP8KIT_CHECK_ARG(processed.count(module) == 0, "layer {} already received all its tensors", module);
  };
  for (const std::string& name : checkpoint.tensor_names()) {
    const std::optional<TensorPlacement> place = place_tensor(description, *placement, name);
    FP8KIT_CHECK_ARG(place.has_value(), "{}: unexpected tensor {} ({}{}): no layer of {} takes it", shown_path(dir),
                     quote_name(name),
                     dtype_safetensors_name(checkpoint.info(name).dtype), shape_to_string(checkpoint.info(name).shape),
                     description.architecture);
    checkpoint.prefetch(name);
    const Tensor t = checkpoint.tensor(name);
    try {
      switch (place->target) {
        case TensorPlacement::Target::kLinear: {
          LinearBase& layer = *model.linears.at(place->module);
          FP8KIT_CHECK_ARG(layer.find_parameter(place->parameter) != nullptr,
                           "layer {} ({}) has no parameter {}", layer.prefix(),
                           layer.quant_method() ? layer.quant_method()->name() : "no method", place->parameter);
          refuse_processed(place->module);
          layer.load_weight(place->parameter, t, place->shard);
          if (!missing_shard(layer, dir)) {
            layer.process_weights_after_loading(ctx);
            processed.insert(place->module);
          }
          break;
        }
        case TensorPlacement::Target::kMoE: {
          FusedMoE& layer = *model.moes.at(place->module);
          FP8KIT_CHECK_ARG(layer.find_parameter(place->parameter) != nullptr, "layer {} ({}) has no parameter {}",
                           layer.prefix(), layer.quant_method()->name(), place->parameter);
          const Tensor& map = layer.expert_map();  // another EP rank's expert: skipped whenever it comes
          if (map.defined() && map.to(Device::cpu()).data<int32_t>()[place->expert_id] < 0) break;
          refuse_processed(place->module);
          // false: an expert of another EP rank.
          layer.weight_loader(place->parameter, t, place->parameter, std::get<std::string>(*place->shard),
                              place->expert_id);
          if (!missing_shard(layer, *placement, dir)) {
            layer.process_weights_after_loading(ctx);
            processed.insert(place->module);
          }
          break;
        }
        case TensorPlacement::Target::kAttention: {
          Attention& layer = *model.attentions.at(place->module);
          if (layer.find_parameter(place->parameter) != nullptr) layer.load_weight(place->parameter, t, std::nullopt);
          break;  // KV scales without a KV-cache method (kv_cache_dtype auto) are not used
        }
        case TensorPlacement::Target::kPlain:
          // In the model dtype, as vLLM's parameters are (DeepSeek's f32 router bias excepted). A CPU
          // load copies out of the mapped shard, which is released below.
          model.plain[name] = plain_tensor(t, kept_dtype(description, name, t.dtype()), options.device, name);
          break;
        case TensorPlacement::Target::kSkipped:
          break;
      }
    } catch (const Error& e) {
      throw Error(e.code(), shown_path(dir) + ": tensor " + quote_name(name) + ": " + e.what());
    }
    checkpoint.release(name);
  }
  for (const std::string& name : description.plain_tensors) {
    FP8KIT_CHECK_ARG(model.plain.count(name), "{}: the checkpoint has no tensor {}", shown_path(dir), quote_name(name));
  }
  for (auto& [prefix, layer] : model.linears) {
    if (processed.count(prefix) == 0) fail(ErrorCode::kInvalidArgument, "{}", *missing_shard(*layer, dir));
  }
  for (auto& [prefix, layer] : model.moes) {
    if (processed.count(prefix) == 0) fail(ErrorCode::kInvalidArgument, "{}", *missing_shard(*layer, *placement, dir));
  }
  for (const MoESpec& spec : description.moes) {
    // DeepSeek-V3's router bias is a parameter of the gate that the experts' routing reads.
    if (!spec.e_score_correction_bias.empty()) {
      model.moes.at(spec.prefix)->e_score_correction_bias = model.plain.at(spec.e_score_correction_bias);
    }
  }
  for (auto& [prefix, layer] : model.attentions) layer->process_weights_after_loading();
  if (options.quantize) model.quant_config = std::move(placement);
  return model;
}

}  // namespace fp8kit
