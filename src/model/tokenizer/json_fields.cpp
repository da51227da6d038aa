// Typed field access for tokenizer.json (see json_fields.h).
#include "model/tokenizer/json_fields.h"

#include "core/check.h"
#include "io/json_util.h"

namespace fp8kit::tok {

const Json& field(const Json& object, const char* name, const std::string& where) {
  FP8KIT_CHECK_ARG(object.is_object(), "{}: expected an object, got {}", where, io::json_kind(object));
  const auto it = object.find(name);
  FP8KIT_CHECK_ARG(it != object.end(), "{}: field '{}' is missing", where, name);
  return *it;
}

std::string string_field(const Json& object, const char* name, const std::string& where) {
  const Json& v = field(object, name, where);
  FP8KIT_CHECK_ARG(v.is_string(), "{}: field '{}' must be a string, got {}", where, name, io::json_kind(v));
  return v.get<std::string>();
}

bool bool_field(const Json& object, const char* name, bool fallback, const std::string& where) {
  FP8KIT_CHECK_ARG(object.is_object(), "{}: expected an object, got {}", where, io::json_kind(object));
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return fallback;
  FP8KIT_CHECK_ARG(it->is_boolean(), "{}: field '{}' must be a boolean, got {}", where, name, io::json_kind(*it));
  return it->get<bool>();
}

int64_t int_field(const Json& object, const char* name, int64_t fallback, const std::string& where) {
  FP8KIT_CHECK_ARG(object.is_object(), "{}: expected an object, got {}", where, io::json_kind(object));
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return fallback;
  FP8KIT_CHECK_ARG(it->is_number_integer(), "{}: field '{}' must be an integer, got {}", where, name,
                   io::json_kind(*it));
  return it->get<int64_t>();
}

std::pair<std::string, bool> pattern_field(const Json& object, const std::string& where) {
  const Json& p = field(object, "pattern", where);
  FP8KIT_CHECK_ARG(p.is_object() && p.size() == 1, "{}: field 'pattern' must be {{\"String\": ...}} or {{\"Regex\": ...}}",
                   where);
  if (p.contains("String")) return {string_field(p, "String", where + ".pattern"), false};
  if (p.contains("Regex")) return {string_field(p, "Regex", where + ".pattern"), true};
  fail(ErrorCode::kInvalidArgument, "{}: field 'pattern' must be {{\"String\": ...}} or {{\"Regex\": ...}}", where);
}

std::string type_of(const Json& object, const std::string& where) { return string_field(object, "type", where); }

void unsupported_type(const std::string& where, const char* kind, const std::string& type) {
  // `where` is the JSON path of the stage ("tokenizer.json: normalizer"), which names its kind.
  (void)kind;
  fail(ErrorCode::kUnsupported, "{} type '{}' is not supported", where, type);
}

}  // namespace fp8kit::tok
