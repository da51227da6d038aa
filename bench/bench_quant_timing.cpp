// Event timing of bench_quant (bench_quant_timing.h). Every launch gets its own event pair after
// its flush, so the flush is never inside a measured interval; the host enqueues ahead (no
// synchronization inside the loop), so launch gaps do not show unless the host falls behind.
#include "bench_quant_timing.h"

#include <algorithm>
#include <cmath>

namespace fp8kit::bench {
namespace {

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

Timer::Timer(cudaStream_t stream, L2Flusher& flusher, TimerConfig config)
    : stream_(stream), flusher_(flusher), config_(config) {
  config_.max_reps = std::max(config_.max_reps, config_.min_reps);
  starts_.resize(config_.max_reps);
  stops_.resize(config_.max_reps);
  for (int i = 0; i < config_.max_reps; ++i) {
    check_cuda(cudaEventCreate(&starts_[i]), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stops_[i]), "cudaEventCreate");
  }
}

Timer::~Timer() {
  for (size_t i = 0; i < starts_.size(); ++i) {
    cudaEventDestroy(starts_[i]);
    cudaEventDestroy(stops_[i]);
  }
}

std::vector<double> Timer::flushed_runs(const std::function<void(int)>& launch, int reps, int first) {
  for (int i = 0; i < reps; ++i) {
    flusher_.flush(stream_);
    check_cuda(cudaEventRecord(starts_[i], stream_), "cudaEventRecord");
    launch(first + i);
    check_cuda(cudaEventRecord(stops_[i], stream_), "cudaEventRecord");
  }
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (timed launches)");
  std::vector<double> us(reps);
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, starts_[i], stops_[i]), "cudaEventElapsedTime");
    us[i] = 1000.0 * ms;
  }
  return us;
}

Timing Timer::time(const std::function<void(int)>& launch) {
  for (int i = 0; i < config_.warmup; ++i) launch(i);
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (warm-up)");
  const int estimate_reps = std::min(5, config_.max_reps);
  const double estimate_us = percentile(flushed_runs(launch, estimate_reps, 0), 0.5);
  const double wanted = std::ceil(config_.target_ms * 1000.0 / std::max(estimate_us, 0.5));
  Timing t;
  t.reps = static_cast<int>(std::clamp(wanted, double(config_.min_reps), double(config_.max_reps)));
  const std::vector<double> us = flushed_runs(launch, t.reps, estimate_reps);
  t.median_us = percentile(us, 0.5);
  t.p90_us = percentile(us, 0.9);
  t.min_us = *std::min_element(us.begin(), us.end());
  return t;
}

double Timer::back_to_back_us(const std::function<void(int)>& launch, int calls, int trials) {
  for (int i = 0; i < config_.warmup; ++i) launch(i);
  trials = std::min(trials, config_.max_reps);
  std::vector<double> per_call(trials);
  for (int t = 0; t < trials; ++t) {
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    check_cuda(cudaEventRecord(starts_[t], stream_), "cudaEventRecord");
    for (int c = 0; c < calls; ++c) launch(c);
    check_cuda(cudaEventRecord(stops_[t], stream_), "cudaEventRecord");
  }
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (back-to-back)");
  for (int t = 0; t < trials; ++t) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, starts_[t], stops_[t]), "cudaEventElapsedTime");
    per_call[t] = 1000.0 * ms / calls;
  }
  return percentile(per_call, 0.5);
}

}  // namespace fp8kit::bench
