// OutputDirectory (convert/output_directory.h): the OUT-versus-IN guard on canonical paths, the
// per-output lock, the work directory of each run, the atomic commit (exchange, and the
// two-rename fallback), cleanup on every way out, leftovers of killed runs removed only when
// they carry fp8kit's marker, and abandon_all for the CLI's interrupt handler.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "convert/output_directory.h"
#include "convert/work_dirs.h"
#include "expect_error.h"
#include "io_test_util.h"
#include "test_dirs.h"

namespace fp8kit::convert {
namespace {

namespace fs = std::filesystem;
using fp8kit::testing::expect_error_containing;
using fp8kit::testing::expect_invalid;
using fp8kit::testing::read_bytes;
using fp8kit::testing::write_bytes;

// The entries of `dir`, sorted.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Tree {
  std::string root, in;
};

Tree make_tree() {
  Tree t{fp8kit::testing::scratch_dir(), ""};
  t.in = t.root + "/a/models/q";
  fs::create_directories(t.in);
  write_bytes(t.in + "/config.json", "{}");
  write_bytes(t.root + "/a/other.txt", "keep");
  return t;
}

TEST(OutputDirectory, RefusesTheInputAndItsAncestors) {
  const Tree t = make_tree();
  for (const bool force : {false, true}) {
    for (const std::string& out : {t.in, t.in + "/", t.in + "/.", t.root + "/a/models/../models/q"}) {
      expect_invalid([&] { OutputDirectory(out, force, t.in); },
                     "output directory " + (out.back() == '/' ? out.substr(0, out.size() - 1) : out) +
                         " is the input directory");
    }
    for (const std::string& out : {t.root + "/a", t.root + "/a/models", t.root}) {
      expect_invalid([&] { OutputDirectory(out, force, t.in); },
                     "output directory " + out + " contains the input directory " + t.in +
                         ": replacing it would delete the input");
    }
  }
  // Through symbolic links: OUT a link to IN's parent, IN named through a link.
  fs::create_symlink(t.root + "/a", t.root + "/link-to-a");
  expect_error_containing([&] { OutputDirectory(t.root + "/link-to-a", true, t.in); }, ErrorCode::kInvalidArgument,
                          "contains the input directory");
  expect_error_containing([&] { OutputDirectory(t.root + "/a", true, t.root + "/link-to-a/models/q"); },
                          ErrorCode::kInvalidArgument, "contains the input directory");
  expect_error_containing([&] { OutputDirectory(t.root + "/link-to-a/models/q", true, t.in); },
                          ErrorCode::kInvalidArgument, "is the input directory");
  EXPECT_EQ(read_bytes(t.root + "/a/other.txt"), "keep");
  EXPECT_EQ(entries(t.root + "/a/models"), std::vector<std::string>{"q"});
}

TEST(OutputDirectory, OutputInsideTheInputIsAllowed) {
  const Tree t = make_tree();
  {
    OutputDirectory out(t.in + "/fp8", false, t.in);
    write_bytes(out.path("x"), "new");
    const std::string in_real = fs::canonical(t.in).string();
    EXPECT_TRUE(out.paths().is_own_entry(in_real, "fp8"));
    EXPECT_TRUE(out.paths().is_own_entry(in_real, ".fp8.lock"));
    EXPECT_TRUE(out.paths().is_own_entry(in_real, fs::path(out.work_dir()).filename().string()));
    EXPECT_FALSE(out.paths().is_own_entry(in_real, "config.json"));
    EXPECT_FALSE(out.paths().is_own_entry(t.root, "fp8"));
    out.commit();
  }
  EXPECT_EQ(entries(t.in), (std::vector<std::string>{"config.json", "fp8"}));
  EXPECT_EQ(entries(t.in + "/fp8"), std::vector<std::string>{"x"});
}

TEST(OutputDirectory, WorkDirectoryIsUniqueMarkedAndBecomesTheOutput) {
  const Tree t = make_tree();
  const std::string final_dir = t.root + "/out";
  OutputDirectory out(final_dir, false, t.in);
  const std::string work = fs::path(out.work_dir()).filename().string();
  EXPECT_TRUE(is_work_dir_name("out.partial.", work)) << work;
  EXPECT_TRUE(has_marker(out.work_dir()));
  EXPECT_EQ(out.work_display(), t.root + "/" + work);
  EXPECT_TRUE(fs::exists(t.root + "/.out.lock"));
  write_bytes(out.path("model.safetensors"), "weights");
  EXPECT_FALSE(fs::exists(final_dir));
  out.commit();
  EXPECT_EQ(entries(final_dir), std::vector<std::string>{"model.safetensors"});  // no marker left in OUT
  EXPECT_FALSE(fs::exists(out.work_dir()));
}

TEST(OutputDirectory, ExistingOutputNeedsForceAndIsReplacedAtCommitOnly) {
  const Tree t = make_tree();
  const std::string final_dir = t.root + "/out";
  fs::create_directories(final_dir);
  write_bytes(final_dir + "/old.txt", "old");
  expect_invalid([&] { OutputDirectory(final_dir, false, t.in); },
                 "output directory " + final_dir + " already exists; pass --force to replace it");
  {
    OutputDirectory out(final_dir, true, t.in);
    write_bytes(out.path("new.txt"), "new");
    EXPECT_EQ(entries(final_dir), std::vector<std::string>{"old.txt"});  // untouched until commit
    out.commit();
  }
  EXPECT_EQ(entries(final_dir), std::vector<std::string>{"new.txt"});
  EXPECT_EQ(entries(t.root), (std::vector<std::string>{"a", "out"}));  // no old tree, no lock file left
  write_bytes(t.root + "/file", "x");
  expect_invalid([&] { OutputDirectory(t.root + "/file", true, t.in); },
                 "output " + t.root + "/file exists and is not a directory");
  fs::create_symlink("nowhere", t.root + "/dangling");
  expect_invalid([&] { OutputDirectory(t.root + "/dangling", true, t.in); },
                 "output " + t.root + "/dangling is a dangling symbolic link");
}

TEST(OutputDirectory, ForcedOutputThatIsALinkReplacesTheLinkNotItsTarget) {
  const Tree t = make_tree();
  fs::create_directories(t.root + "/target");
  write_bytes(t.root + "/target/mine.txt", "mine");
  fs::create_directory_symlink(t.root + "/target", t.root + "/out");
  OutputDirectory out(t.root + "/out", true, t.in);
  write_bytes(out.path("new.txt"), "new");
  out.commit();
  EXPECT_FALSE(fs::is_symlink(t.root + "/out"));
  EXPECT_EQ(entries(t.root + "/out"), std::vector<std::string>{"new.txt"});
  EXPECT_EQ(entries(t.root + "/target"), std::vector<std::string>{"mine.txt"});
}

TEST(OutputDirectory, TwoRenameFallbackWhereExchangeIsMissing) {
  const Tree t = make_tree();
  const std::string final_dir = t.root + "/out";
  fs::create_directories(final_dir);
  write_bytes(final_dir + "/old.txt", "old");
  OutputDirectory::set_exchange_supported_for_tests(false);
  {
    OutputDirectory out(final_dir, true, t.in);
    write_bytes(out.path("new.txt"), "new");
    out.commit();
  }
  OutputDirectory::set_exchange_supported_for_tests(true);
  EXPECT_EQ(entries(final_dir), std::vector<std::string>{"new.txt"});
  EXPECT_EQ(entries(t.root), (std::vector<std::string>{"a", "out"}));
}

TEST(OutputDirectory, DroppedUncommittedLeavesNothing) {
  const Tree t = make_tree();
  try {
    OutputDirectory out(t.root + "/out", false, t.in);
    fs::create_directories(out.path("sub/deeper"));
    write_bytes(out.path("sub/deeper/x"), "x");
    throw Error(ErrorCode::kIo, "a failure half way");
  } catch (const Error&) {
  }
  EXPECT_EQ(entries(t.root), std::vector<std::string>{"a"});
}

TEST(OutputDirectory, SecondRunToTheSameOutputFailsAtOnce) {
  const Tree t = make_tree();
  const std::string final_dir = t.root + "/out";
  {
    OutputDirectory first(final_dir, false, t.in);
    expect_error_containing([&] { OutputDirectory second(final_dir, false, t.in); }, ErrorCode::kIo,
                            final_dir + ": another fp8kit run is writing this output (it holds " + t.root +
                                "/.out.lock); wait for it to end or choose another output directory");
    EXPECT_TRUE(fs::exists(first.work_dir()));  // the second run touched nothing of the first
    first.commit();
  }
  OutputDirectory third(final_dir, true, t.in);  // the lock is free again
}

TEST(OutputDirectory, LockHeldByAnotherProcessIsRespected) {
  const Tree t = make_tree();
  const std::string lock = t.root + "/.out.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0666);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  expect_error_containing([&] { OutputDirectory(t.root + "/out", false, t.in); }, ErrorCode::kIo,
                          "another fp8kit run is writing this output");
  ::close(fd);
  // A lock file that is not fp8kit's (here: empty) serves as the lock but stays as it was.
  { OutputDirectory out(t.root + "/out", false, t.in); }
  EXPECT_TRUE(fs::exists(lock));
  EXPECT_EQ(read_bytes(lock), "");
}

