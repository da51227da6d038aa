// The fp8kit binary against the "nothing is lost" reproducers of the reliability probe: an OUT
// that contains IN (F8), a user's OUT.partial (F7), two runs to one OUT (F2), leftovers of killed
// runs (F13), a checkpoint without tensors (F16), hf_quant_config.json as a FIFO (F6), errors
// that named the work directory, and Ctrl-C / kill -9 in the middle of a run.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "convert/synthetic_checkpoint.h"
#include "convert/work_dirs.h"
#include "fp8kit/checkpoint.h"
#include "io_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::run_cli;
using testing::write_bytes;

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool has_work_dir(const std::string& dir, const std::string& out_name) {
  for (const std::string& name : entries(dir)) {
    if (convert::is_work_dir_name(out_name + ".partial.", name)) return true;
  }
  return false;
}

// A BF16 checkpoint of one [rows, cols] down_proj: big enough that quantizing it takes a while.
std::string one_weight(const std::string& dir, int64_t rows, int64_t cols) {
  fs::create_directories(dir);
  Tensor w = Tensor::empty({rows, cols}, DType::kBF16);
  w.fill_bytes_(0x3f);
  save_safetensors(dir + "/model.safetensors", {{"model.layers.0.mlp.down_proj.weight", w}});
  write_bytes(dir + "/config.json", R"({"architectures": ["Qwen3ForCausalLM"]})");
  return dir;
}

// Starts `fp8kit ARGS...` with its output in `log`; returns the pid.
pid_t spawn_cli(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv{const_cast<char*>(FP8KIT_CLI_PATH)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(FP8KIT_CLI_PATH, argv.data());
    std::_Exit(127);
  }
  return pid;
}

// Waits until the run to `out_name` in `dir` has made its work directory; false if it ended first.
bool wait_for_work_dir(pid_t pid, const std::string& dir, const std::string& out_name) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (has_work_dir(dir, out_name)) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CliOutput, ForceOntoAParentOfTheInputIsRefused) {  // F8
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/a/models/q", {});
  write_bytes(root + "/a/other.txt", "keep");
  const auto r = run_cli("quantize -q --force " + root + "/a/models/q " + root + "/a");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "fp8kit: error: output directory " + root + "/a contains the input directory " + root +
                          "/a/models/q: replacing it would delete the input\n");
  EXPECT_EQ(read_bytes(root + "/a/other.txt"), "keep");
  EXPECT_TRUE(fs::exists(root + "/a/models/q/model.safetensors"));
  EXPECT_EQ(run_cli("dequantize -q --force " + root + "/a/models/q " + root).exit_code, 1);
  EXPECT_EQ(entries(root), std::vector<std::string>{"a"});
}

TEST(CliOutput, AUsersPartialDirectoryIsLeftAlone) {  // F7
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  fs::create_directories(root + "/res.partial");
  write_bytes(root + "/res.partial/notes.txt", "mine");
  write_bytes(root + "/out.partial", "a file of mine");
  ASSERT_EQ(run_cli("quantize -q " + root + "/bf16 " + root + "/res").exit_code, 0);
  ASSERT_EQ(run_cli("quantize -q " + root + "/bf16 " + root + "/out").exit_code, 0);
  EXPECT_EQ(read_bytes(root + "/res.partial/notes.txt"), "mine");
  EXPECT_EQ(read_bytes(root + "/out.partial"), "a file of mine");
  EXPECT_EQ(entries(root), (std::vector<std::string>{"bf16", "out", "out.partial", "res", "res.partial"}));
}

TEST(CliOutput, ASecondRunToTheSameOutputFailsAtOnceNamingIt) {  // F2
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  // The lock a first run holds, here taken by the test itself.
  const int fd = ::open((root + "/.out.lock").c_str(), O_RDWR | O_CREAT, 0666);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  auto r = run_cli("quantize -q " + root + "/bf16 " + root + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "fp8kit: error: " + root + "/out: another fp8kit run is writing this output (it holds " + root +
                          "/.out.lock); wait for it to end or choose another output directory\n");
  ::close(fd);
  // Two real runs at once: one writes OUT, the other fails; OUT is complete either way.
  fs::remove(root + "/.out.lock");
  const std::string big = one_weight(root + "/big", 2048, 4096);
  const pid_t a = spawn_cli({"quantize", "-q", big, root + "/out"}, root + "/a.log");
  ASSERT_TRUE(wait_for_work_dir(a, root, "out"));
  ::kill(a, SIGSTOP);  // so that the second run surely starts while the first one writes
  r = run_cli("quantize -q " + big + " " + root + "/out");
  ::kill(a, SIGCONT);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("another fp8kit run is writing this output"), std::string::npos) << r.output;
  EXPECT_EQ(wait_exit_code(a), 0) << read_bytes(root + "/a.log");
  EXPECT_EQ(Checkpoint::open(root + "/out").tensor_names().size(), 2u);  // the weight and its scale
  EXPECT_EQ(entries(root), (std::vector<std::string>{"a.log", "bf16", "big", "out"}));
}

