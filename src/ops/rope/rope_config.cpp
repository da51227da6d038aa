// RopeConfig from config.json (parse_rope_config) and its checks (validate_rope_config), both in
// include/fp8kit/ops/rope.h. Field names follow Hugging Face's configs (rope_scaling, or
// transformers v5's rope_parameters); every bad value is an error naming the field. Tested by
// tests/cpu/test_rope_config.cpp.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "core/check.h"
#include "fp8kit/ops/rope.h"

namespace fp8kit::ops {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxDepth = 64;  // config.json nests a few levels; deeper input is refused early

// Reads config.json fields with messages naming them; `scope` is the dict's name ("" for the
// top level, "rope_scaling.").
class Fields {
 public:
  Fields(const json& object, std::string scope) : o_(object), scope_(std::move(scope)) {}

  bool has(const char* key) const { return o_.contains(key) && !o_[key].is_null(); }
  std::string name(const char* key) const { return scope_ + key; }

  std::optional<double> number(const char* key) const {
    if (!has(key)) return std::nullopt;
    FP8KIT_CHECK_ARG(o_[key].is_number(), "config.json: `{}` must be a number, got {}", name(key), o_[key].dump());
    return o_[key].get<double>();
  }
  double positive(const char* key, double fallback) const {
    const std::optional<double> v = number(key);
    FP8KIT_CHECK_ARG(!v || (std::isfinite(*v) && *v > 0), "config.json: `{}` must be a positive number, got {}",
                     name(key), o_[key].dump());
    return v.value_or(fallback);
  }
  std::optional<int64_t> integer(const char* key) const {
    if (!has(key)) return std::nullopt;
    FP8KIT_CHECK_ARG(o_[key].is_number_integer() && o_[key].get<int64_t>() > 0,
                     "config.json: `{}` must be a positive integer, got {}", name(key), o_[key].dump());
    return o_[key].get<int64_t>();
  }
  std::optional<std::string> string(const char* key) const {
    if (!has(key)) return std::nullopt;
    FP8KIT_CHECK_ARG(o_[key].is_string(), "config.json: `{}` must be a string, got {}", name(key), o_[key].dump());
    return o_[key].get<std::string>();
  }
  std::optional<bool> boolean(const char* key) const {
    if (!has(key)) return std::nullopt;
    FP8KIT_CHECK_ARG(o_[key].is_boolean(), "config.json: `{}` must be true or false, got {}", name(key),
                     o_[key].dump());
    return o_[key].get<bool>();
  }

 private:
  const json& o_;
  std::string scope_;
};

json parse_text(std::string_view text) {
  // The callback stops nesting deeper than kMaxDepth before nlohmann builds it.
  const json::parser_callback_t depth_guard = [](int depth, json::parse_event_t, json&) {
    FP8KIT_CHECK_ARG(size_t(depth) <= kMaxDepth, "config.json: nested deeper than {} levels", kMaxDepth);
    return true;
  };
  try {
    json config = json::parse(text.begin(), text.end(), depth_guard);
    FP8KIT_CHECK_ARG(config.is_object(), "config.json: expected a JSON object, got {}", config.type_name());
    return config;
  } catch (const json::exception& e) {
    fail(ErrorCode::kInvalidArgument, "config.json: not valid JSON: {}", e.what());
  }
}

RopeType parse_type(const std::string& type, const std::string& field) {
  if (type == "default") return RopeType::kDefault;
  if (type == "linear") return RopeType::kLinear;
  if (type == "dynamic") return RopeType::kDynamic;
  if (type == "llama3") return RopeType::kLlama3;
  if (type == "yarn") return RopeType::kYarn;
  fail(ErrorCode::kInvalidArgument,
       "config.json: {} `{}` is not supported (supported: default, linear, dynamic, llama3, "
       "yarn)",
       field, type);
}

}  // namespace

const char* rope_type_name(RopeType type) {
  switch (type) {
    case RopeType::kDefault: return "default";
    case RopeType::kLinear: return "linear";
    case RopeType::kDynamic: return "dynamic";
    case RopeType::kLlama3: return "llama3";
    case RopeType::kYarn: return "yarn";
  }
  return "?";
}

