// model.safetensors.index.json: read (tolerating "metadata": {} and a missing total_size,
// rejecting shard names that leave the directory) and write (sorted, atomically).
// Tested in tests/cpu/test_checkpoint.cpp; fuzzed by fuzz/fuzz_safetensors_index.cpp.
#include <string_view>

#include "core/check.h"
#include "core/names.h"
#include "fp8kit/checkpoint.h"
#include "io/file_util.h"
#include "io/json_util.h"
#include "io/safetensors_index.h"

namespace fp8kit {
namespace {

using nlohmann::json;

constexpr size_t kMaxIndexDepth = 16;

[[noreturn]] void on_duplicate_key(const std::vector<std::string>& parents, const std::string& key) {
  if (parents.empty()) fail(ErrorCode::kIo, "duplicate key {}", quote_name(key));
  fail(ErrorCode::kIo, "{}: duplicate key {}", quote_name(parents.front()), quote_name(key));
}

}  // namespace

namespace io {

// A shard is a plain file name next to the index: a separator, "." or ".." would let a hostile
// index point anywhere on the file system.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

SafetensorsIndex parse_safetensors_index(std::string_view text, const std::string& path) {
  // nlohmann::json (std::map) rather than ordered_json: a weight_map can hold ~100k names, and
  // ordered_json inserts in linear time.
  json root;
  try {
    root = io::parse_json_strict<json>(text, kMaxIndexDepth, on_duplicate_key);
  } catch (const Error& e) {
    throw Error(e.code(), shown_path(path) + ": " + e.what());
  }
  FP8KIT_CHECK(root.is_object(), ErrorCode::kIo, "{}: the index must be a JSON object, got {}", shown_path(path),
               io::json_kind(root));
  SafetensorsIndex index;
  if (const auto meta = root.find("metadata"); meta != root.end() && !meta->is_null()) {
    FP8KIT_CHECK(meta->is_object(), ErrorCode::kIo, "{}: \"metadata\" must be an object, got {}", shown_path(path),
                 io::json_excerpt(*meta));
    if (const auto total = meta->find("total_size"); total != meta->end() && !total->is_null()) {
      FP8KIT_CHECK(total->is_number_unsigned() || (total->is_number_integer() && total->get<int64_t>() >= 0),
                   ErrorCode::kIo, "{}: \"total_size\" must be a non-negative integer, got {}", shown_path(path),
                   io::json_excerpt(*total));
      index.total_size = total->get<uint64_t>();
    }
  }
  const auto map = root.find("weight_map");
  FP8KIT_CHECK(map != root.end(), ErrorCode::kIo, "{}: missing \"weight_map\"", shown_path(path));
  FP8KIT_CHECK(map->is_object(), ErrorCode::kIo, "{}: \"weight_map\" must be an object of tensor name to file name, "
               "got {}", shown_path(path), io::json_excerpt(*map));
  for (const auto& [name, file] : map->items()) {
    FP8KIT_CHECK(file.is_string(), ErrorCode::kIo, "{}: tensor {}: the weight_map value must be a file name, got {}",
                 shown_path(path), quote_name(name), io::json_excerpt(file));
    const auto& file_name = file.get_ref<const std::string&>();
    FP8KIT_CHECK(is_plain_file_name(file_name), ErrorCode::kIo,
                 "{}: tensor {}: shard {} is not a plain file name in the checkpoint directory", shown_path(path),
                 quote_name(name), quote_name(file_name));
    index.weight_map.emplace(name, file_name);
  }
  return index;
}

}  // namespace io

SafetensorsIndex read_safetensors_index(const std::string& path) {
  return io::parse_safetensors_index(io::read_json_text(path), path);
}

void write_safetensors_index(const std::string& path, const SafetensorsIndex& index) {
  for (const auto& [name, file] : index.weight_map) {
    FP8KIT_CHECK_ARG(io::is_plain_file_name(file), "{}: tensor {}: shard {} is not a plain file name", shown_path(path),
                     quote_name(name), quote_name(file));
  }
  // Keys in sorted order ("metadata" before "weight_map"), as transformers writes them.
  json root;
  root["metadata"] = json::object();
  if (index.total_size) root["metadata"]["total_size"] = *index.total_size;
  json& map = root["weight_map"] = json::object();
  for (const auto& [name, file] : index.weight_map) map[name] = file;
  std::string text;
  try {
    text = root.dump(2);
  } catch (const json::exception& e) {
    fail(ErrorCode::kInvalidArgument, "{}: cannot serialize the index: {}", shown_path(path), e.what());
  }
  text += '\n';
  io::write_file_atomic(path, text);
}

}  // namespace fp8kit
