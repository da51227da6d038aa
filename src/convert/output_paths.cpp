// resolve_output_paths and the OUT-versus-IN guard (output_paths.h).
// Tested in tests/cpu/test_output_directory.cpp.
#include "convert/output_paths.h"

#include <filesystem>
#include <system_error>

#include "core/check.h"

namespace fp8kit::convert {
namespace fs = std::filesystem;
namespace {

// `path` with symbolic links resolved as far as it exists, the rest appended lexically.
std::string canonical_as_far_as_it_exists(const fs::path& path) {
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(path, ec);
  return (ec ? path : real).lexically_normal().string();
}

bool is_same_or_ancestor(const std::string& maybe_ancestor, const std::string& path) {
  if (path == maybe_ancestor) return true;
  if (maybe_ancestor == "/") return true;
  return path.size() > maybe_ancestor.size() && path.compare(0, maybe_ancestor.size(), maybe_ancestor) == 0 &&
         path[maybe_ancestor.size()] == '/';
}

}  // namespace

bool OutputPaths::is_own_entry(const std::string& dir_real, const std::string& entry_name) const {
  if (dir_real != parent_real) return false;
  return entry_name == name || entry_name == "." + name + ".lock" || entry_name.rfind(partial_prefix(), 0) == 0 ||
         entry_name.rfind(old_prefix(), 0) == 0;
}

OutputPaths resolve_output_paths(const std::string& output_dir, const std::string& input_dir) {
  OutputPaths p;
  p.display = output_dir;
  while (p.display.size() > 1 && p.display.back() == '/') p.display.pop_back();
  FP8KIT_CHECK_ARG(!p.display.empty(), "empty output directory name");
  std::error_code ec;
  fs::path absolute = fs::absolute(p.display, ec).lexically_normal();
  FP8KIT_CHECK_ARG(!ec, "output directory {}: {}", p.display, ec.message());
  if (!absolute.has_filename() && absolute != absolute.root_path()) absolute = absolute.parent_path();
  p.final_dir = absolute.string();
  p.parent = absolute.parent_path().string();
  p.name = absolute.filename().string();
  p.parent_real = canonical_as_far_as_it_exists(absolute.parent_path());

  // OUT as named (its last component kept) and OUT as followed (a symbolic link resolved).
  const std::string in_real = canonical_as_far_as_it_exists(fs::absolute(input_dir, ec));
  const std::string out_named = p.name.empty() ? p.parent_real : (fs::path(p.parent_real) / p.name).string();
  const std::string out_followed = canonical_as_far_as_it_exists(absolute);
  for (const std::string& out : {out_named, out_followed}) {
    FP8KIT_CHECK_ARG(out != in_real, "output directory {} is the input directory", p.display);
    FP8KIT_CHECK_ARG(!is_same_or_ancestor(out, in_real),
                     "output directory {} contains the input directory {}: replacing it would delete the input",
                     p.display, input_dir);
  }
  FP8KIT_CHECK_ARG(!p.name.empty() && p.name != "." && p.name != "..", "output directory {}: not a directory name",
                   p.display);
  return p;
}

}  // namespace fp8kit::convert
