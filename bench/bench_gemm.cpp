// Benchmark of scaled_mm (include/fp8kit/ops/gemm.h), not a test. Per scaling, shape and M: verify
// once (slice against the CPU reference, every output element written), then time with CUDA
// events (median, L2 flushed, inputs rotated); report TFLOP/s, weight bytes / time against the
// device-to-device copy of the same run, and a BF16 cuBLASLt GEMM of the same shapes.
//   bench_gemm [[--json] PATH] [--m LIST] [--shapes LIST] [--scalings LIST] [--filter TEXT] [--quick] ...
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "bench_gemm_cases.h"
#include "fp8kit/platform.h"

using namespace fp8kit;
using namespace fp8kit::bench;

namespace {

struct Cli {
  std::string json_path;
  FlushMode flush = FlushMode::kRead;
  TimerConfig timer{25.0, 10, 1000, 3};
  GemmRunConfig run;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [[--json] PATH] [--m 1,16,...] [--shapes NxK|MODEL,...] [--scalings KEY,...] "
               "[--filter TEXT]\n"
               "          [--flush read|write] [--target-ms MS] [--min-reps N] [--max-reps N] [--quick] [--no-b2b]\n"
               "          [--no-graphs]\n"
               "          [--block-act-scales tma|colmajor] [--fast-accum]\n"
               "  M default: 1,16,64,128,512,2048,8192. Shapes: NxK pairs or models llama3-8b, llama3-70b, "
               "deepseek-v3\n"
               "  (default: all eleven of PERF_TARGETS). Scalings: per_tensor, per_token_channel, block, bf16,\n"
               "  weight_only, weight_only_block (default: all).\n"
               "  --filter keeps cases whose \"SCALING NxK M=m\" contains TEXT.\n"
               "  --block-act-scales: the block case's activation scales from per_token_group_quant, column-major\n"
               "  with each column padded to a multiple of 4 rows (tma, default) or unpadded (colmajor).\n"
               "  --fast-accum: per-tensor and per-token x per-channel without promotion (ScaledMmOptions::fast_accum).\n"
               "  JSON default: $FP8KIT_RESULTS_DIR/bench_gemm.json, else ./gpu-results/bench_gemm.json\n",
               argv0);
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<GemmShape> parse_shapes(const std::string& list, const char* argv0) {
  std::vector<GemmShape> shapes;
  for (const std::string& item : split(list)) {
    bool matched = false;
    for (const GemmShape& s : default_shapes()) {
      if (s.model == item || fmt::format("{}x{}", s.n, s.k) == item) {
        shapes.push_back(s);
        matched = true;
      }
    }
    if (matched) continue;
    const size_t x = item.find('x');
    if (x == std::string::npos) usage(argv0);
    GemmShape s;
    s.model = "custom";
    s.n = std::stoll(item.substr(0, x));
    s.k = std::stoll(item.substr(x + 1));
    if (s.n < 1 || s.k < 1) usage(argv0);
    shapes.push_back(s);
  }
  return shapes;
}

Cli parse(int argc, char** argv) {
  Cli cli;
  cli.run.ms = default_ms();
  cli.run.shapes = default_shapes();
  cli.run.scalings = all_scalings();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (a == "--json") {
      cli.json_path = value();
    } else if (a == "--m") {
      cli.run.ms.clear();
      for (const std::string& m : split(value())) cli.run.ms.push_back(std::stoll(m));
      if (cli.run.ms.empty()) usage(argv[0]);
    } else if (a == "--shapes") {
      cli.run.shapes = parse_shapes(value(), argv[0]);
    } else if (a == "--scalings") {
      cli.run.scalings = split(value());
      for (const std::string& s : cli.run.scalings) {
        if (std::find(all_scalings().begin(), all_scalings().end(), s) == all_scalings().end()) usage(argv[0]);
      }
    } else if (a == "--filter") {
      cli.run.filter = value();
    } else if (a == "--flush") {
      const std::string v = value();
      if (v != "read" && v != "write") usage(argv[0]);
      cli.flush = v == "read" ? FlushMode::kRead : FlushMode::kWrite;
    } else if (a == "--target-ms") {
      cli.timer.target_ms = std::stod(value());
    } else if (a == "--min-reps") {
      cli.timer.min_reps = std::stoi(value());
    } else if (a == "--max-reps") {
      cli.timer.max_reps = std::stoi(value());
    } else if (a == "--quick") {
      cli.timer.target_ms = 8;
      cli.timer.min_reps = 5;
      cli.timer.max_reps = 200;
    } else if (a == "--block-act-scales") {
      const std::string v = value();
      if (v != "tma" && v != "colmajor") usage(argv[0]);
      cli.run.block_scales_tma_aligned = v == "tma";
    } else if (a == "--no-b2b") {
      cli.run.back_to_back = false;
    } else if (a == "--no-graphs") {
      cli.run.graphs = false;
    } else if (a == "--fast-accum") {
      cli.run.fast_accum = true;
    } else if (!a.empty() && a[0] != '-' && cli.json_path.empty()) {
      cli.json_path = a;  // bench_gemm RESULTS.json
    } else {
      usage(argv[0]);
    }
  }
  cli.json_path = results_path(cli.json_path, "bench_gemm.json");
  return cli;
}

