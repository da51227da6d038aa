// Checkpoint: a Hugging Face checkpoint directory (config.json + one or many safetensors shards),
// every shard header validated at open, tensors served lazily as zero-copy views.
// Tested in tests/cpu/test_checkpoint.cpp.
#include "fp8kit/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include <fmt/ranges.h>

#include "core/check.h"
#include "core/names.h"
#include "io/checkpoint_files.h"

namespace fp8kit {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

using Kind = io::CheckpointDir::Kind;

// Every *.safetensors entry of `dir` that is not a directory, sorted. A FIFO or device among
// them is kept, so that opening it says what it is.
std::vector<std::string> list_safetensors(const io::CheckpointDir& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir.path(), ec);
  FP8KIT_CHECK(!ec, ErrorCode::kIo, "{}: cannot list the directory: {}", shown_path(dir.path()), ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    if (p.extension() != ".safetensors") continue;
    const std::string name = p.filename().string();
    const Kind kind = dir.resolve(name).kind;
    if (kind != Kind::kAbsent && kind != Kind::kDirectory) names.push_back(name);
  }
  FP8KIT_CHECK(!ec, ErrorCode::kIo, "{}: cannot list the directory: {}", shown_path(dir.path()), ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir) {
  const io::CheckpointDir root(dir);
  Checkpoint ckpt;
  ckpt.dir_ = dir;

  if (root.resolve("config.json").kind != Kind::kAbsent) {
    const std::string config_path = root.join("config.json");
    ckpt.config_ = read_json_file(config_path);
    FP8KIT_CHECK(ckpt.config_->is_object(), ErrorCode::kIo, "{}: config.json must hold a JSON object",
                 shown_path(config_path));
  }

  std::vector<std::string> files;
  std::optional<SafetensorsIndex> index;
  const std::string index_path = root.join(kIndexName);
  if (root.resolve(kIndexName).kind != Kind::kAbsent) {
    index = read_safetensors_index(index_path);
    ckpt.sharded_ = true;
    std::set<std::string> named;
    for (const auto& [tensor, file] : index->weight_map) {
      if (!named.insert(file).second) continue;
      FP8KIT_CHECK(root.resolve(file).kind != Kind::kAbsent, ErrorCode::kIo,
                   "{}: shard {} (named for tensor {}) does not exist in {}", shown_path(index_path),
                   quote_name(file), quote_name(tensor), shown_path(dir));
    }
    FP8KIT_CHECK(!named.empty(), ErrorCode::kIo, "{}: the weight_map lists no tensors", shown_path(index_path));
    files.assign(named.begin(), named.end());
  } else if (root.resolve(kSingleName).kind != Kind::kAbsent) {
    files.push_back(kSingleName);
  } else {
    files = list_safetensors(root);
    FP8KIT_CHECK(!files.empty(), ErrorCode::kIo, "{}: no safetensors files (no {}, no {}, no *.safetensors)",
                 shown_path(dir), kIndexName, kSingleName);
  }

  for (const std::string& file : files) {
    auto shard = SafetensorsFile::open(root.join(file));
    for (const TensorInfo& info : shard->tensors()) {
      const auto [it, inserted] = ckpt.where_.emplace(info.name, Location{file, &info});
      FP8KIT_CHECK(inserted, ErrorCode::kIo, "{}: tensor {} is in two shards: {} and {}", shown_path(dir),
                   quote_name(info.name), quote_name(it->second.file), quote_name(file));
    }
    ckpt.files_.emplace(file, std::move(shard));
  }
  FP8KIT_CHECK(!ckpt.where_.empty(), ErrorCode::kIo, "{}: the checkpoint holds no tensors (its shards: {})", dir,
               fmt::join(files, ", "));
  if (index) {
    for (const auto& [tensor, file] : index->weight_map) {
      const auto it = ckpt.where_.find(tensor);
      FP8KIT_CHECK(it != ckpt.where_.end() && it->second.file == file, ErrorCode::kIo,
                   "{}: tensor {} is listed in {} but {} has no such tensor", shown_path(root.join(file)),
                   quote_name(tensor), kIndexName, quote_name(file));
    }
  }
  return ckpt;
}

std::optional<nlohmann::ordered_json> Checkpoint::read_json(const std::string& file_name) const {
  if (io::CheckpointDir(dir_).resolve(file_name).kind == Kind::kAbsent) return std::nullopt;
  return read_json_file(dir_ + "/" + file_name);
}

const nlohmann::ordered_json& Checkpoint::config() const {
  FP8KIT_CHECK(config_.has_value(), ErrorCode::kIo, "{}: the checkpoint has no config.json", shown_path(dir_));
  return *config_;
}

std::vector<std::string> Checkpoint::shard_files() const {
  std::vector<std::string> names;
  names.reserve(files_.size());
  for (const auto& [name, file] : files_) names.push_back(name);
  return names;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(where_.size());
  for (const auto& [name, loc] : where_) names.push_back(name);
  return names;
}

namespace {

template <typename Map>
const auto& lookup(const Map& where, const std::string& dir, const std::string& name) {
  const auto it = where.find(name);
  FP8KIT_CHECK(it != where.end(), ErrorCode::kIo, "{}: the checkpoint has no tensor {}", shown_path(dir),
               quote_name(name));
  return it->second;
}

}  // namespace

const TensorInfo& Checkpoint::info(const std::string& name) const { return *lookup(where_, dir_, name).info; }

const std::string& Checkpoint::shard_of(const std::string& name) const { return lookup(where_, dir_, name).file; }

const SafetensorsFile& Checkpoint::shard(const std::string& file_name) const {
  const auto it = files_.find(file_name);
  FP8KIT_CHECK(it != files_.end(), ErrorCode::kIo, "{}: the checkpoint has no shard {}", shown_path(dir_),
               quote_name(file_name));
  return *it->second;
}

Tensor Checkpoint::tensor(const std::string& name) const {
  const Location& loc = lookup(where_, dir_, name);
  return files_.at(loc.file)->tensor(name);
}

void Checkpoint::prefetch(const std::string& name) const {
  const Location& loc = lookup(where_, dir_, name);
  files_.at(loc.file)->prefetch(name);
}

void Checkpoint::release(const std::string& name) const {
  const Location& loc = lookup(where_, dir_, name);
  files_.at(loc.file)->release(name);
}

void Checkpoint::verify(const std::string& name) const {
  const Location& loc = lookup(where_, dir_, name);
  files_.at(loc.file)->verify(name);
}

}  // namespace fp8kit
