#include "convert/quantize_plan.h"

#include <algorithm>
#include <optional>
#include <set>

#include "convert/module_names.h"
#include "core/check.h"
#include "core/names.h"
#include "core/checked_math.h"
#include "io/regex.h"

namespace fp8kit::convert {
namespace {

struct IgnorePattern {
  std::string text;
  std::optional<io::Regex> regex;  // for "re:" patterns, matched as Python's re.match
  bool used = false;
};

std::vector<IgnorePattern> parse_ignore(const std::vector<std::string>& patterns) {
  std::vector<IgnorePattern> out;
  for (const std::string& p : patterns) {
    IgnorePattern ip;
    ip.text = p;
    if (p.rfind("re:", 0) == 0) ip.regex.emplace(std::string_view(p).substr(3), "--ignore pattern");
    out.push_back(std::move(ip));
  }
  return out;
}

bool ignored_by_user(const std::string& module, std::vector<IgnorePattern>& patterns) {
  bool hit = false;
  for (IgnorePattern& p : patterns) {
    const bool match =
        p.regex ? p.regex->matches_at_start(module) : (p.text == module || p.text == module + ".weight");
    if (match) p.used = true;
    hit = hit || match;
  }
  return hit;
}

nlohmann::ordered_json compressed_tensors_config(const std::vector<std::string>& ignored) {
  using json = nlohmann::ordered_json;
  const json weights = {{"num_bits", 8},          {"type", "float"},         {"symmetric", true},
                        {"strategy", "channel"},  {"dynamic", false},        {"group_size", nullptr},
                        {"block_structure", nullptr}, {"actorder", nullptr}, {"observer", "minmax"},
                        {"observer_kwargs", json::object()}};
  const json inputs = {{"num_bits", 8},         {"type", "float"},        {"symmetric", true},
                       {"strategy", "token"},   {"dynamic", true},        {"group_size", nullptr},
                       {"block_structure", nullptr}, {"actorder", nullptr}, {"observer", nullptr},
                       {"observer_kwargs", json::object()}};
  json group = {{"targets", json::array({"Linear"})},
                {"weights", weights},
                {"input_activations", inputs},
                {"output_activations", nullptr}};
  return json{{"config_groups", {{"group_0", group}}},
              {"format", "float-quantized"},
              {"global_compression_ratio", nullptr},
              {"ignore", ignored},
              {"kv_cache_scheme", nullptr},
              {"quant_method", "compressed-tensors"},
              {"quantization_status", "compressed"}};
}

nlohmann::ordered_json fp8_config(const QuantizeOptions& options, const std::vector<std::string>& ignored) {
  nlohmann::ordered_json c = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}};
  if (options.scheme == QuantScheme::kBlock) {
    c["fmt"] = "e4m3";
    c["weight_block_size"] = {options.block_n, options.block_k};
    if (options.ue8m0_scales) c["scale_fmt"] = "ue8m0";
  }
  c["ignored_layers"] = ignored;
  return c;
}

}  // namespace

