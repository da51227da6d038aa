// The rest of a checkpoint directory: every file and subdirectory that is not a weight the
// conversion writes (tokenizer files, generation_config.json, chat templates, README, the
// modules.json and 1_Pooling/ of a sentence-transformers model, ...), copied with its tree into
// the output's work directory, so the output replaces the input as it is. Symbolic links to a
// file inside the checkpoint are copied as that file; any other link, a FIFO, a socket or a
// device is refused up front, naming the path. Weight files of other formats (.bin, .pt, .pth,
// .gguf, .onnx, ...) and the .git/ and .cache/ folders are left out, each with a note.
// Tested in tests/cpu/test_auxiliary_files.cpp.
#pragma once

#include <string>
#include <vector>

#include "convert/output_directory.h"
#include "fp8kit/checkpoint.h"

namespace fp8kit::convert {

struct AuxiliaryFiles {
  std::vector<std::string> directories;  // relative to the checkpoint, parents first
  std::vector<std::string> files;        // relative to the checkpoint
  std::vector<std::string> notes;        // what is left out, and why
};

// The top-level names a conversion of `checkpoint` writes itself: its shards, config.json, the index.
std::vector<std::string> written_by_conversion(const Checkpoint& checkpoint);

// Lists what to copy from `input_dir`. `written`: the top-level names the conversion writes or
// drops itself (config.json, the index, the shards, ...); other top-level *.safetensors files
// are left out with a note. The output's own entries are skipped when it lies inside the input.
AuxiliaryFiles plan_auxiliary_files(const std::string& input_dir, const OutputPaths& output,
                                    const std::vector<std::string>& written);

// Copies them into `out`'s work directory (each file fsynced). Error(kIo) naming the input file.
void copy_auxiliary_files(const std::string& input_dir, const AuxiliaryFiles& files, const OutputDirectory& out);

}  // namespace fp8kit::convert
