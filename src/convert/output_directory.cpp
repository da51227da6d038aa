// OutputDirectory (output_directory.h): lock, work directory, atomic commit, cleanup.
// Tested in tests/cpu/test_output_directory.cpp.
#include "convert/output_directory.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>

#include "convert/work_dirs.h"
#include "core/check.h"
#include "fp8kit/checkpoint.h"
#include "io/file_util.h"

namespace fp8kit::convert {
namespace fs = std::filesystem;
namespace {

// The live outputs, for abandon_all. The mutex also covers each work directory's creation and
// each commit, so that an interrupt sees either no work directory or a complete step.
std::mutex g_mutex;
std::set<OutputDirectory*> g_live;
std::atomic<bool> g_abandoned{false};
std::atomic<bool> g_exchange_supported{true};

enum class Existing { kNone, kDirectory, kOther };

// OUT as the commit finds it: a directory or a link to one (replaced only when forced), or
// something else (never replaced). A dangling link is refused: what it meant is unclear.
Existing existing_output(const OutputPaths& p) {
  struct stat st {};
  if (::lstat(p.final_dir.c_str(), &st) != 0) return Existing::kNone;
  if (S_ISLNK(st.st_mode)) {
    FP8KIT_CHECK_ARG(::stat(p.final_dir.c_str(), &st) == 0, "output {} is a dangling symbolic link", p.display);
  }
  return S_ISDIR(st.st_mode) ? Existing::kDirectory : Existing::kOther;
}

// renameat2 with `flags`; false with errno EINVAL/ENOSYS/ENOTSUP when the file system or kernel
// lacks the flag (the caller falls back), false with another errno on a real failure.
bool rename_with(const std::string& from, const std::string& to, unsigned flags) {
  if (flags == RENAME_EXCHANGE && !g_exchange_supported.load()) {
    errno = EINVAL;
    return false;
  }
  return ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags) == 0;
}

bool flag_unsupported(int err) { return err == EINVAL || err == ENOSYS || err == ENOTSUP; }

// Marks a tree fp8kit is about to remove (a replaced output, at the work directory's name or at
// OUT.old.*), so that a kill during the removal leaves a leftover the next run recognises. Only
// a real directory: a link's target is the user's and stays untouched. Best effort: an
// unwritable directory is removed all the same.
void mark_replaced(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  try {
    write_marker(dir);
  } catch (const Error&) {
  }
}

}  // namespace

OutputDirectory::OutputDirectory(const std::string& final_dir, bool force, const std::string& input_dir)
    : paths_(resolve_output_paths(final_dir, input_dir)), force_(force) {
  const Existing existing = existing_output(paths_);
  FP8KIT_CHECK_ARG(existing != Existing::kOther, "output {} exists and is not a directory", paths_.display);
  FP8KIT_CHECK_ARG(existing == Existing::kNone || force,
                   "output directory {} already exists; pass --force to replace it", paths_.display);
  std::error_code ec;
  fs::create_directories(paths_.parent, ec);
  FP8KIT_CHECK(!ec, ErrorCode::kIo, "cannot create {}: {}", paths_.parent, ec.message());
  lock_ = std::make_unique<OutputLock>(paths_.lock_path(), paths_.display);
  remove_leftovers();

  std::lock_guard<std::mutex> hold(g_mutex);
  FP8KIT_CHECK(!g_abandoned.load(), ErrorCode::kIo, "{}: interrupted", paths_.display);
  for (int attempt = 0;; ++attempt) {
    work_dir_ = paths_.parent + "/" + work_dir_name(paths_.partial_prefix());
    if (::mkdir(work_dir_.c_str(), 0777) == 0) break;
    FP8KIT_CHECK(errno == EEXIST && attempt < 100, ErrorCode::kIo, "cannot create {}: {}", work_dir_,
                 io::errno_text(errno));
  }
  try {
    write_marker(work_dir_);
  } catch (...) {
    remove_tree(work_dir_);
    throw;
  }
  g_live.insert(this);
}

OutputDirectory::~OutputDirectory() {
  std::lock_guard<std::mutex> hold(g_mutex);
  g_live.erase(this);
  if (!committed_ && !work_dir_.empty()) remove_tree(work_dir_);
}  // then lock_ is released

// Under OUT's lock, every marked work directory of OUT belongs to a run that is gone.
void OutputDirectory::remove_leftovers() {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(paths_.parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_work_dir_name(paths_.partial_prefix(), name) || is_work_dir_name(paths_.old_prefix(), name)) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string dir = paths_.parent + "/" + name;
    if (!has_marker(dir)) {
      // A run killed between making its work directory and marking it left it empty: rmdir
      // removes only an empty directory, so nothing of anyone's is lost.
      if (::rmdir(dir.c_str()) == 0) notes_.push_back("removed " + name + ", left by an interrupted fp8kit run");
      continue;
    }
    notes_.push_back(remove_tree(dir) ? "removed " + name + ", left by an interrupted fp8kit run"
                                      : "could not remove all of " + name + ", left by an interrupted fp8kit run");
  }
}

std::string OutputDirectory::work_display() const {
  const std::string name = work_dir_.substr(work_dir_.rfind('/') + 1);
  const size_t cut = paths_.display.size() >= paths_.name.size() ? paths_.display.size() - paths_.name.size() : 0;
  const bool same_tail = paths_.display.compare(cut, std::string::npos, paths_.name) == 0 &&
                         (cut == 0 || paths_.display[cut - 1] == '/');
  return same_tail ? paths_.display.substr(0, cut) + name : work_dir_;
}