std::string us_text(double v) { return v >= 100 ? fmt::format("{:.1f}", v) : fmt::format("{:.2f}", v); }

void print_table(const std::vector<GemmCaseResult>& results, const CopyCeiling& copy) {
  fmt::print("\n{:<18} {:<12} {:>12} {:>5} {:>10} {:>8} {:>6} {:>8} {:>6} {:>6} {:>13} {:>7} {:>8} {:>8} {}\n",
             "scaling", "model", "N x K", "M", "median us", "TF/s", "%peak", "w TB/s", "%copy", "%read", "target", "verdict",
             "b2b us", "graph us", "verify (max err/tol, rel L2)");
  std::string last;
  for (const GemmCaseResult& r : results) {
    if (!last.empty() && r.scaling != last) fmt::print("\n");
    last = r.scaling;
    const std::string nk = fmt::format("{} x {}", r.n, r.k);
    if (!r.error.empty()) {
      fmt::print("{:<18} {:<12} {:>12} {:>5} error: {}\n", r.scaling, r.model, nk, r.m, r.error);
      continue;
    }
    const std::string verify = r.verify_ok ? fmt::format("ok ({:.2f}, {:.1e})", r.max_err_over_tol, r.rel_l2)
                                           : "FAIL " + r.verify_note;
    const std::string read = r.read_us > 0 ? fmt::format("{:.1f}%", r.pct_read) : "-";
    const std::string graph = r.graph_us > 0 ? us_text(r.graph_us) : r.graph_error.empty() ? "-" : "failed";
    fmt::print("{:<18} {:<12} {:>12} {:>5} {:>10} {:>8.1f} {:>5.1f}% {:>8.2f} {:>5.1f}% {:>6} {:>13} {:>7} {:>8} {:>8} {}\n",
               r.scaling, r.model, nk, r.m, us_text(r.timing.median_us), r.tflops, r.pct_peak, r.weight_gbps / 1e3,
               r.pct_copy, read, r.target.empty() ? "-" : r.target, r.verdict, r.b2b_us > 0 ? us_text(r.b2b_us) : "-",
               graph, verify);
  }
  fmt::print("\ncopy ceiling: cudaMemcpyAsync 1 GiB D2D, {:.1f} us median, {:.0f} GB/s (read + write)\n",
             copy.timing.median_us, copy.gbps);
  fmt::print(
      "TF/s = 2MNK / median; %peak of {:.0f} TF/s (FP8) or {:.1f} TF/s (BF16) dense; w TB/s = weight bytes (N*K "
      "fp8, 2*N*K bf16) / median; %copy = that over the copy ceiling; %read = the time of streaming the weight "
      "bytes alone (a read kernel, same run) over the median, at M <= 64; targets: >= {:.0f} TF/s at M >= {} and >= "
      "{:.0f}% of copy at M <= {}, both for weights >= 32 MiB (ratios to torch: gemm_report.py); b2b us = "
      "back-to-back calls without flush; graph us = CUDA-graph replays of the same call (flushed), at M <= {}\n",
      kFp8PeakTflops, kBf16PeakTflops, kLargeTargetTflops, kLargeMinM, kDecodeTargetPctCopy, kDecodeMaxM, kDecodeMaxM);
}