RopeConfig parse_rope_config(std::string_view config_json) {
  const json config = parse_text(config_json);
  const Fields top(config, "");
  RopeConfig c;

  if (const auto head_dim = top.integer("head_dim")) {
    c.head_dim = *head_dim;
  } else {
    const auto hidden = top.integer("hidden_size"), heads = top.integer("num_attention_heads");
    FP8KIT_CHECK_ARG(hidden && heads, "config.json: needs `head_dim`, or `hidden_size` and `num_attention_heads`");
    FP8KIT_CHECK_ARG(*hidden % *heads == 0,
                     "config.json: `hidden_size` {} is not a multiple of `num_attention_heads` {}", *hidden, *heads);
    c.head_dim = *hidden / *heads;
  }
  c.max_position_embeddings = top.integer("max_position_embeddings").value_or(0);

  // The scaling dict: transformers v5's rope_parameters, else rope_scaling (null or absent:
  // default RoPE).
  const char* dict_name = config.contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const json empty = json::object();
  const json& dict_json = top.has(dict_name) ? config[dict_name] : empty;
  FP8KIT_CHECK_ARG(dict_json.is_object(), "config.json: `{}` must be an object or null, got {}", dict_name,
                   dict_json.dump());
  const Fields dict(dict_json, std::string(dict_name) + ".");

  c.theta = dict.has("rope_theta") ? dict.positive("rope_theta", 10000.0) : top.positive("rope_theta", 10000.0);
  const Fields& prf_scope = dict.has("partial_rotary_factor") ? dict : top;
  const std::optional<double> prf = prf_scope.number("partial_rotary_factor");
  FP8KIT_CHECK_ARG(!prf || (*prf > 0 && *prf <= 1), "config.json: `{}` must be in (0, 1], got {}",
                   prf_scope.name("partial_rotary_factor"), *prf);
  if (const auto rotary_dim = top.integer("rotary_dim")) {
    FP8KIT_CHECK_ARG(*rotary_dim % 2 == 0 && *rotary_dim <= c.head_dim,
                     "config.json: `rotary_dim` must be even and at most head_dim {}, got {}", c.head_dim, *rotary_dim);
    c.rotary_dim = *rotary_dim;
  } else {
    c.rotary_dim = int64_t(double(c.head_dim) * prf.value_or(1.0));  // HF and vLLM: int(head_dim * factor)
    FP8KIT_CHECK_ARG(c.rotary_dim >= 2 && c.rotary_dim % 2 == 0,
                     "config.json: `{}` = {} gives rotary_dim {} (head_dim {}), which must be even and at least 2",
                     prf_scope.name("partial_rotary_factor"), prf.value_or(1.0), c.rotary_dim, c.head_dim);
  }

  const std::string type_field = dict.has("rope_type") ? dict.name("rope_type") : dict.name("type");
  const std::string type = dict.string("rope_type").value_or(dict.string("type").value_or("default"));
  c.type = parse_type(type, type_field);
  if (c.type == RopeType::kDefault) return c;

  const std::optional<double> factor = dict.number("factor");
  FP8KIT_CHECK_ARG(factor && std::isfinite(*factor) && *factor >= 1.0,
                   "config.json: `{}` must be a number >= 1, got {}", dict.name("factor"),
                   factor ? dict_json["factor"].dump() : "nothing");
  c.factor = *factor;
  if (c.type == RopeType::kDynamic) {
    FP8KIT_CHECK_ARG(c.max_position_embeddings > 0, "config.json: dynamic RoPE needs `max_position_embeddings`");
    FP8KIT_CHECK_ARG(c.rotary_dim > 2, "config.json: dynamic RoPE needs a rotary_dim above 2, got {}", c.rotary_dim);
  } else if (c.type == RopeType::kLlama3) {
    const auto orig = dict.integer("original_max_position_embeddings");
    FP8KIT_CHECK_ARG(orig.has_value(), "config.json: llama3 RoPE needs `{}`",
                     dict.name("original_max_position_embeddings"));
    c.original_max_position_embeddings = *orig;
    FP8KIT_CHECK_ARG(dict.has("low_freq_factor") && dict.has("high_freq_factor"),
                     "config.json: llama3 RoPE needs `{}` and `{}`", dict.name("low_freq_factor"),
                     dict.name("high_freq_factor"));
    c.low_freq_factor = dict.positive("low_freq_factor", 1.0);
    c.high_freq_factor = dict.positive("high_freq_factor", 4.0);
    FP8KIT_CHECK_ARG(c.high_freq_factor > c.low_freq_factor, "config.json: `{}` {} must be greater than `{}` {}",
                     dict.name("high_freq_factor"), c.high_freq_factor, dict.name("low_freq_factor"),
                     c.low_freq_factor);
  } else if (c.type == RopeType::kYarn) {
    c.original_max_position_embeddings =
        dict.integer("original_max_position_embeddings").value_or(c.max_position_embeddings);
    FP8KIT_CHECK_ARG(c.original_max_position_embeddings > 0,
                     "config.json: yarn RoPE needs `{}` or `max_position_embeddings`",
                     dict.name("original_max_position_embeddings"));
    // HF: `rope_scaling.get("beta_fast") or 32`: absent, null (and 0) take the default.
    if (dict.number("beta_fast").value_or(0.0) != 0.0) c.beta_fast = dict.positive("beta_fast", 32.0);
    if (dict.number("beta_slow").value_or(0.0) != 0.0) c.beta_slow = dict.positive("beta_slow", 1.0);
    c.mscale = dict.number("mscale");
    c.mscale_all_dim = dict.number("mscale_all_dim");
    if (dict.has("attention_factor")) c.attention_factor = dict.positive("attention_factor", 1.0);
    c.truncate = dict.boolean("truncate").value_or(true);
  }
  validate_rope_config(c);
  return c;
}

