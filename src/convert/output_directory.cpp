#include "convert/output_directory.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/check.h"

namespace fp8kit::convert {
namespace fs = std::filesystem;
namespace {

bool is_weight_or_index(const std::string& name) {
  static const char* kWeightExtensions[] = {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf"};
  for (const char* ext : kWeightExtensions) {
    const std::string e(ext);
    if (name.size() >= e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) return true;
  }
  return name == "model.safetensors.index.json" || name == "pytorch_model.bin.index.json";
}

}  // namespace

OutputDirectory::OutputDirectory(std::string final_dir, bool force, const std::string& input_dir)
    : final_dir_(std::move(final_dir)), force_(force) {
  while (final_dir_.size() > 1 && final_dir_.back() == '/') final_dir_.pop_back();
  FP8KIT_CHECK_ARG(!final_dir_.empty(), "empty output directory name");
  std::error_code ec;
  if (fs::exists(final_dir_, ec)) {
    FP8KIT_CHECK_ARG(!fs::equivalent(final_dir_, input_dir, ec), "output directory {} is the input directory",
                     final_dir_);
    FP8KIT_CHECK_ARG(force, "output directory {} already exists; pass --force to replace it", final_dir_);
    FP8KIT_CHECK_ARG(fs::is_directory(final_dir_, ec), "output {} exists and is not a directory", final_dir_);
  }
  partial_dir_ = final_dir_ + ".partial";
  fs::remove_all(partial_dir_, ec);  // a leftover of an interrupted run: never a complete checkpoint
  if (!fs::create_directories(partial_dir_, ec) || ec) {
    fail(ErrorCode::kIo, "cannot create {}: {}", partial_dir_, ec ? ec.message() : "it already exists");
  }
}

OutputDirectory::~OutputDirectory() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(partial_dir_, ec);
  }
}

std::string OutputDirectory::path(const std::string& file_name) const { return partial_dir_ + "/" + file_name; }

void OutputDirectory::commit() {
  std::error_code ec;
  std::string old_dir;
  if (fs::exists(final_dir_, ec)) {
    FP8KIT_CHECK_ARG(force_, "output directory {} already exists; pass --force to replace it", final_dir_);
    old_dir = final_dir_ + ".old." + std::to_string(::getpid());
    fs::rename(final_dir_, old_dir, ec);
    if (ec) fail(ErrorCode::kIo, "cannot move the existing {} aside: {}", final_dir_, ec.message());
  }
  fs::rename(partial_dir_, final_dir_, ec);
  if (ec) {
    std::error_code restore;
    if (!old_dir.empty()) fs::rename(old_dir, final_dir_, restore);
    fail(ErrorCode::kIo, "cannot rename {} to {}: {}", partial_dir_, final_dir_, ec.message());
  }
  committed_ = true;
  if (!old_dir.empty()) fs::remove_all(old_dir, ec);
}

void copy_auxiliary_files(const std::string& input_dir, const OutputDirectory& out, std::vector<std::string>& notes,
                          const std::vector<std::string>& excluded) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(input_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory()) {
      notes.push_back("left out the subdirectory " + name + "/");
      continue;
    }
    if (!entry.is_regular_file() || name == "config.json") continue;
    if (std::find(excluded.begin(), excluded.end(), name) != excluded.end()) continue;
    if (is_weight_or_index(name)) {
      if (name.find(".safetensors") == std::string::npos) notes.push_back("left out the weight file " + name);
      continue;
    }
    fs::copy_file(entry.path(), out.path(name), fs::copy_options::overwrite_existing, ec);
    if (ec) fail(ErrorCode::kIo, "cannot copy {}: {}", entry.path().string(), ec.message());
  }
  if (ec) fail(ErrorCode::kIo, "cannot list {}: {}", input_dir, ec.message());
}

}  // namespace fp8kit::convert
