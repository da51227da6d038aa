// What every GPU benchmark binary shares (bench_quant, bench_gemm): random inputs generated on the
// GPU, the never-written count, the L2 flush, event timing (median of flushed launches), the
// device-to-device copy ceiling and the JSON pieces common to their reports. Device code in
// bench_common.cu, host code in bench_common.cpp; plain CUDA runtime types only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#ifndef __CUDACC__
#include <nlohmann/json_fwd.hpp>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"
#endif

namespace fp8kit::bench {

// Throws std::runtime_error naming the call when `error` is not cudaSuccess.
void check_cuda(cudaError_t error, const char* what);

// ---- random inputs (device) --------------------------------------------------------------------

// Fills [rows, cols] bf16 (contiguous) with values u * 2^e: u uniform in (-1, 1), e in [-4, 3]
// chosen per row, so per-token and per-group scales differ from row to row. Never all zero.
void fill_random_bf16(void* dst, int64_t rows, int64_t cols, uint64_t seed, cudaStream_t stream);

// Fills n bytes with random e4m3fn codes, uniform over the codes except that neither zero (0x00,
// 0x80; they become +-2^-6) nor NaN (0x7f, 0xff; they become +-448) ever appears.
void fill_random_e4m3(void* dst, int64_t n, uint64_t seed, cudaStream_t stream);

// max |x| over n contiguous bf16 values (NaN ignored), computed with a plain atomic reduction
// (independent of the kernels under test). Synchronizes `stream`.
float absmax_bf16(const void* src, int64_t n, cudaStream_t stream);

// ---- written-output check ----------------------------------------------------------------------

// Outputs are poisoned with this byte before the verifying run. An element whose bytes all equal
// it is NaN in e4m3fn, bf16, f16 and f32, which no op writes for finite inputs.
constexpr unsigned char kPoisonByte = 0xff;

// Number of elements of the strided 2-D view (rows x cols, strides in elements, elem_size bytes
// each) whose bytes are all kPoisonByte, i.e. never written. Synchronizes `stream`.
int64_t count_poisoned(const void* base, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                       int elem_size, cudaStream_t stream);

// ---- L2 flush ----------------------------------------------------------------------------------

enum class FlushMode { kRead, kWrite };

// Evicts the L2 before a timed launch. kRead (default) reads a buffer of 2x the L2 size: the
// cache ends full of clean lines, so the timed kernel pays no write-back of the flush's own data.
// kWrite writes the buffer (the triton.testing.do_bench way); the dirty lines it leaves are
// written back while the next kernel runs and are charged to it.
class L2Flusher {
 public:
  L2Flusher(size_t l2_bytes, FlushMode mode);
  ~L2Flusher();
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;

  void flush(cudaStream_t stream);
  size_t bytes() const { return bytes_; }
  FlushMode mode() const { return mode_; }

 private:
  void* buffer_ = nullptr;
  unsigned* sink_ = nullptr;  // keeps the read pass from being optimised away
  size_t bytes_ = 0;
  FlushMode mode_;
  unsigned pass_ = 0;
};

// ---- event timing ------------------------------------------------------------------------------
// Warm up, estimate, then `reps` launches each preceded by an L2 flush and bracketed by its own
// pair of CUDA events; the median of the per-launch times. Back-to-back timing (decode sizes) runs
// many calls between one pair of events, no flush.

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

// ---- the ceilings ------------------------------------------------------------------------------

constexpr double kFp8PeakTflops = 1979.0;  // H200 dense FP8 tensor peak (datasheet)
constexpr double kBf16PeakTflops = 989.5;  // H200 dense BF16 tensor peak (datasheet)

struct CopyCeiling {
  double bytes = 0;  // read + written
  Timing timing;
  double gbps = 0;
};

// cudaMemcpyAsync of 1 GiB device to device, timed like the kernels; bytes = read + written.
CopyCeiling measure_copy(Timer& timer, cudaStream_t stream);

// The time of streaming `bytes` from `data` (device memory, 16-byte aligned) into the
// multiprocessors and no further: the floor of a kernel that must read them once, launch and
// ramp included (a decode GEMM's weights). The faster of two read kernels (16-byte loads, 4 or 8
// in flight a thread, every multiprocessor full), timed like the kernels (L2 flushed).
Timing measure_stream_read(const void* data, size_t bytes, Timer& timer, cudaStream_t stream);

// ---- reports -----------------------------------------------------------------------------------

std::string iso_time_utc();  // "2026-11-30T12:00:00Z"

// The JSON path: `given` when not empty, else $FP8KIT_RESULTS_DIR/<file_name>, else
// ./gpu-results/<file_name>.
std::string results_path(const std::string& given, const std::string& file_name);

#ifndef __CUDACC__
nlohmann::json timing_json(const Timing& t);
// device (name, capability, SMs, L2) and the CUDA runtime and driver versions, as top-level keys.
void add_run_info(nlohmann::json& j);
nlohmann::json copy_json(const CopyCeiling& copy);
// Writes `j` (indented) to `path`, creating its directory; throws when it cannot.
void write_json_file(const nlohmann::json& j, const std::string& path);
#endif

// The stream every benchmark call queues its work on; set once, where the benchmark creates it.
void set_bench_stream(cudaStream_t stream);
#ifndef __CUDACC__
// The context of a benchmark call on `t`'s device: on CUDA the benchmark's stream; the overrides
// of the process (FP8KIT_*, parsed once), so that a knob set for a run applies to every call.
const ForwardContext& bench_ctx(const Tensor& t);
#endif

}  // namespace fp8kit::bench
