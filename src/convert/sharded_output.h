// The output shards of a checkpoint conversion: one streaming SafetensorsWriter per shard file,
// planned up front, and the model.safetensors.index.json that maps every written tensor to its
// shard. Used by quantize and dequantize.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "convert/output_directory.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/safetensors.h"

namespace fp8kit::convert {

class ShardedOutput {
 public:
  ShardedOutput(const OutputDirectory& out, const std::map<std::string, std::vector<TensorSpec>>& shard_outputs);

  void write(const std::string& shard, const std::string& name, const Tensor& t);
  // Finishes every shard, and writes the index when `with_index` (the input was sharded).
  void finish(bool with_index);
  uint64_t bytes_written() const { return bytes_; }

 private:
  const OutputDirectory& out_;
  std::map<std::string, std::unique_ptr<SafetensorsWriter>> writers_;
  SafetensorsIndex index_;
  uint64_t bytes_ = 0;
};

}  // namespace fp8kit::convert
