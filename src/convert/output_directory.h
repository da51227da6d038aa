// An output checkpoint directory that appears only when complete: files are written under
// "<dir>.partial" and renamed to <dir> by commit(). An existing <dir> is replaced only when
// forced, and only after the new one is complete. Dropping the object uncommitted removes the
// partial directory, so a failure never leaves a half-written checkpoint that looks complete.
#pragma once

#include <string>
#include <vector>

namespace fp8kit::convert {

class OutputDirectory {
 public:
  // Errors: the output exists and `force` is false; the output is the input directory.
  OutputDirectory(std::string final_dir, bool force, const std::string& input_dir);
  ~OutputDirectory();
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;

  std::string path(const std::string& file_name) const;  // a file inside the partial directory
  void commit();

 private:
  std::string final_dir_;
  std::string partial_dir_;
  bool force_ = false;
  bool committed_ = false;
};

// Copies the regular files of `input_dir` that are not weights, indexes or config.json (the
// tokenizer, generation config, README, ...) into `out`, except those named in `excluded`. Weight
// files of other formats and subdirectories are left out, each with a note.
void copy_auxiliary_files(const std::string& input_dir, const OutputDirectory& out, std::vector<std::string>& notes,
                          const std::vector<std::string>& excluded = {});

}  // namespace fp8kit::convert