std::string OutputDirectory::named_as_output(std::string message) const {
  if (work_dir_.empty()) return message;
  const std::string tmp = ".tmp." + std::to_string(::getpid());
  for (size_t at = message.find(work_dir_); at != std::string::npos; at = message.find(work_dir_, at)) {
    message.replace(at, work_dir_.size(), paths_.display);
    at += paths_.display.size();
    const size_t end = message.find_first_of(": ", at);
    const size_t suffix = message.find(tmp, at);
    if (suffix != std::string::npos && suffix + tmp.size() == (end == std::string::npos ? message.size() : end)) {
      message.erase(suffix, tmp.size());
    }
  }
  return message;
}

void OutputDirectory::write_json(const std::string& relative, const nlohmann::ordered_json& value) const {
  try {
    write_json_file(path(relative), value);
  } catch (const Error& e) {
    throw Error(e.code(), named_as_output(e.what()));
  }
}

std::string OutputDirectory::path(const std::string& relative) const {
  FP8KIT_CHECK(!g_abandoned.load(), ErrorCode::kIo, "{}: interrupted", paths_.display);
  return work_dir_ + "/" + relative;
}

void OutputDirectory::commit() {
  std::lock_guard<std::mutex> hold(g_mutex);
  FP8KIT_CHECK(!g_abandoned.load(), ErrorCode::kIo, "{}: interrupted", paths_.display);
  FP8KIT_CHECK(!committed_, ErrorCode::kInternal, "{}: committed twice", paths_.display);
  const Existing existing = existing_output(paths_);
  FP8KIT_CHECK_ARG(existing != Existing::kOther, "output {} exists and is not a directory", paths_.display);
  FP8KIT_CHECK_ARG(existing == Existing::kNone || force_,
                   "output directory {} already exists; pass --force to replace it", paths_.display);
  // OUT never holds the marker, so that a reader of OUT sees the old or the new tree exactly.
  // A kill in the instant between this and the rename leaves a complete work directory
  // without its marker, which no run removes (README: recovery).
  remove_marker(work_dir_);
  io::fsync_dir(work_dir_);
  try {
    if (existing == Existing::kDirectory) {
      replace_existing();
    } else if (!rename_with(work_dir_, paths_.final_dir, RENAME_NOREPLACE)) {
      int err = errno;
      if (flag_unsupported(err)) err = ::rename(work_dir_.c_str(), paths_.final_dir.c_str()) == 0 ? 0 : errno;
      if (err != 0) {
        FP8KIT_CHECK_ARG(err != EEXIST && err != ENOTEMPTY,
                         "output directory {} appeared while fp8kit wrote it; pass --force to replace it",
                         paths_.display);
        fail(ErrorCode::kIo, "cannot rename {} to {}: {}", work_dir_, paths_.final_dir, io::errno_text(err));
      }
    }
  } catch (...) {
    mark_replaced(work_dir_);  // still the work directory: removed by the destructor
    throw;
  }
  committed_ = true;
  io::fsync_dir(paths_.parent);
}

// OUT exists and is replaced: exchanged with the work directory in one step, then the old tree,
// now under the work directory's name, is marked and removed. Without RENAME_EXCHANGE, OUT moves
// to OUT.old.* first: a kill between the two renames leaves no OUT (README: recovery).
void OutputDirectory::replace_existing() {
  if (rename_with(work_dir_, paths_.final_dir, RENAME_EXCHANGE)) {
    io::fsync_dir(paths_.parent);
    mark_replaced(work_dir_);
    remove_tree(work_dir_);  // the old OUT, or the link that OUT was
    return;
  }
  const int exchange_err = errno;
  FP8KIT_CHECK(flag_unsupported(exchange_err), ErrorCode::kIo, "cannot exchange {} with {}: {}", work_dir_,
               paths_.final_dir, io::errno_text(exchange_err));
  const std::string old_dir = paths_.parent + "/" + work_dir_name(paths_.old_prefix());
  FP8KIT_CHECK(::rename(paths_.final_dir.c_str(), old_dir.c_str()) == 0, ErrorCode::kIo,
               "cannot move the existing {} aside: {}", paths_.display, io::errno_text(errno));
  // Unmarked until the new tree is OUT: while there is no OUT, no run removes either tree.
  if (::rename(work_dir_.c_str(), paths_.final_dir.c_str()) != 0) {
    const int err = errno;
    ::rename(old_dir.c_str(), paths_.final_dir.c_str());
    fail(ErrorCode::kIo, "cannot rename {} to {}: {}", work_dir_, paths_.final_dir, io::errno_text(err));
  }
  io::fsync_dir(paths_.parent);
  mark_replaced(old_dir);
  remove_tree(old_dir);
}

std::vector<std::string> OutputDirectory::abandon_all() {
  g_mutex.lock();  // never unlocked: the process ends right after
  g_abandoned.store(true);
  std::vector<std::string> removed;
  for (OutputDirectory* out : g_live) {
    if (out->committed_ || out->work_dir_.empty()) continue;
    // A writer thread may still create a file in it: a few passes.
    for (int pass = 0; pass < 5 && !remove_tree(out->work_dir_); ++pass) {
    }
    removed.push_back(out->work_display());
    out->lock_->remove_file_before_exit();
  }
  return removed;
}

void OutputDirectory::set_exchange_supported_for_tests(bool supported) { g_exchange_supported.store(supported); }

}  // namespace fp8kit::convert