TEST(CliOutput, InterruptRemovesTheWorkDirectory) {
  const std::string root = testing::scratch_dir();
  const std::string big = one_weight(root + "/big", 4096, 4096);
  const pid_t pid = spawn_cli({"quantize", "-q", big, root + "/out"}, root + "/run.log");
  ASSERT_TRUE(wait_for_work_dir(pid, root, "out")) << read_bytes(root + "/run.log");
  // Stopped, the run cannot finish before the signal is taken when it continues.
  ::kill(pid, SIGSTOP);
  ::kill(pid, SIGINT);
  ::kill(pid, SIGCONT);
  EXPECT_EQ(wait_exit_code(pid), 130);
  const std::string log = read_bytes(root + "/run.log");
  EXPECT_EQ(log.rfind("\nfp8kit: interrupted (SIGINT); removed the unfinished output " + root + "/out.partial.", 0), 0u)
      << log;
  EXPECT_EQ(entries(root), (std::vector<std::string>{"big", "run.log"}));
}

TEST(CliOutput, KillNineLeavesAWorkDirectoryTheNextRunRemoves) {  // F13, the kill -9 row
  const std::string root = testing::scratch_dir();
  const std::string big = one_weight(root + "/big", 4096, 4096);
  ASSERT_EQ(run_cli("quantize -q " + big + " " + root + "/out").exit_code, 0);
  const pid_t pid = spawn_cli({"quantize", "-q", "--force", big, root + "/out"}, root + "/run.log");
  ASSERT_TRUE(wait_for_work_dir(pid, root, "out"));
  ::kill(pid, SIGSTOP);
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGKILL);
  EXPECT_TRUE(has_work_dir(root, "out"));
  EXPECT_EQ(Checkpoint::open(root + "/out").tensor_names().size(), 2u);  // the old OUT, whole
  const auto r = run_cli("quantize -q --force " + big + " " + root + "/out");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(", left by an interrupted fp8kit run"), std::string::npos) << r.output;
  EXPECT_EQ(entries(root), (std::vector<std::string>{"big", "out", "run.log"}));
}

TEST(CliOutput, CheckpointWithoutTensorsIsRefused) {  // F16
  const std::string root = testing::scratch_dir();
  fs::create_directories(root + "/e");
  write_bytes(root + "/e/config.json", R"({"architectures": ["Qwen3ForCausalLM"]})");
  write_bytes(root + "/e/model.safetensors", std::string("\x02\0\0\0\0\0\0\0{}", 10));
  auto r = run_cli("quantize -q " + root + "/e " + root + "/eo");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "fp8kit: error: " + root + "/e: the checkpoint holds no tensors (its shards: model.safetensors)\n");
  EXPECT_FALSE(fs::exists(root + "/eo"));
  // An empty shard next to one with tensors is written through: the output has the input's files.
  fs::rename(root + "/e/model.safetensors", root + "/e/a.safetensors");
  one_weight(root + "/w", 256, 256);
  fs::rename(root + "/w/model.safetensors", root + "/e/b.safetensors");
  r = run_cli("quantize -q " + root + "/e " + root + "/eo");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(entries(root + "/eo"), (std::vector<std::string>{"a.safetensors", "b.safetensors", "config.json"}));
  EXPECT_EQ(run_cli("inspect " + root + "/eo").exit_code, 0);
}

TEST(CliOutput, HfQuantConfigFifoIsAnErrorNotAHang) {  // F6
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  ASSERT_EQ(::mkfifo((root + "/bf16/hf_quant_config.json").c_str(), 0600), 0);
  for (const std::string& cmd : {"inspect " + root + "/bf16", "dequantize -q " + root + "/bf16 " + root + "/dq"}) {
    const auto r = run_cli(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_EQ(r.output, "fp8kit: error: " + root + "/bf16/hf_quant_config.json: a FIFO (named pipe), not a regular file\n");
  }
  fs::remove(root + "/bf16/hf_quant_config.json");
  fs::create_symlink("/dev/zero", root + "/bf16/hf_quant_config.json");
  const auto r = run_cli("inspect " + root + "/bf16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("hf_quant_config.json: a symbolic link to /dev/zero, outside the checkpoint directory"),
            std::string::npos)
      << r.output;
}

TEST(CliOutput, ErrorsNameTheInputNotTheWorkDirectory) {
  const std::string root = testing::scratch_dir();
  fs::create_directories(root + "/in");
  write_bytes(root + "/in/config.json", R"({"architectures": ["Qwen3ForCausalLM"]})");
  // A weight of shape [2^62, 0]: no bytes, but its per-channel scale would have 2^62 elements.
  write_bytes(root + "/in/model.safetensors",
              testing::safetensors_bytes(R"({"model.layers.0.mlp.down_proj.weight":{"dtype":"BF16","shape":[4611686018427387904,0],"data_offsets":[0,0]}})"));
  const auto r = run_cli("quantize -q --scheme per-channel " + root + "/in " + root + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output.rfind("fp8kit: error: " + root + "/in/model.safetensors: output " + root + "/out/model.safetensors: ", 0),
            0u)
      << r.output;
  EXPECT_EQ(r.output.find(".partial"), std::string::npos) << r.output;
  EXPECT_EQ(entries(root), std::vector<std::string>{"in"});
}

}  // namespace
}  // namespace fp8kit
