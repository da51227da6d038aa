// Device helpers of the GPU benchmarks (declared in bench_common.h): random BF16 and e4m3
// generation, an independent absmax, the never-written count, and the L2 flush. None of this is
// timed; the flush runs between timed regions. Built only with the CUDA backend.
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "bench_common.h"

namespace fp8kit::bench {
namespace {

__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ inline float random_value(uint64_t seed, int64_t index, int64_t cols) {
  const int64_t row = index / cols;
  const int exponent = static_cast<int>(splitmix64(seed ^ (0x5851f42d4c957f2dull * (row + 1))) & 7) - 4;
  const uint64_t h = splitmix64(seed + static_cast<uint64_t>(index));
  const float u = static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;  // (-1, 1), 24 bits
  return ldexpf(u, exponent);
}

// Eight bf16 per thread and iteration (one 16-byte store); the tail element by element.
__global__ void fill_random_bf16_kernel(__nv_bfloat16* dst, int64_t n, int64_t cols, uint64_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t vectors = n / 8;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    __align__(16) __nv_bfloat16 values[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) values[j] = __float2bfloat16_rn(random_value(seed, v * 8 + j, cols));
    reinterpret_cast<uint4*>(dst)[v] = *reinterpret_cast<const uint4*>(values);
  }
  for (int64_t i = vectors * 8 + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = __float2bfloat16_rn(random_value(seed, i, cols));
  }
}

// `stream` = splitmix64(seed): streams of nearby seeds start far apart, never shifted copies.
__device__ inline uint8_t random_e4m3_code(uint64_t stream, int64_t index) {
  uint8_t c = static_cast<uint8_t>(splitmix64(stream + static_cast<uint64_t>(index)) >> 24);
  if ((c & 0x7f) == 0) c |= 0x08;  // +-0 -> +-2^-6
  if ((c & 0x7f) == 0x7f) c ^= 0x01;  // NaN -> +-448
  return c;
}

// Sixteen codes per thread and iteration (one 16-byte store; `dst` 16-byte aligned when
// `vectorized`); the tail, or everything when not vectorized, byte by byte.
__global__ void fill_random_e4m3_kernel(uint8_t* dst, int64_t n, uint64_t seed, bool vectorized) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t vectors = vectorized ? n / 16 : 0;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    __align__(16) uint8_t codes[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) codes[j] = random_e4m3_code(seed, v * 16 + j);
    reinterpret_cast<uint4*>(dst)[v] = *reinterpret_cast<const uint4*>(codes);
  }
  for (int64_t i = vectors * 16 + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = random_e4m3_code(seed, i);
  }
}

// Non-negative floats order like their bit patterns, so atomicMax on the bits is a float max.
__global__ void absmax_bf16_kernel(const __nv_bfloat16* src, int64_t n, unsigned* result_bits) {
  float m = 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    m = fmaxf(m, fabsf(__bfloat162float(src[i])));  // fmaxf drops NaN
  }
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if ((threadIdx.x & 31) == 0) atomicMax(result_bits, __float_as_uint(m));
}

__global__ void count_poisoned_kernel(const unsigned char* base, int64_t rows, int64_t cols, int64_t row_stride,
                                      int64_t col_stride, int elem_size, unsigned long long* count) {
  const int64_t n = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / cols, c = i % cols;
    const unsigned char* e = base + (r * row_stride + c * col_stride) * elem_size;
    bool poisoned = true;
    for (int b = 0; b < elem_size; ++b) poisoned = poisoned && e[b] == kPoisonByte;
    if (poisoned) atomicAdd(count, 1ull);
  }
}

__global__ void read_flush_kernel(const uint4* buffer, int64_t vectors, unsigned pass, unsigned* sink) {
  unsigned acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += stride) {
    const uint4 v = __ldcg(buffer + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == pass + 0x9e3779b9u) *sink = acc;  // practically never true; the loads must stay
}

// Reads vectors [0, n) once: each thread kLoads 16-byte loads in flight a step, a grid of whole
// multiprocessors striding over them. The xor keeps the loads.
template <int kLoads>
__global__ void stream_read_kernel(const uint4* data, int64_t n, unsigned* sink) {
  unsigned acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kLoads - 1) * stride < n; i += kLoads * stride) {
    uint4 v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) v[j] = __ldcs(data + i + j * stride);
#pragma unroll
    for (int j = 0; j < kLoads; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcs(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7f4a7c15u) *sink = acc;  // practically never true
}

int grid_for(int64_t work, int threads) {
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const int64_t needed = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sms) * 8;
  return static_cast<int>(needed < 1 ? 1 : (needed < cap ? needed : cap));
}

}  // namespace

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

