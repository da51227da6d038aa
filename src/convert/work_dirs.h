// The work directories of an output: "<OUT>.partial.<pid>.<8 hex>" (the output being written)
// and "<OUT>.old.<pid>.<8 hex>" (an output being replaced), each holding the marker file
// kWorkDirMarker while fp8kit owns it. Only a directory with both the name and the marker is
// ever removed as a leftover: never a user's directory. Part of OutputDirectory
// (output_directory.h); tested in tests/cpu/test_output_directory.cpp.
#pragma once

#include <string>

namespace fp8kit::convert {

inline constexpr const char* kWorkDirMarker = ".fp8kit-partial";

// "<prefix><pid>.<8 random hex digits>".
std::string work_dir_name(const std::string& prefix);
// `name` has the form work_dir_name(prefix) gives.
bool is_work_dir_name(const std::string& prefix, const std::string& name);

// Writes the marker into `dir` (Error(kIo) on failure) / removes it (errors ignored).
void write_marker(const std::string& dir);
void remove_marker(const std::string& dir);
// `dir` is a real directory (not a link) holding the marker as a regular file.
bool has_marker(const std::string& dir);

// Removes the tree `dir` (links removed, never followed), the marker last, so that a kill in
// the middle leaves a tree the next run still recognises. Returns false when something stayed.
bool remove_tree(const std::string& dir);

}  // namespace fp8kit::convert