TEST(OutputDirectory, LeftoversOfKilledRunsAreRemovedOnlyWhenMarked) {
  const Tree t = make_tree();
  const auto make = [&](const std::string& name, bool marked) {
    fs::create_directories(t.root + "/" + name + "/sub");
    write_bytes(t.root + "/" + name + "/sub/data", "data");
    if (marked) write_marker(t.root + "/" + name);
  };
  make("out.partial.123.0badcafe", true);  // a run killed while writing
  make("out.old.456.deadbeef", true);      // a run killed between the two renames
  make("out.partial.789.abcdef01", false);  // the name, but no marker: not provably fp8kit's
  make("out.partial", true);                // the user's: not the pattern
  write_bytes(t.root + "/out.partial.1.12345678x", "user file");
  fs::create_directories(t.root + "/out.partial.5.00000000");  // killed before its marker: empty
  OutputDirectory out(t.root + "/out", false, t.in);
  EXPECT_EQ(out.notes(), (std::vector<std::string>{"removed out.old.456.deadbeef, left by an interrupted fp8kit run",
                                                   "removed out.partial.123.0badcafe, left by an interrupted fp8kit run",
                                                   "removed out.partial.5.00000000, left by an interrupted fp8kit run"}));
  EXPECT_FALSE(fs::exists(t.root + "/out.partial.123.0badcafe"));
  EXPECT_FALSE(fs::exists(t.root + "/out.old.456.deadbeef"));
  EXPECT_FALSE(fs::exists(t.root + "/out.partial.5.00000000"));
  EXPECT_EQ(read_bytes(t.root + "/out.partial.789.abcdef01/sub/data"), "data");
  EXPECT_EQ(read_bytes(t.root + "/out.partial/sub/data"), "data");
  EXPECT_EQ(read_bytes(t.root + "/out.partial.1.12345678x"), "user file");
}

TEST(OutputDirectory, RemoveTreeTakesTheMarkerLast) {
  const std::string dir = fp8kit::testing::scratch_dir() + "/w";
  fs::create_directories(dir + "/a/b");
  write_bytes(dir + "/a/b/c", "c");
  write_marker(dir);
  fs::create_symlink("/", dir + "/link-to-root");  // removed, never followed
  EXPECT_TRUE(remove_tree(dir));
  EXPECT_FALSE(fs::exists(dir));
}

TEST(OutputDirectory, AbandonAllRemovesTheWorkDirectory) {
  // abandon_all leaves every output refusing to go on, so it runs in a child process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Tree t = make_tree();
  EXPECT_EXIT(
      {
        OutputDirectory out(t.root + "/out", false, t.in);
        write_bytes(out.path("x"), "x");
        const std::vector<std::string> removed = OutputDirectory::abandon_all();
        const bool ok = removed == std::vector<std::string>{out.work_display()} && !fs::exists(out.work_dir()) &&
                        !fs::exists(t.root + "/.out.lock");
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EQ(entries(t.root), std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace fp8kit::convert
