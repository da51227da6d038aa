// The physical floors the CPU benchmarks compare against, measured in the same run: the read
// bandwidth of a buffer (same bytes, same threads, same rotation over copies as the kernel under
// test) and the f32 FMA peak (independent FMA chains on every thread), plus the timing and the
// machine load that every figure is reported with. bench_cpu_floors.cpp; used by
// bench_cpu_gemm.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace fp8kit::bench {

// Median seconds of one call of `fn` over `runs` samples; each sample repeats fn until at least
// `min_sample_s` passed and divides by the repetitions.
double median_seconds(const std::function<void()>& fn, int runs = 7, double min_sample_s = 0.02);

// The share of `threads` cores the process got during the last median_seconds: process CPU
// time / (wall time * threads). Below ~0.9 other work on the machine took cores from the run.
double last_cpu_share(int threads);

// Reads `bytes` bytes (32-byte vector loads, XOR-accumulated so nothing is optimized away) from
// copy (call % copies) of a set of buffers, split over `threads` threads as the GEMV splits
// its weights. Returns GB/s (1e9 bytes/s) of one buffer's bytes per call.
double read_bandwidth_gbs(size_t bytes, int copies, int threads);

// f32 FMA peak in GFLOP/s (2 flops per lane per FMA) of `threads` threads (AVX2 when the CPU has
// it, else the portable build's widest vectors).
double fma_peak_gflops(int threads);

// VDPBF16PS peak in GFLOP/s (4 flops per f32 lane per instruction) of `threads` threads, 0 on
// CPUs without AVX-512-BF16: the floor of the bf16 kernel family.
double bf16_dot_peak_gflops(int threads);

// "load 1.23 0.98 0.77" from /proc/loadavg ("load ?" elsewhere).
std::string load_average();

}  // namespace fp8kit::bench
