// The cases of bench_gemm: PERF_TARGETS' dense shape grid (N, K of Llama-3-8B, Llama-3-70B,
// DeepSeek-V3; M from decode to prefill) times the scalings of scaled_mm plus a BF16 cuBLASLt
// GEMM, how each is verified (a slice against the CPU reference, every output element written)
// and its absolute target. Implemented in bench_gemm_cases.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.h"

namespace fp8kit::bench {

struct GemmShape {
  std::string model;  // "llama3-8b", "llama3-70b", "deepseek-v3"
  int64_t n = 0, k = 0;
};

// The grid of PERF_TARGETS.md, in its order.
const std::vector<GemmShape>& default_shapes();
const std::vector<int64_t>& default_ms();

// Scaling keys, in table order; shared with bench/peers/gemm_torch.py and bench/gemm_report.py.
//   per_tensor         scale_a, scale_b one element each, bf16 out
//   per_token_channel  scale_a [M, 1], scale_b [N, 1], bf16 out
//   block              1 x 128 activation groups (column-major TMA-aligned scales, as
//                      per_token_group_quant writes them) x 128 x 128 weight blocks, bf16 out
//   bf16               bf16 x bf16 -> bf16 through cuBLASLt (f32 accumulation): the physical reference
//   weight_only        weight_only_mm: bf16 activations x e4m3 weights with per-channel scales, bf16
//                      out (compared with bf16 by gemm_report.py; PERF_TARGETS judges M <= 16)
const std::vector<std::string>& all_scalings();

// Absolute targets of PERF_TARGETS.md that one binary can judge (the ratios to torch are judged
// by gemm_report.py).
constexpr double kLargeTargetTflops = 1450.0;  // M >= 2048 on weights >= kLargeWeightBytes
constexpr int64_t kLargeMinM = 2048;
constexpr double kDecodeTargetPctCopy = 85.0;  // weight bytes / time, M <= 16, weights >= 32 MiB
constexpr int64_t kDecodeMaxM = 16;
constexpr int64_t kReadFloorMaxM = 64;  // cases timed against the weights' read floor
constexpr double kLargeWeightBytes = 32.0 * 1024 * 1024;

struct GemmCaseResult {
  std::string scaling;  // a key of all_scalings()
  std::string description;
  int scaling_order = 0;
  std::string model;
  std::string shape;  // "NxK"
  int64_t m = 0, n = 0, k = 0;
  int input_copies = 1;
  double flops = 0;         // 2 M N K
  double weight_bytes = 0;  // N K (fp8) or 2 N K (bf16); scales not counted
  double min_bytes = 0;     // A + B + C + scales: each read or written once
  Timing timing;
  double tflops = 0, pct_peak = 0, peak_tflops = 0;
  double weight_gbps = 0, pct_copy = 0;  // weight bytes / median, over the copy ceiling
  double b2b_us = -1;                    // decode sizes only
  // Decode sizes (M <= kDecodeMaxM): the median of CUDA-graph replays of the same call (one graph
  // per input copy, L2 flushed before each replay as before each launch), which leaves out the
  // host's launch work as the torch peer's *_graph variants do; -1 when not timed.
  double graph_us = -1;
  std::string graph_error;  // the capture failed
  // Decode sizes (M <= 64): the time of streaming the weight bytes alone (measure_stream_read on
  // the same weights, same run), and that time over the median in percent.
  double read_us = -1, pct_read = 0;
  bool verify_ok = false;
  std::string verify_note;
  int64_t verify_elements = 0;
  double max_err_over_tol = 0;  // max |y - ref| / (atol + rtol |ref|) over the verified slice
  double rel_l2 = 0;            // ||y - ref|| / ||ref|| over the verified slice
  std::string target;           // "" when PERF_TARGETS states no absolute target for the case
  std::string verdict;          // pass | miss | info | FAIL
  std::string error;            // the call threw (nothing timed)
};

struct GemmRunConfig {
  std::vector<int64_t> ms;
  std::vector<GemmShape> shapes;
  std::vector<std::string> scalings;
  std::string filter;  // substring of "scaling NxK M=m"
  bool back_to_back = true;
  bool graphs = true;  // time decode sizes as CUDA-graph replays too
  // Block activation scales as DeepGEMM reads them (column-major, each column padded to a multiple
  // of 4 rows: tma_aligned_scales) or plain column-major [K/128][M] (what cuBLASLt's block mode reads).
  bool block_scales_tma_aligned = true;
  bool fast_accum = false;  // ScaledMmOptions::fast_accum of the per-tensor and per-token x per-channel cases
};

class GemmRunner {
 public:
  GemmRunner(cudaStream_t stream, Timer& timer, const CopyCeiling& copy, size_t l2_bytes)
      : stream_(stream), timer_(timer), copy_(copy), l2_bytes_(l2_bytes) {}

  // Every selected case, printed as it finishes.
  std::vector<GemmCaseResult> run_all(const GemmRunConfig& config);

 private:
  cudaStream_t stream_;
  Timer& timer_;
  const CopyCeiling& copy_;
  size_t l2_bytes_;
};

}  // namespace fp8kit::bench