void fill_random_bf16(void* dst, int64_t rows, int64_t cols, uint64_t seed, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  constexpr int kThreads = 256;
  fill_random_bf16_kernel<<<grid_for(n / 8 + 1, kThreads), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n,
                                                                                   cols, seed);
  check_cuda(cudaGetLastError(), "fill_random_bf16_kernel");
}

void fill_random_e4m3(void* dst, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  const bool vectorized = reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  constexpr int kThreads = 256;
  fill_random_e4m3_kernel<<<grid_for(vectorized ? n / 16 + 1 : n, kThreads), kThreads, 0, stream>>>(
      static_cast<uint8_t*>(dst), n, splitmix64(seed), vectorized);
  check_cuda(cudaGetLastError(), "fill_random_e4m3_kernel");
}

float absmax_bf16(const void* src, int64_t n, cudaStream_t stream) {
  unsigned* bits = nullptr;
  check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&bits), sizeof(unsigned), stream), "cudaMallocAsync");
  check_cuda(cudaMemsetAsync(bits, 0, sizeof(unsigned), stream), "cudaMemsetAsync");
  constexpr int kThreads = 256;
  absmax_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), n, bits);
  check_cuda(cudaGetLastError(), "absmax_bf16_kernel");
  unsigned host_bits = 0;
  check_cuda(cudaMemcpyAsync(&host_bits, bits, sizeof(unsigned), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check_cuda(cudaFreeAsync(bits, stream), "cudaFreeAsync");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  float value = 0.0f;
  static_assert(sizeof(value) == sizeof(host_bits));
  __builtin_memcpy(&value, &host_bits, sizeof(value));
  return value;
}

int64_t count_poisoned(const void* base, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                       int elem_size, cudaStream_t stream) {
  if (rows * cols == 0) return 0;
  unsigned long long* count = nullptr;
  check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&count), sizeof(*count), stream), "cudaMallocAsync");
  check_cuda(cudaMemsetAsync(count, 0, sizeof(*count), stream), "cudaMemsetAsync");
  constexpr int kThreads = 256;
  count_poisoned_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(
      static_cast<const unsigned char*>(base), rows, cols, row_stride, col_stride, elem_size, count);
  check_cuda(cudaGetLastError(), "count_poisoned_kernel");
  unsigned long long host = 0;
  check_cuda(cudaMemcpyAsync(&host, count, sizeof(host), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check_cuda(cudaFreeAsync(count, stream), "cudaFreeAsync");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return static_cast<int64_t>(host);
}

L2Flusher::L2Flusher(size_t l2_bytes, FlushMode mode) : mode_(mode) {
  bytes_ = (2 * l2_bytes + 15) / 16 * 16;
  check_cuda(cudaMalloc(&buffer_, bytes_), "cudaMalloc(flush buffer)");
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&sink_), sizeof(unsigned)), "cudaMalloc(flush sink)");
  check_cuda(cudaMemset(buffer_, 0x5a, bytes_), "cudaMemset(flush buffer)");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

L2Flusher::~L2Flusher() {
  cudaFree(buffer_);
  cudaFree(sink_);
}

Timing measure_stream_read(const void* data, size_t bytes, Timer& timer, cudaStream_t stream) {
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  unsigned* sink = nullptr;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&sink), sizeof(unsigned)), "cudaMalloc(read sink)");
  const auto* vectors = static_cast<const uint4*>(data);
  const int64_t n = static_cast<int64_t>(bytes / 16);
  constexpr int kThreads = 512;
  const Timing four = timer.time([&](int) { stream_read_kernel<4><<<4 * sms, kThreads, 0, stream>>>(vectors, n, sink); });
  const Timing eight = timer.time([&](int) { stream_read_kernel<8><<<4 * sms, kThreads, 0, stream>>>(vectors, n, sink); });
  check_cuda(cudaGetLastError(), "stream_read_kernel");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check_cuda(cudaFree(sink), "cudaFree");
  return four.median_us <= eight.median_us ? four : eight;
}

void L2Flusher::flush(cudaStream_t stream) {
  ++pass_;
  if (mode_ == FlushMode::kWrite) {
    check_cuda(cudaMemsetAsync(buffer_, static_cast<int>(pass_ & 0xff), bytes_, stream), "cudaMemsetAsync(flush)");
    return;
  }
  constexpr int kThreads = 512;
  const int64_t vectors = static_cast<int64_t>(bytes_ / 16);
  read_flush_kernel<<<grid_for(vectors, kThreads), kThreads, 0, stream>>>(static_cast<const uint4*>(buffer_), vectors,
                                                                         pass_, sink_);
  check_cuda(cudaGetLastError(), "read_flush_kernel");
}

}  // namespace fp8kit::bench
