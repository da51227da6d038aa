// Strict JSON parsing for hostile files (see json_util.h).
// Fuzzed by fuzz/fuzz_safetensors_header.cpp; tested in tests/cpu/test_safetensors_errors.cpp.
#include "io/json_util.h"

#include <memory>
#include <type_traits>
#include <unordered_set>
#include <utility>

#include "core/check.h"

namespace fp8kit::io {
namespace {

// nlohmann prefixes what() with "[json.exception.parse_error.101] "; the id helps nobody reading
// an error about a file.
std::string strip_exception_id(const char* what) {
  std::string_view s(what);
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find("] ");
    if (close != std::string_view::npos) s.remove_prefix(close + 2);
  }
  return std::string(s);
}

// Builds the document from nlohmann's SAX events, as nlohmann's own DOM parser does, and reports
// duplicate keys. nlohmann's callback parser is not used: after every nested object it scans the
// parent object for discarded values, which is quadratic in the number of tensors of a header.
template <typename Json>
class DomBuilder {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  explicit DomBuilder(const DuplicateKeyHandler& on_duplicate) : on_duplicate_(on_duplicate) {}

  Json& root() { return root_; }

  bool null() { return add(nullptr) != nullptr; }
  bool boolean(bool v) { return add(v) != nullptr; }
  bool number_integer(number_integer_t v) { return add(v) != nullptr; }
  bool number_unsigned(number_unsigned_t v) { return add(v) != nullptr; }
  bool number_float(number_float_t v, const string_t& /*text*/) { return add(v) != nullptr; }
  bool string(string_t& v) { return add(std::move(v)) != nullptr; }
  bool binary(binary_t& v) { return add(Json::binary(std::move(v))) != nullptr; }

  bool start_object(std::size_t /*size*/) { return open(Json::object()); }
  bool start_array(std::size_t /*size*/) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Json& object = *stack_.back();
    keys_.back() = k;
    if constexpr (kOrdered) {
      // ordered_json finds a key by a linear scan (quadratic over a whole object): its entries
      // are indexed by a hash set of positions instead, kept while the object is open.
      auto& entries =
          static_cast<typename Json::object_t::Container&>(object.template get_ref<typename Json::object_t&>());
      entries.emplace_back(std::move(k), Json());
      const auto [it, inserted] = indexes_.back()->insert(entries.size() - 1);
      if (!inserted) {
        entries.pop_back();
        if (on_duplicate_) report_duplicate();
      }
      slot_ = &entries[*it].second;  // a repeated key: the last value wins, at the first position
    } else {
      if (on_duplicate_ && object.find(k) != object.end()) report_duplicate();
      slot_ = &object[k];
    }
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/, const nlohmann::json::exception& e) {
    fail(ErrorCode::kIo, "invalid JSON at byte {}: {}", position, strip_exception_id(e.what()));
  }

 private:
  // Stores a value where the parser is: the root, the end of the open array, or the slot of the
  // last key of the open object. Pointers to open containers stay valid: nothing is added to a
  // container's parent while it is open.
  template <typename V>
  Json* add(V&& v) {
    if (stack_.empty()) {
      root_ = Json(std::forward<V>(v));
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.emplace_back(std::forward<V>(v));
      return &top.back();
    }
    *slot_ = Json(std::forward<V>(v));
    return slot_;
  }
  bool open(Json&& container) {
    stack_.push_back(add(std::move(container)));
    keys_.emplace_back();
    if constexpr (kOrdered) {
      indexes_.push_back(stack_.back()->is_object() ? std::make_unique<KeyIndex>(0, EntryHash{stack_.back()},
                                                                                 EntryEqual{stack_.back()})
                                                    : nullptr);
    }
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    if constexpr (kOrdered) indexes_.pop_back();
    return true;
  }
  [[noreturn]] void report_duplicate() {
    std::vector<std::string> parents;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      if (stack_[i]->is_object()) parents.push_back(keys_[i]);
    }
    on_duplicate_(parents, keys_.back());
    fail(ErrorCode::kInternal, "the duplicate key handler returned");
  }

  // Positions in an ordered_json object, hashed and compared by the key stored there.
  static constexpr bool kOrdered = std::is_same_v<Json, nlohmann::ordered_json>;
  struct EntryHash {
    const Json* object;
    size_t operator()(size_t i) const { return std::hash<std::string>()(entry_key(object, i)); }
  };
  struct EntryEqual {
    const Json* object;
    bool operator()(size_t a, size_t b) const { return entry_key(object, a) == entry_key(object, b); }
  };
  static const std::string& entry_key(const Json* object, size_t i) {
    const auto& entries = static_cast<const typename Json::object_t::Container&>(
        object->template get_ref<const typename Json::object_t&>());
    return entries[i].first;
  }
  using KeyIndex = std::unordered_set<size_t, EntryHash, EntryEqual>;

  const DuplicateKeyHandler& on_duplicate_;
  Json root_;
  std::vector<Json*> stack_;       // the open containers, outermost first
  std::vector<std::string> keys_;  // keys_[i]: the last key read in stack_[i]
  std::vector<std::unique_ptr<KeyIndex>> indexes_;  // ordered_json: indexes_[i] for an object stack_[i]
  Json* slot_ = nullptr;
};

}  // namespace

size_t find_excess_nesting(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return i;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

template <typename Json>
Json parse_json_strict(std::string_view text, size_t max_depth, const DuplicateKeyHandler& on_duplicate) {
  const size_t deep = find_excess_nesting(text, max_depth);
  FP8KIT_CHECK(deep == std::string_view::npos, ErrorCode::kIo, "JSON nests deeper than {} levels (at byte {})",
               max_depth, deep);
  DomBuilder<Json> builder(on_duplicate);
  try {
    Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/false);
  } catch (const typename Json::exception& e) {
    // sax_parse reports syntax errors through DomBuilder::parse_error; this is for anything else.
    fail(ErrorCode::kIo, "invalid JSON: {}", strip_exception_id(e.what()));
  }
  return std::move(builder.root());
}

template nlohmann::json parse_json_strict<nlohmann::json>(std::string_view, size_t, const DuplicateKeyHandler&);
template nlohmann::ordered_json parse_json_strict<nlohmann::ordered_json>(std::string_view, size_t,
                                                                          const DuplicateKeyHandler&);

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  // Strings in a parsed document are valid UTF-8, so dump() cannot throw; replace just in case.
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) {
    s.resize(max_chars);
    s += "...";
  }
  return s;
}

const char* json_kind(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::object: return "object";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "integer";
    case nlohmann::json::value_t::number_float: return "float";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::null: return "null";
    default: return "binary";
  }
}

}  // namespace fp8kit::io
