// Host side of the GPU benchmarks' shared code (bench_common.h). Every timed launch gets its own
// event pair after its flush, so the flush is never inside a measured interval; the host enqueues
// ahead (no synchronization inside the loop), so launch gaps do not show unless the host falls
// behind.
#include "bench_common.h"

#include <map>
#include <utility>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "fp8kit/platform.h"

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

CopyCeiling measure_copy(Timer& timer, cudaStream_t stream) {
  const size_t bytes = size_t(1) << 30;
  void* src = nullptr;
  void* dst = nullptr;
  check_cuda(cudaMalloc(&src, bytes), "cudaMalloc(copy src)");
  check_cuda(cudaMalloc(&dst, bytes), "cudaMalloc(copy dst)");
  fill_random_bf16(src, 1, static_cast<int64_t>(bytes / 2), 7, stream);
  CopyCeiling c;
  c.bytes = 2.0 * static_cast<double>(bytes);
  c.timing = timer.time([&](int) {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync(copy)");
  });
  c.gbps = c.bytes / (c.timing.median_us * 1e3);
  check_cuda(cudaFree(src), "cudaFree");
  check_cuda(cudaFree(dst), "cudaFree");
  return c;
}

std::string iso_time_utc() {
  const std::time_t now = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buffer;
}

std::string results_path(const std::string& given, const std::string& file_name) {
  if (!given.empty()) return given;
  const char* dir = std::getenv("FP8KIT_RESULTS_DIR");
  return (std::filesystem::path(dir && *dir ? dir : "gpu-results") / file_name).string();
}

nlohmann::json timing_json(const Timing& t) {
  return {{"median_us", t.median_us}, {"min_us", t.min_us}, {"p90_us", t.p90_us}, {"reps", t.reps}};
}

void add_run_info(nlohmann::json& j) {
  j["device"] = {{"name", get_device_name(0)},
                 {"capability", get_device_capability(0).as_int()},
                 {"sm_count", get_cu_count(0)},
                 {"l2_bytes", get_l2_cache_bytes(0)}};
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  j["cuda_runtime"] = runtime;
  j["cuda_driver"] = driver;
}

nlohmann::json copy_json(const CopyCeiling& copy) {
  nlohmann::json c = {{"what", "cudaMemcpyAsync D2D 1 GiB"}, {"bytes", copy.bytes}, {"gbps", copy.gbps}};
  c.update(timing_json(copy.timing));
  return c;
}

void write_json_file(const nlohmann::json& j, const std::string& file) {
  const std::filesystem::path path(file);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

namespace {
cudaStream_t g_bench_stream = nullptr;
}  // namespace

void set_bench_stream(cudaStream_t stream) { g_bench_stream = stream; }

const ForwardContext& bench_ctx(const Tensor& t) {
  // Contexts live to the end of the process (their CUDA workspaces must not be freed after the
  // runtime is torn down), one per device and stream.
  static std::map<std::pair<int, void*>, ForwardContext*> contexts;
  const bool cuda = t.device().is_cuda();
  const std::pair<int, void*> key{cuda ? t.device().index : -1, cuda ? static_cast<void*>(g_bench_stream) : nullptr};
  ForwardContext*& ctx = contexts[key];
  if (ctx == nullptr) ctx = new ForwardContext(t.device(), process_overrides(), Stream{key.second});
  return *ctx;
}

}  // namespace fp8kit::bench
