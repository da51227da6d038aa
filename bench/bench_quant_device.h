// Device helpers of bench_quant (bench_quant_device.cu): random BF16 inputs generated on the GPU,
// an independent absmax for checking dynamic per-tensor scales, a count of never-written output
// elements, and the L2 flush run before each timed launch. Plain CUDA runtime types only, so the host code compiles with the C++ compiler.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fp8kit::bench {

// Fills [rows, cols] bf16 (contiguous) with values u * 2^e: u uniform in (-1, 1), e in [-4, 3]
// chosen per row, so per-token and per-group scales differ from row to row. Never all zero.
void fill_random_bf16(void* dst, int64_t rows, int64_t cols, uint64_t seed, cudaStream_t stream);

// max |x| over n contiguous bf16 values (NaN ignored), computed with a plain atomic reduction
// (independent of the kernels under test). Synchronizes `stream`.
float absmax_bf16(const void* src, int64_t n, cudaStream_t stream);

// Outputs are poisoned with this byte before the verifying run. An element whose bytes all equal
// it is NaN in e4m3fn, bf16, f16 and f32, which no op writes for finite inputs.
constexpr unsigned char kPoisonByte = 0xff;

// Number of elements of the strided 2-D view (rows x cols, strides in elements, elem_size bytes
// each) whose bytes are all kPoisonByte, i.e. never written. Synchronizes `stream`.
int64_t count_poisoned(const void* base, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                       int elem_size, cudaStream_t stream);

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

// Throws std::runtime_error naming the call when `error` is not cudaSuccess.
void check_cuda(cudaError_t error, const char* what);

}  // namespace fp8kit::bench
