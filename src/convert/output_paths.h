// Where an output directory and its helpers live, and the guard that keeps an output from
// swallowing its input: OUT may not be IN or contain IN, compared on canonical paths (symbolic
// links resolved, with and without following OUT itself). OUT inside IN is allowed: the
// conversion skips OUT's entries when it copies IN's files (OutputPaths::is_own_entry).
// Part of OutputDirectory (output_directory.h); tested in tests/cpu/test_output_directory.cpp.
#pragma once

#include <string>

namespace fp8kit::convert {

struct OutputPaths {
  std::string display;      // as the user gave it, without trailing slashes: for messages
  std::string final_dir;    // absolute, lexically normal
  std::string parent;       // absolute directory that holds final_dir, its lock and leftovers
  std::string name;         // last component of final_dir
  std::string parent_real;  // parent, canonical (when it exists)

  std::string lock_path() const { return parent + "/." + name + ".lock"; }
  // "<name>.partial." and "<name>.old.": the prefixes of this output's work directories.
  std::string partial_prefix() const { return name + ".partial."; }
  std::string old_prefix() const { return name + ".old."; }
  // Whether the entry `entry_name` of the directory whose canonical path is `dir_real` is this
  // output, its lock or one of its work directories.
  bool is_own_entry(const std::string& dir_real, const std::string& entry_name) const;
};

// Error(kInvalidArgument): an empty name, OUT == IN, OUT an ancestor of IN.
OutputPaths resolve_output_paths(const std::string& output_dir, const std::string& input_dir);

}  // namespace fp8kit::convert
