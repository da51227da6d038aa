// Benchmark of `fp8kit quantize` (not a test): generates a ~2 GiB synthetic BF16 checkpoint
// (Qwen3-MoE names, 4 shards), warms the page cache, verifies one quantization per scheme with
// `fp8kit inspect`, then times the CLI five times per scheme as a child process and reports the
// median GB/s of BF16 input and the child's peak RSS against the targets of PERF_TARGETS.md
// (>= 1 GB/s from page cache; peak RSS <= 3 x largest tensor + 256 MiB).
//   bench_quantize_checkpoint FP8KIT_BINARY [WORK_DIR]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "convert/synthetic_checkpoint.h"
#include "core/parallel.h"
#include "fp8kit/checkpoint.h"

namespace fs = std::filesystem;

struct ChildRun {
  int exit_code = -1;
  double seconds = 0;
  double peak_rss_mib = 0;
};

ChildRun run_child(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  ChildRun r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.peak_rss_mib = usage.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
  return r;
}

void warm_page_cache(const std::string& dir) {
  std::vector<char> buffer(1 << 24);
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    while (in.read(buffer.data(), buffer.size()) || in.gcount() > 0) {
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FP8KIT_BINARY [WORK_DIR]\n", argv[0]);
    return 2;
  }
  const std::string fp8kit = fs::absolute(argv[1]).string();
  const std::string work = argc > 2 ? argv[2] : (fs::temp_directory_path() / "fp8kit-bench-quantize").string();
  fp8kit::convert::SyntheticModelSpec spec;
  spec.vocab_size = 32000;
  spec.hidden_size = 2048;
  spec.intermediate_size = 8192;
  spec.num_heads = 16;
  spec.num_kv_heads = 8;
  spec.head_dim = 128;
  spec.num_layers = 15;
  spec.moe_layers = {14};
  spec.num_experts = 8;
  spec.moe_intermediate_size = 1024;
  spec.max_shard_bytes = 600ull << 20;
  const std::string input = work + "/bf16";
  if (!fs::exists(input + "/config.json")) {
    fs::remove_all(work);
    std::printf("generating %.2f GiB BF16 checkpoint in %s\n", fp8kit::convert::synthetic_checkpoint_bytes(spec) / 1073741824.0,
                input.c_str());
    fp8kit::convert::write_synthetic_checkpoint(input, spec);
  }
  const fp8kit::Checkpoint checkpoint = fp8kit::Checkpoint::open(input);
  uint64_t total = 0, largest = 0;
  for (const std::string& name : checkpoint.tensor_names()) {
    const uint64_t bytes = checkpoint.info(name).data_end - checkpoint.info(name).data_begin;
    total += bytes;
    largest = std::max(largest, bytes);
  }
  const double rss_limit_mib = 3.0 * largest / 1048576.0 + 256.0;
  std::printf("input: %zu tensors, %.2f GiB in %zu shards, largest tensor %.1f MiB; %d CPU threads\n",
              checkpoint.tensor_names().size(), total / 1073741824.0, checkpoint.shard_files().size(),
              largest / 1048576.0, fp8kit::num_threads());
  warm_page_cache(input);

  std::printf("\n%-12s %9s %9s %9s %12s %12s  %s\n", "scheme", "median s", "GB/s", "target", "peak RSS MiB",
              "RSS limit", "verdict");
  bool all_ok = true;
  for (const char* scheme : {"per-tensor", "per-channel", "block"}) {
    const std::string out = work + "/" + scheme;
    fs::remove_all(out);
    ChildRun verify = run_child({fp8kit, "quantize", "-q", "--scheme", scheme, input, out});
    ChildRun inspect = run_child({fp8kit, "inspect", out});
    if (verify.exit_code != 0 || inspect.exit_code != 0) {
      std::printf("%-12s verification failed (quantize exit %d, inspect exit %d)\n", scheme, verify.exit_code,
                  inspect.exit_code);
      all_ok = false;
      continue;
    }
    std::vector<double> seconds;
    double peak = 0;
    for (int i = 0; i < 5; ++i) {
      fs::remove_all(out);  // a fresh output each time: replacing one is not part of the measure
      ::sync();             // earlier runs' dirty pages must not be written back during this one
      const ChildRun r = run_child({fp8kit, "quantize", "-q", "--scheme", scheme, input, out});
      seconds.push_back(r.seconds);
      peak = std::max(peak, r.peak_rss_mib);
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[2];
    const double gbps = total / median / 1e9;
    const bool ok = gbps >= 1.0 && peak <= rss_limit_mib;
    all_ok = all_ok && ok;
    std::printf("%-12s %9.3f %9.2f %9s %12.0f %12.0f  %s\n", scheme, median, gbps, ">= 1.00", peak, rss_limit_mib,
                ok ? "meets target" : "MISSES target");
  }
  return all_ok ? 0 : 1;
}
