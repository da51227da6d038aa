// Checkpoint: a Hugging Face checkpoint directory (config.json + one or many safetensors shards),
// every shard header validated at open, tensors served lazily as zero-copy views.
// Tested in tests/cpu/test_checkpoint.cpp.
#include "fp8kit/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include "core/check.h"
#include "core/names.h"

namespace fp8kit {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);  // follows symlinks, as Hugging Face caches use them
}

// Every *.safetensors regular file of `dir`, sorted.
std::vector<std::string> list_safetensors(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  FP8KIT_CHECK(!ec, ErrorCode::kIo, "{}: cannot list the directory: {}", shown_path(dir), ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    if (p.extension() == ".safetensors" && is_file(p)) names.push_back(p.filename().string());
  }
  FP8KIT_CHECK(!ec, ErrorCode::kIo, "{}: cannot list the directory: {}", shown_path(dir), ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  FP8KIT_CHECK(fs::is_directory(dir, ec), ErrorCode::kIo, "{}: not a checkpoint directory: {}", shown_path(dir),
               ec ? ec.message() : std::string("not a directory"));
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  const fs::path root(dir);

  const fs::path config_path = root / "config.json";
  if (is_file(config_path)) {
    ckpt.config_ = read_json_file(config_path.string());
    FP8KIT_CHECK(ckpt.config_->is_object(), ErrorCode::kIo, "{}: config.json must hold a JSON object",
                 shown_path(config_path.string()));
  }

  std::vector<std::string> files;
  std::optional<SafetensorsIndex> index;
  const fs::path index_path = root / kIndexName;
  if (is_file(index_path)) {
    index = read_safetensors_index(index_path.string());
    ckpt.sharded_ = true;
    std::set<std::string> named;
    for (const auto& [tensor, file] : index->weight_map) {
      if (!named.insert(file).second) continue;
      FP8KIT_CHECK(is_file(root / file), ErrorCode::kIo, "{}: shard {} (named for tensor {}) does not exist in {}",
                   shown_path(index_path.string()), quote_name(file), quote_name(tensor), shown_path(dir));
    }
    FP8KIT_CHECK(!named.empty(), ErrorCode::kIo, "{}: the weight_map lists no tensors",
                 shown_path(index_path.string()));
    files.assign(named.begin(), named.end());
  } else if (is_file(root / kSingleName)) {
    files.push_back(kSingleName);
  } else {
    files = list_safetensors(dir);
    FP8KIT_CHECK(!files.empty(), ErrorCode::kIo, "{}: no safetensors files (no {}, no {}, no *.safetensors)",
                 shown_path(dir), kIndexName, kSingleName);
  }

  for (const std::string& file : files) {
    auto shard = SafetensorsFile::open((root / file).string());
    for (const TensorInfo& info : shard->tensors()) {
      const auto [it, inserted] = ckpt.where_.emplace(info.name, Location{file, &info});
      FP8KIT_CHECK(inserted, ErrorCode::kIo, "{}: tensor {} is in two shards: {} and {}", shown_path(dir),
                   quote_name(info.name), quote_name(it->second.file), quote_name(file));
    }
    ckpt.files_.emplace(file, std::move(shard));
  }
  if (index) {
    for (const auto& [tensor, file] : index->weight_map) {
      const auto it = ckpt.where_.find(tensor);
      FP8KIT_CHECK(it != ckpt.where_.end() && it->second.file == file, ErrorCode::kIo,
                   "{}: tensor {} is listed in {} but {} has no such tensor", shown_path((root / file).string()),
                   quote_name(tensor), kIndexName, quote_name(file));
    }
  }
  return ckpt;
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

}  // namespace fp8kit
