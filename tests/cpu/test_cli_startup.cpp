// What a CPU-only command of the fp8kit binary costs to start: its peak resident memory (the
// child's ru_maxrss). In a CUDA build nothing of CUDA may be loaded before a CUDA device is used:
// linked, cuBLASLt alone made every command, `--version` included, peak at ~210 MiB
// (src/core/cuda/cublaslt_api.h).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "convert/synthetic_checkpoint.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

// A CPU command's own memory (code, heap, stacks of its threads) is a few MiB; 64 MiB leaves
// room for the allocator and the page cache of a small checkpoint, and is far below the 210 MiB
// that loading the CUDA libraries at start-up cost.
constexpr long kStartupLimitKiB = 64 * 1024;

struct ChildUsage {
  int exit_code = -1;
  long max_rss_kib = -1;
};

// Runs the fp8kit binary with `args` (stdout and stderr to /dev/null) and returns its exit code
// and peak resident set from wait4, which reports the child alone (no shell in between).
ChildUsage run_cli_measured(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string path = FP8KIT_CLI_PATH;
  argv.push_back(path.data());
  std::vector<std::string> copies = args;
  for (std::string& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  ChildUsage usage;
  const pid_t pid = fork();
  if (pid < 0) return usage;
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  if (wait4(pid, &status, 0, &ru) != pid) return usage;
  usage.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  usage.max_rss_kib = ru.ru_maxrss;  // KiB on Linux
  return usage;
}

TEST(CliStartup, VersionStartsInAFewMiB) {
  for (const char* arg : {"--version", "--help"}) {
    const ChildUsage u = run_cli_measured({arg});
    EXPECT_EQ(u.exit_code, 0) << arg;
    EXPECT_GT(u.max_rss_kib, 0) << arg;
    EXPECT_TRUE(u.max_rss_kib <= kStartupLimitKiB) << arg << ": peak RSS " << u.max_rss_kib << " KiB";
  }
}

TEST(CliStartup, CpuInspectAndQuantizeLoadNoCuda) {
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  ChildUsage u = run_cli_measured({"quantize", "-q", root + "/bf16", root + "/fp8"});
  EXPECT_EQ(u.exit_code, 0);
  // The synthetic checkpoint is small (under 10 MiB): quantizing it on the CPU stays in the bound.
  EXPECT_TRUE(u.max_rss_kib > 0 && u.max_rss_kib <= kStartupLimitKiB) << "quantize: peak RSS " << u.max_rss_kib << " KiB";
  u = run_cli_measured({"inspect", root + "/fp8"});
  EXPECT_EQ(u.exit_code, 0);
  EXPECT_TRUE(u.max_rss_kib > 0 && u.max_rss_kib <= kStartupLimitKiB) << "inspect: peak RSS " << u.max_rss_kib << " KiB";
}

}  // namespace
}  // namespace fp8kit
