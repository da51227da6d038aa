// Benchmark of the FP8 quantization kernels of include/fp8kit/ops/quant.h (not a test). Per op and
// shape: verify once, bit-exact against the CPU reference (first and last rows; all rows at decode
// sizes), then time with CUDA events (median, L2 flushed, inputs rotated) and report GB/s against
// the device-to-device copy measured in the same run. Table on stdout, every number in JSON.
//   bench_quant [[--json] PATH] [--flush read|write] [--target-ms MS] [--max-reps N] [--filter TEXT] [--quick]
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_common.h"
#include "bench_quant_cases.h"
#include "fp8kit/platform.h"

using namespace fp8kit;
using namespace fp8kit::bench;

namespace {

struct Cli {
  std::string json_path;
  FlushMode flush = FlushMode::kRead;
  TimerConfig timer;
  std::string filter;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [[--json] PATH] [--flush read|write] [--target-ms MS] [--max-reps N] [--filter TEXT] "
               "[--quick]\n  JSON default: $FP8KIT_RESULTS_DIR/bench_quant.json, else ./gpu-results/bench_quant.json\n",
               argv0);
  std::exit(2);
}

Cli parse(int argc, char** argv) {
  Cli cli;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (a == "--json") {
      cli.json_path = value();
    } else if (a == "--flush") {
      const std::string v = value();
      if (v != "read" && v != "write") usage(argv[0]);
      cli.flush = v == "read" ? FlushMode::kRead : FlushMode::kWrite;
    } else if (a == "--target-ms") {
      cli.timer.target_ms = std::stod(value());
    } else if (a == "--max-reps") {
      cli.timer.max_reps = std::stoi(value());
    } else if (a == "--filter") {
      cli.filter = value();
    } else if (a == "--quick") {
      cli.timer.target_ms = 10;
      cli.timer.max_reps = 200;
    } else if (!a.empty() && a[0] != '-' && cli.json_path.empty()) {
      cli.json_path = a;  // bench_quant RESULTS.json
    } else {
      usage(argv[0]);
    }
  }
  cli.json_path = results_path(cli.json_path, "bench_quant.json");
  return cli;
}

std::string fmt_target(const CaseResult& r) {
  return r.target_pct_copy > 0 ? fmt::format(">={:.0f}%", r.target_pct_copy) : "-";
}

void print_table(const std::vector<CaseResult>& results, const CopyCeiling& copy) {
  fmt::print("\n{:<22} {:>12} {:>9} {:>10} {:>9} {:>7} {:>7} {:>7} {:>9} {}\n", "kernel", "shape", "MB moved",
             "median us", "GB/s", "%copy", "target", "verdict", "b2b us", "verify");
  std::string last_kernel;
  for (const CaseResult& r : results) {
    if (!last_kernel.empty() && r.kernel != last_kernel) fmt::print("\n");
    last_kernel = r.kernel;
    if (!r.error.empty()) {
      fmt::print("{:<22} {:>12} error: {}\n", r.kernel, r.shape, r.error);
      continue;
    }
    fmt::print("{:<22} {:>12} {:>9.1f} {:>10.2f} {:>9.0f} {:>6.1f}% {:>7} {:>7} {:>9} {}\n", r.kernel, r.shape,
               r.bytes() / 1e6, r.timing.median_us, r.gbps, r.pct_copy, fmt_target(r), r.verdict,
               r.b2b_us > 0 ? fmt::format("{:.2f}", r.b2b_us) : "-", r.verify_ok ? "ok" : "FAIL " + r.verify_note);
  }
  fmt::print("\ncopy ceiling: cudaMemcpyAsync 1 GiB D2D, {:.1f} us median, {:.0f} GB/s (read + write)\n",
             copy.timing.median_us, copy.gbps);
  fmt::print(
      "GB/s = (bytes in + bytes out incl. scales) / median; %copy = GB/s over that ceiling; b2b us = back-to-back "
      "calls without flush (launch-bound at decode sizes)\n");
}

void write_json(const Cli& cli, const std::vector<CaseResult>& results, const CopyCeiling& copy, double wall_s) {
  nlohmann::json j;
  j["benchmark"] = "bench_quant";
  j["time_utc"] = iso_time_utc();
  add_run_info(j);
  j["method"] = {{"flush", cli.flush == FlushMode::kRead ? "read" : "write"},
                 {"flush_bytes_factor_of_l2", 2},
                 {"target_ms", cli.timer.target_ms},
                 {"min_reps", cli.timer.min_reps},
                 {"max_reps", cli.timer.max_reps},
                 {"statistic", "median of per-launch CUDA event times"}};
  j["copy"] = copy_json(copy);
  nlohmann::json cases = nlohmann::json::array();
  for (const CaseResult& r : results) {
    nlohmann::json c = {{"kernel", r.kernel},
                        {"description", r.description},
                        {"shape", r.shape},
                        {"m", r.m},
                        {"k", r.k},
                        {"decode", r.decode},
                        {"input_copies", r.input_copies},
                        {"bytes_in", r.bytes_in},
                        {"bytes_out", r.bytes_out},
                        {"verified", r.verify_ok},
                        {"verify_rows", r.verify_rows},
                        {"verify_note", r.verify_note},
                        {"target_pct_copy", r.target_pct_copy > 0 ? nlohmann::json(r.target_pct_copy) : nlohmann::json()},
                        {"verdict", r.verdict}};
    if (!r.error.empty()) {
      c["error"] = r.error;
    } else {
      c.update(timing_json(r.timing));
      c["gbps"] = r.gbps;
      c["pct_copy"] = r.pct_copy;
      c["b2b_us"] = r.b2b_us > 0 ? nlohmann::json(r.b2b_us) : nlohmann::json();
    }
    cases.push_back(std::move(c));
  }
  j["cases"] = std::move(cases);
  j["wall_s"] = wall_s;
  write_json_file(j, cli.json_path);
  fmt::print("wrote {}\n", cli.json_path);
}

}  // namespace

int main(int argc, char** argv) {
  const Cli cli = parse(argc, argv);
  if (cuda_device_count() == 0) {
    std::printf("bench_quant: no CUDA device: skipped\n");
    return 77;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    set_bench_stream(stream);
    L2Flusher flusher(get_l2_cache_bytes(0), cli.flush);
    Timer timer(stream, flusher, cli.timer);
    fmt::print("bench_quant on {} (sm_{}, {} SMs, L2 {:.1f} MiB); flush: {} {:.0f} MiB before each timed launch\n",
               get_device_name(0), get_device_capability(0).as_int(), get_cu_count(0),
               get_l2_cache_bytes(0) / 1048576.0, cli.flush == FlushMode::kRead ? "read" : "write",
               flusher.bytes() / 1048576.0);
    const CopyCeiling copy = measure_copy(timer, stream);
    fmt::print("copy ceiling: {:.0f} GB/s\n", copy.gbps);
    std::fflush(stdout);

    CaseRunner runner(stream, timer, copy, get_l2_cache_bytes(0));
    std::vector<CaseResult> results = runner.run_all(cli.filter);
    std::stable_sort(results.begin(), results.end(),
                     [](const CaseResult& a, const CaseResult& b) { return a.kernel_order < b.kernel_order; });
    print_table(results, copy);
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    write_json(cli, results, copy, wall_s);
    fmt::print("wall time {:.1f} s\n", wall_s);
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    const bool all_ok = std::all_of(results.begin(), results.end(),
                                    [](const CaseResult& r) { return r.verify_ok && r.error.empty(); });
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_quant: %s\n", e.what());
    return 1;
  }
}
