// The output shards of a checkpoint conversion: one streaming SafetensorsWriter per input shard
// (a shard without tensors is written too, so the output has the input's files), planned up
// front, and the model.safetensors.index.json that maps every written tensor to its shard. Used
// by quantize and dequantize. Errors name the input shard and tensor being written, and OUT's
// final name, never the work directory.
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
  // `shard_outputs`: the planned tensors of each output shard, by input shard file name.
  ShardedOutput(const OutputDirectory& out, const Checkpoint& input,
                const std::map<std::string, std::vector<TensorSpec>>& shard_outputs);

  void write(const std::string& shard, const std::string& name, const Tensor& t);
  // Finishes every shard, and writes the index when `with_index` (the input was sharded).
  void finish(bool with_index);
  uint64_t bytes_written() const { return bytes_; }

 private:
  // Rethrows the writer's error `e` about output shard `shard` as one about the input.
  [[noreturn]] void rethrow(const Error& e, const std::string& shard, const std::string& tensor) const;

  const OutputDirectory& out_;
  const Checkpoint& input_;
  std::map<std::string, std::unique_ptr<SafetensorsWriter>> writers_;
  SafetensorsIndex index_;
  uint64_t bytes_ = 0;
};

}  // namespace fp8kit::convert