QuantizePlan plan_quantization(const Checkpoint& checkpoint, const QuantizeOptions& options) {
  const bool block = options.scheme == QuantScheme::kBlock;
  if (block) {
    constexpr int64_t kMaxBlock = int64_t(1) << 20;  // see QuantizeOptions
    FP8KIT_CHECK_ARG(options.block_n > 0 && options.block_k > 0 && options.block_n <= kMaxBlock &&
                         options.block_k <= kMaxBlock,
                     "--block {},{}: block sizes must be from 1 to {}", options.block_n, options.block_k, kMaxBlock);
  }
  FP8KIT_CHECK_ARG(!(options.ue8m0_scales && !block), "ue8m0 scales need the block scheme");
  QuantizePlan plan;
  std::vector<IgnorePattern> patterns = parse_ignore(options.ignore);
  std::set<std::string> ignored;
  // Fused group -> (module, quantized?) of its shards, to refuse mixed precision.
  std::map<std::string, std::vector<std::pair<std::string, bool>>> fused_members;

  for (const std::string& name : checkpoint.tensor_names()) {
    const TensorInfo& info = checkpoint.info(name);
    FP8KIT_CHECK_ARG(!is_fp8(info.dtype) && info.dtype != DType::kUE8M0,
                     "{}: tensor {} is already {}: the input must be a 16- or 32-bit checkpoint",
                     shown_path(checkpoint.dir()), quote_name(name), dtype_safetensors_name(info.dtype));
    const std::optional<std::string> module = strip_suffix(name, ".weight");
    if (!module || info.shape.size() != 2 || !is_floating(info.dtype) || info.dtype == DType::kF64) continue;
    const ModuleKind kind = module_kind(*module);
    const bool user_ignored = ignored_by_user(*module, patterns);
    bool quantize = kind == ModuleKind::kLinear || (kind == ModuleKind::kLmHead && options.quantize_lm_head);
    if (kind == ModuleKind::kRouter || (kind == ModuleKind::kLmHead && !quantize)) ignored.insert(*module);
    if (quantize && user_ignored) {
      FP8KIT_CHECK_ARG(!is_expert_module(*module),
                       "cannot leave {} unquantized: vLLM quantizes every expert of a fused MoE layer", *module);
      ignored.insert(*module);
      quantize = false;
    }
    const std::optional<FusedGroup> group = fused_group_of(*module);
    if (group && kind == ModuleKind::kLinear) fused_members[group->key].push_back({*module, quantize});
    if (!quantize) continue;

    const int64_t n = info.shape[0], k = info.shape[1];
    PlannedWeight w;
    w.module = *module;
    if (block) {
      FP8KIT_CHECK_ARG(k % options.block_k == 0,
                       "{} has {} input features, not a multiple of block_k {}: vLLM quantizes its activations in "
                       "groups of block_k. Use another --block, --scheme per-tensor, or --ignore {}",
                       name, k, options.block_k, *module);
      if (group) {
        FP8KIT_CHECK_ARG(n % options.block_n == 0,
                         "{} has {} output rows, not a multiple of block_n {}, and vLLM stacks it into {}: vLLM "
                         "cannot load that. Use another --block, --scheme per-tensor, or --ignore the whole {}",
                         name, n, options.block_n, group->fused, group->fused);
      }
      w.scale_name = *module + ".weight_scale_inv";
      w.scale_shape = {ceil_div(n, options.block_n), ceil_div(k, options.block_k)};
    } else if (options.scheme == QuantScheme::kPerChannel) {
      w.scale_name = *module + ".weight_scale";
      w.scale_shape = {n, 1};
    } else {
      w.scale_name = *module + ".weight_scale";
      w.scale_shape = {};
      w.shared_scale_group = group ? group->key : name;
      plan.scale_groups[w.shared_scale_group].push_back(name);
    }
    FP8KIT_CHECK_ARG(!checkpoint.contains(w.scale_name), "{}: the input already has a tensor named {}",
                     shown_path(checkpoint.dir()), quote_name(w.scale_name));
    plan.weights.emplace(name, std::move(w));
  }

  for (const auto& [key, members] : fused_members) {
    for (const auto& member : members) {
      FP8KIT_CHECK_ARG(member.second == members.front().second,
                       "{} and {} are stacked into one fused module by vLLM but only one of them is ignored: ignore "
                       "all of its shards or none",
                       members.front().first, member.first);
    }
  }
  for (const IgnorePattern& p : patterns) {
    if (!p.used) plan.notes.push_back("--ignore " + p.text + " matched no linear layer");
  }
  plan.ignored_layers.assign(ignored.begin(), ignored.end());
  plan.quantization_config = options.scheme == QuantScheme::kPerChannel
                                 ? compressed_tensors_config(plan.ignored_layers)
                                 : fp8_config(options, plan.ignored_layers);

  // Output tensors shard by shard: a quantized weight and its scale stay in the weight's shard.
  for (const std::string& name : checkpoint.tensor_names()) {
    const TensorInfo& info = checkpoint.info(name);
    std::vector<TensorSpec>& specs = plan.shard_outputs[checkpoint.shard_of(name)];
    const auto it = plan.weights.find(name);
    if (it == plan.weights.end()) {
      specs.push_back({name, info.dtype, info.shape});
      continue;
    }
    specs.push_back({name, DType::kE4M3FN, info.shape});
    specs.push_back({it->second.scale_name, DType::kF32, it->second.scale_shape});
  }
  return plan;
}

}  // namespace fp8kit::convert
