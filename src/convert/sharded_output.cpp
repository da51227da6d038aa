#include "convert/sharded_output.h"

namespace fp8kit::convert {

ShardedOutput::ShardedOutput(const OutputDirectory& out,
                             const std::map<std::string, std::vector<TensorSpec>>& shard_outputs)
    : out_(out) {
  for (const auto& [shard, specs] : shard_outputs) {
    writers_[shard] = std::make_unique<SafetensorsWriter>(out.path(shard), specs);
  }
}

void ShardedOutput::write(const std::string& shard, const std::string& name, const Tensor& t) {
  writers_.at(shard)->write(name, t);
  index_.weight_map[name] = shard;
  bytes_ += t.nbytes();
}

void ShardedOutput::finish(bool with_index) {
  for (auto& [shard, writer] : writers_) writer->finish();
  if (with_index) {
    index_.total_size = bytes_;
    write_safetensors_index(out_.path("model.safetensors.index.json"), index_);
  }
}

}  // namespace fp8kit::convert