void validate_rope_config(const RopeConfig& c) {
  FP8KIT_CHECK_ARG(c.head_dim > 0, "rope: `head_dim` must be positive, got {}", c.head_dim);
  FP8KIT_CHECK_ARG(c.rotary_dim >= 2 && c.rotary_dim <= c.head_dim && c.rotary_dim % 2 == 0,
                   "rope: `rotary_dim` must be even and in [2, head_dim = {}], got {}", c.head_dim, c.rotary_dim);
  FP8KIT_CHECK_ARG(std::isfinite(c.theta) && c.theta > 0, "rope: `theta` must be positive and finite, got {}", c.theta);
  if (c.type == RopeType::kDefault) return;
  FP8KIT_CHECK_ARG(std::isfinite(c.factor) && c.factor >= 1.0, "rope: `factor` must be >= 1 for {} RoPE, got {}",
                   rope_type_name(c.type), c.factor);
  switch (c.type) {
    case RopeType::kDynamic:
      FP8KIT_CHECK_ARG(c.max_position_embeddings > 0, "rope: dynamic RoPE needs `max_position_embeddings` > 0");
      FP8KIT_CHECK_ARG(c.rotary_dim > 2, "rope: dynamic RoPE needs `rotary_dim` > 2, got {}", c.rotary_dim);
      break;
    case RopeType::kLlama3:
      FP8KIT_CHECK_ARG(c.original_max_position_embeddings > 0,
                       "rope: llama3 RoPE needs `original_max_position_embeddings` > 0");
      FP8KIT_CHECK_ARG(std::isfinite(c.low_freq_factor) && c.low_freq_factor > 0 && std::isfinite(c.high_freq_factor) &&
                           c.high_freq_factor > c.low_freq_factor,
                       "rope: llama3 RoPE needs 0 < `low_freq_factor` < `high_freq_factor`, got {} and {}",
                       c.low_freq_factor, c.high_freq_factor);
      break;
    case RopeType::kYarn:
      FP8KIT_CHECK_ARG(c.original_max_position_embeddings > 0,
                       "rope: yarn RoPE needs `original_max_position_embeddings` > 0");
      FP8KIT_CHECK_ARG(std::isfinite(c.beta_fast) && c.beta_fast > 0 && std::isfinite(c.beta_slow) && c.beta_slow > 0,
                       "rope: yarn RoPE needs positive `beta_fast` and `beta_slow`, got {} and {}", c.beta_fast,
                       c.beta_slow);
      FP8KIT_CHECK_ARG(!c.attention_factor || (std::isfinite(*c.attention_factor) && *c.attention_factor > 0),
                       "rope: `attention_factor` must be positive and finite, got {}", c.attention_factor.value_or(0));
      FP8KIT_CHECK_ARG(
          (!c.mscale || std::isfinite(*c.mscale)) && (!c.mscale_all_dim || std::isfinite(*c.mscale_all_dim)),
          "rope: `mscale` and `mscale_all_dim` must be finite");
      break;
    default: break;
  }
}

}  // namespace fp8kit::ops
