// ShardedOutput (sharded_output.h).
// Tested in tests/cpu/test_quantize_checkpoint.cpp and tests/cpu/test_cli_output.cpp.
#include "convert/sharded_output.h"

#include "core/check.h"
#include "core/names.h"

namespace fp8kit::convert {

ShardedOutput::ShardedOutput(const OutputDirectory& out, const Checkpoint& input,
                             const std::map<std::string, std::vector<TensorSpec>>& shard_outputs)
    : out_(out), input_(input) {
  for (const std::string& shard : input.shard_files()) {
    const auto planned = shard_outputs.find(shard);
    try {
      writers_[shard] = std::make_unique<SafetensorsWriter>(
          out.path(shard), planned == shard_outputs.end() ? std::vector<TensorSpec>{} : planned->second);
    } catch (const Error& e) {
      rethrow(e, shard, "");
    }
  }
}

void ShardedOutput::rethrow(const Error& e, const std::string& shard, const std::string& tensor) const {
  // The writer names its file first: that prefix goes, the input shard and tensor come instead.
  const std::string output_file = out_.display() + "/" + shard;
  std::string message = out_.named_as_output(e.what());
  if (message.compare(0, output_file.size() + 2, output_file + ": ") == 0) message.erase(0, output_file.size() + 2);
  const std::string input_file = input_.dir() + "/" + shard;
  if (tensor.empty()) throw Error(e.code(), fmt::format("{}: output {}: {}", input_file, output_file, message));
  throw Error(e.code(), fmt::format("{}: tensor {}: writing {}: {}", input_file, quote_name(tensor), output_file,
                                    message));
}

void ShardedOutput::write(const std::string& shard, const std::string& name, const Tensor& t) {
  try {
    writers_.at(shard)->write(name, t);
  } catch (const Error& e) {
    rethrow(e, shard, name);
  }
  index_.weight_map[name] = shard;
  bytes_ += t.nbytes();
}

void ShardedOutput::finish(bool with_index) {
  for (auto& [shard, writer] : writers_) {
    try {
      writer->finish();
    } catch (const Error& e) {
      rethrow(e, shard, "");
    }
  }
  if (with_index) {
    index_.total_size = bytes_;
    try {
      write_safetensors_index(out_.path("model.safetensors.index.json"), index_);
    } catch (const Error& e) {
      throw Error(e.code(), out_.named_as_output(e.what()));
    }
  }
}

}  // namespace fp8kit::convert
