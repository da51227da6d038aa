// The cases of bench_quant: which op runs on which shape, how many bytes it must move, how it is
// verified against the CPU reference, and its target from PERF_TARGETS.md (share of the measured
// copy bandwidth on >= 64 MiB inputs). Implemented in bench_quant_cases.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.h"

namespace fp8kit::bench {

struct CaseResult {
  std::string kernel;       // stable key shared with bench/peers/quant_torch.py
  std::string description;  // the call measured
  int kernel_order = 0;
  std::string shape;  // "MxK"
  int64_t m = 0, k = 0;
  bool decode = false;
  int input_copies = 1;
  double bytes_in = 0, bytes_out = 0;  // the fewest bytes the op must move, scales included
  Timing timing;
  double gbps = 0, pct_copy = 0;
  double b2b_us = -1;  // decode sizes only
  bool verify_ok = false;
  int64_t verify_rows = 0;
  std::string verify_note;
  double target_pct_copy = 0;  // 0: no target stated
  std::string verdict;         // pass | miss | info | FAIL
  std::string error;           // the op threw (nothing timed)

  double bytes() const { return bytes_in + bytes_out; }
};

class CaseRunner {
 public:
  CaseRunner(cudaStream_t stream, Timer& timer, const CopyCeiling& copy, size_t l2_bytes)
      : stream_(stream), timer_(timer), copy_(copy), l2_bytes_(l2_bytes) {}

  // Every case whose "kernel shape" contains `filter` (all when empty), printed as it finishes.
  std::vector<CaseResult> run_all(const std::string& filter);

 private:
  cudaStream_t stream_;
  Timer& timer_;
  const CopyCeiling& copy_;
  size_t l2_bytes_;
};

}  // namespace fp8kit::bench
