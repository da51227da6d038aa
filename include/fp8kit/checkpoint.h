// A Hugging Face checkpoint directory: config.json, and the weights as one model.safetensors or
// shards listed in model.safetensors.index.json. Tensors are read lazily, shard by shard, as
// zero-copy views of the mapped files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/safetensors.h"

namespace fp8kit {

// Reads a JSON file; Error(kIo) naming the file and the position of a syntax error. Nesting is
// limited to 128 levels; a repeated key keeps its last value (as Python's json). ordered_json
// inserts keys in linear time: meant for config files, not 100k-key indexes.
nlohmann::ordered_json read_json_file(const std::string& path);
// Writes JSON (indented by 2, trailing newline) to a temporary name, then renames it to `path`.
void write_json_file(const std::string& path, const nlohmann::ordered_json& value);

// model.safetensors.index.json: {"metadata": {"total_size": N}, "weight_map": {tensor: file}}.
struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name (no directory)
  std::optional<uint64_t> total_size;             // sum of tensor bytes; absent in some checkpoints
};
SafetensorsIndex read_safetensors_index(const std::string& path);
void write_safetensors_index(const std::string& path, const SafetensorsIndex& index);

class Checkpoint {
 public:
  // Opens `dir`: model.safetensors.index.json if present (every shard it names must exist and
  // hold the tensors it lists), else model.safetensors, else every *.safetensors file. Every
  // shard header is validated here; a tensor name found in two shards, or no tensor at all, is
  // an error. Every file is read through io/checkpoint_files.h: regular files only, symbolic
  // links only inside the directory (or a Hugging Face cache's blobs), JSON files capped.
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has_config() const { return config_.has_value(); }
  // config.json (Error(kIo) when the directory has none).
  const nlohmann::ordered_json& config() const;
  // Shard file names (no directory), sorted.
  std::vector<std::string> shard_files() const;
  bool sharded() const { return sharded_; }  // an index file was read

  std::vector<std::string> tensor_names() const;  // sorted
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;
  const std::string& shard_of(const std::string& name) const;  // file name of the shard
  const SafetensorsFile& shard(const std::string& file_name) const;
  Tensor tensor(const std::string& name) const;
  void prefetch(const std::string& name) const;  // see SafetensorsFile::prefetch
  void release(const std::string& name) const;   // see SafetensorsFile::release
  void verify(const std::string& name) const;    // see SafetensorsFile::verify
  // Another JSON file of the directory (hf_quant_config.json), checked as every file fp8kit
  // reads from it; nullopt when there is none.
  std::optional<nlohmann::ordered_json> read_json(const std::string& file_name) const;

 private:
  struct Location {
    std::string file;
    const TensorInfo* info;
  };
  std::string dir_;
  std::optional<nlohmann::ordered_json> config_;
  bool sharded_ = false;
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, Location> where_;
};

}  // namespace fp8kit