void write_json(const Cli& cli, const std::vector<GemmCaseResult>& results, const CopyCeiling& copy, double wall_s) {
  nlohmann::json j;
  j["benchmark"] = "bench_gemm";
  j["time_utc"] = iso_time_utc();
  add_run_info(j);
  j["method"] = {{"flush", cli.flush == FlushMode::kRead ? "read" : "write"},
                 {"flush_bytes_factor_of_l2", 2},
                 {"target_ms", cli.timer.target_ms},
                 {"min_reps", cli.timer.min_reps},
                 {"max_reps", cli.timer.max_reps},
                 {"statistic", "median of per-launch CUDA event times"},
                 {"data", "random e4m3 codes (no zero, no NaN) and random positive scales; block: activations "
                          "per_token_group_quant'ed from random bf16; bf16: random bf16"},
                 {"block_act_scales", cli.run.block_scales_tma_aligned ? "column-major, TMA-aligned (M padded to 4)"
                                                                      : "column-major [K/128][M]"},
                 {"fast_accum", cli.run.fast_accum},
                 {"verify", "output poisoned, every element must be written; first and last 8 rows x three "
                            "128-column blocks vs the CPU reference: |y - ref| <= 0.15 + 0.02 |ref| and relative "
                            "L2 <= 1e-2"}};
  j["peaks"] = {{"fp8_dense_tflops", kFp8PeakTflops}, {"bf16_dense_tflops", kBf16PeakTflops}};
  j["targets"] = {{"large_tflops", kLargeTargetTflops},
                  {"large_min_m", kLargeMinM},
                  {"decode_pct_copy", kDecodeTargetPctCopy},
                  {"decode_max_m", kDecodeMaxM},
                  {"min_weight_bytes", kLargeWeightBytes}};
  j["copy"] = copy_json(copy);
  nlohmann::json cases = nlohmann::json::array();
  for (const GemmCaseResult& r : results) {
    nlohmann::json c = {{"scaling", r.scaling},
                        {"description", r.description},
                        {"model", r.model},
                        {"shape", r.shape},
                        {"m", r.m},
                        {"n", r.n},
                        {"k", r.k},
                        {"input_copies", r.input_copies},
                        {"flops", r.flops},
                        {"weight_bytes", r.weight_bytes},
                        {"min_bytes", r.min_bytes},
                        {"verified", r.verify_ok},
                        {"verify_note", r.verify_note},
                        {"verify_elements", r.verify_elements},
                        {"target", r.target.empty() ? nlohmann::json() : nlohmann::json(r.target)},
                        {"verdict", r.verdict}};
    if (!r.error.empty()) {
      c["error"] = r.error;
    } else {
      c.update(timing_json(r.timing));
      c["tflops"] = r.tflops;
      c["pct_peak"] = r.pct_peak;
      c["peak_tflops"] = r.peak_tflops;
      c["weight_gbps"] = r.weight_gbps;
      c["pct_copy"] = r.pct_copy;
      c["b2b_us"] = r.b2b_us > 0 ? nlohmann::json(r.b2b_us) : nlohmann::json();
      c["graph_us"] = r.graph_us > 0 ? nlohmann::json(r.graph_us) : nlohmann::json();
      if (!r.graph_error.empty()) c["graph_error"] = r.graph_error;
      c["read_us"] = r.read_us > 0 ? nlohmann::json(r.read_us) : nlohmann::json();
      c["pct_read"] = r.read_us > 0 ? nlohmann::json(r.pct_read) : nlohmann::json();
      c["max_err_over_tol"] = std::isnan(r.max_err_over_tol) ? nlohmann::json("nan") : nlohmann::json(r.max_err_over_tol);
      c["rel_l2"] = std::isnan(r.rel_l2) ? nlohmann::json("nan") : nlohmann::json(r.rel_l2);
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
    std::printf("bench_gemm: no CUDA device: skipped\n");
    return 77;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    set_bench_stream(stream);
    L2Flusher flusher(get_l2_cache_bytes(0), cli.flush);
    Timer timer(stream, flusher, cli.timer);
    fmt::print("bench_gemm on {} (sm_{}, {} SMs, L2 {:.1f} MiB); flush: {} {:.0f} MiB before each timed launch\n",
               get_device_name(0), get_device_capability(0).as_int(), get_cu_count(0),
               get_l2_cache_bytes(0) / 1048576.0, cli.flush == FlushMode::kRead ? "read" : "write",
               flusher.bytes() / 1048576.0);
    const CopyCeiling copy = measure_copy(timer, stream);
    fmt::print("copy ceiling: {:.0f} GB/s\n", copy.gbps);
    std::fflush(stdout);

    GemmRunner runner(stream, timer, copy, get_l2_cache_bytes(0));
    std::vector<GemmCaseResult> results = runner.run_all(cli.run);
    std::stable_sort(results.begin(), results.end(), [](const GemmCaseResult& a, const GemmCaseResult& b) {
      return a.scaling_order < b.scaling_order;
    });
    print_table(results, copy);
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    write_json(cli, results, copy, wall_s);
    fmt::print("wall time {:.1f} s\n", wall_s);
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    const bool all_ok = std::all_of(results.begin(), results.end(),
                                    [](const GemmCaseResult& r) { return r.verify_ok && r.error.empty(); });
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm: %s\n", e.what());
    return 1;
  }
}
