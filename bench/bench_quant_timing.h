// How bench_quant times one launch: warm up, estimate, then `reps` launches each preceded by an
// L2 flush and bracketed by its own pair of CUDA events; the median of the per-launch times.
// Back-to-back timing (decode sizes) runs many calls between one pair of events, no flush.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

#include "bench_quant_device.h"

namespace fp8kit::bench {

struct Timing {
  double median_us = 0;
  double min_us = 0;
  double p90_us = 0;
  int reps = 0;
};

struct TimerConfig {
  double target_ms = 50;  // summed kernel time aimed at per case
  int min_reps = 20;
  int max_reps = 2000;
  int warmup = 3;
};

class Timer {
 public:
  Timer(cudaStream_t stream, L2Flusher& flusher, TimerConfig config);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // `launch(i)` enqueues the work of iteration i on the stream (i picks the rotated input).
  Timing time(const std::function<void(int)>& launch);
  // Microseconds per call of `calls` consecutive launches (median of `trials`), L2 not flushed:
  // with small kernels this is bounded by launch and host overhead.
  double back_to_back_us(const std::function<void(int)>& launch, int calls = 100, int trials = 5);

  const TimerConfig& config() const { return config_; }

 private:
  // Per-launch times of `reps` flushed launches starting at iteration `first`.
  std::vector<double> flushed_runs(const std::function<void(int)>& launch, int reps, int first);

  cudaStream_t stream_;
  L2Flusher& flusher_;
  TimerConfig config_;
  std::vector<cudaEvent_t> starts_, stops_;
};

}  // namespace fp8kit::bench
