// The life cycle of an output checkpoint directory OUT, in one place. While a run writes OUT it
// holds OUT's lock (output_lock.h), so a second run to OUT fails at once; it writes into a work
// directory of its own, "OUT.partial.<pid>.<random>" (work_dirs.h), which commit() turns into OUT
// in one atomic step: a rename, or with --force an exchange with the old OUT (renameat2
// RENAME_EXCHANGE, then the old tree is removed; two renames where the file system lacks it).
// OUT == IN and an OUT that contains IN are refused (output_paths.h). Any way out but commit()
// (an exception, or the CLI's SIGINT/SIGTERM handler through abandon_all) removes this run's
// work directory; leftovers of killed runs (marked, or empty) are removed by the next run to
// OUT, under its lock. Nothing fp8kit did not create is deleted; an existing OUT only with
// `force`, and only at commit. OUT itself never holds the marker.
// Tested in tests/cpu/test_output_directory.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/output_lock.h"
#include "convert/output_paths.h"

namespace fp8kit::convert {

class OutputDirectory {
 public:
  // Errors: the output is or contains the input; it exists and `force` is false; it is not a
  // directory (or a link to one); another run holds its lock; the work directory cannot be made.
  OutputDirectory(const std::string& final_dir, bool force, const std::string& input_dir);
  ~OutputDirectory();
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;

  // `relative` inside the work directory. Error(kIo) once the run was abandoned.
  std::string path(const std::string& relative) const;
  const std::string& work_dir() const { return work_dir_; }  // absolute
  std::string work_display() const;  // the work directory named as the user named OUT
  const OutputPaths& paths() const { return paths_; }
  const std::string& display() const { return paths_.display; }
  // `message` with the work directory's paths (and their temporary ".tmp.<pid>" names) given as
  // OUT's: errors name the output the user asked for, never the work directory.
  std::string named_as_output(std::string message) const;
  // write_json_file of `relative` in the work directory, its errors named as OUT's.
  void write_json(const std::string& relative, const nlohmann::ordered_json& value) const;
  // What the constructor did that the user should hear of (leftovers removed).
  const std::vector<std::string>& notes() const { return notes_; }

  // Makes the work directory OUT. Error(kIo) leaves any existing OUT as it was.
  void commit();

  // For an interrupt handler: removes the work directory of every live, uncommitted output and
  // returns their names. A commit in progress finishes first. Afterwards every output refuses
  // to go on, so the process must end right after (the CLI calls _exit).
  static std::vector<std::string> abandon_all();

  // Commit with the two-rename fallback only, as on a file system without RENAME_EXCHANGE.
  static void set_exchange_supported_for_tests(bool supported);

 private:
  void remove_leftovers();
  void replace_existing();
  OutputPaths paths_;
  bool force_ = false;
  std::unique_ptr<OutputLock> lock_;
  std::string work_dir_;
  std::vector<std::string> notes_;
  bool committed_ = false;
};

}  // namespace fp8kit::convert
