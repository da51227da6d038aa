// The CPU floors (bench_cpu_floors.h). The read kernel XORs 32-byte loads into four
// accumulators: one load a cycle is far above DRAM bandwidth, so it measures memory (or cache,
// for a buffer that fits) and nothing else. The FMA kernel runs 12 independent chains per thread
// (latency 4 x 2 pipes needs 8), so it reaches the FMA pipes' throughput.
#include "bench_cpu_floors.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <vector>

#include "core/cpu_features.h"
#include "core/parallel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace fp8kit::bench {
namespace {

std::atomic<uint64_t> g_sink{0};
double g_last_wall = 0, g_last_cpu = 0;

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, size_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  uint64_t s = uint64_t(_mm256_extract_epi64(x, 0)) ^ uint64_t(_mm256_extract_epi64(x, 3));
  for (; i < bytes; ++i) s ^= p[i];
  return s;
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations) {
  __m256 c[12];
  for (int i = 0; i < 12; ++i) c[i] = _mm256_set1_ps(float(i) * 1e-3f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) c[i] = _mm256_fmadd_ps(c[i], x, y);
  }
  __m256 s = c[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, c[i]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f,avx512bf16"))) float dot_chains_avx512bf16(int64_t iterations) {
  __m512 c[12];
  for (int i = 0; i < 12; ++i) c[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3300);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) c[i] = _mm512_dpbf16_ps(c[i], x, y);
  }
  __m512 s = c[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, c[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float total = 0;
  for (float l : lanes) total += l;
  return total;
}
#endif

uint64_t read_portable(const uint8_t* p, size_t bytes) {
  uint64_t a[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int q = 0; q < 4; ++q) {
      uint64_t v;
      __builtin_memcpy(&v, p + i + 8 * q, 8);
      a[q] ^= v;
    }
  }
  uint64_t s = a[0] ^ a[1] ^ a[2] ^ a[3];
  for (; i < bytes; ++i) s ^= p[i];
  return s;
}

float fma_chains_portable(int64_t iterations) {
  float c[12][8];
  for (int i = 0; i < 12; ++i) {
    for (int l = 0; l < 8; ++l) c[i][l] = float(i) * 1e-3f;
  }
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 12; ++i) {
      for (int l = 0; l < 8; ++l) c[i][l] = c[i][l] * 0.999999f + 1e-7f;
    }
  }
  float s = 0;
  for (int i = 0; i < 12; ++i) s += c[i][0];
  return s;
}

}  // namespace

double median_seconds(const std::function<void()>& fn, int runs, double min_sample_s) {
  using clock = std::chrono::steady_clock;
  fn();  // warm-up
  const auto wall0 = clock::now();
  const double cpu0 = process_cpu_seconds();
  std::vector<double> samples;
  for (int r = 0; r < runs; ++r) {
    int64_t reps = 0;
    const auto start = clock::now();
    double elapsed = 0;
    do {
      fn();
      ++reps;
      elapsed = std::chrono::duration<double>(clock::now() - start).count();
    } while (elapsed < min_sample_s);
    samples.push_back(elapsed / double(reps));
  }
  g_last_wall = std::chrono::duration<double>(clock::now() - wall0).count();
  g_last_cpu = process_cpu_seconds() - cpu0;
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double last_cpu_share(int threads) { return g_last_wall > 0 ? g_last_cpu / (g_last_wall * threads) : 0.0; }

double read_bandwidth_gbs(size_t bytes, int copies, int threads) {
  std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(copies));
  for (auto& b : buffers) b.assign(bytes, uint8_t(1));
  const bool avx2 = best_cpu_isa() >= CpuIsa::kAvx2;
  int call = 0;
  const int64_t parts = std::max<int64_t>(1, int64_t(bytes / 4096));
  const double s = median_seconds([&] {
    const uint8_t* p = buffers[size_t(call++ % copies)].data();
    parallel_for_at_most(threads, parts, 1, [&](int64_t b, int64_t e) {
      const size_t lo = size_t(b) * bytes / size_t(parts), hi = size_t(e) * bytes / size_t(parts);
#if defined(__x86_64__)
      g_sink ^= avx2 ? read_avx2(p + lo, hi - lo) : read_portable(p + lo, hi - lo);
#else
      g_sink ^= read_portable(p + lo, hi - lo);
#endif
    });
  });
  return double(bytes) / s * 1e-9;
}

double fma_peak_gflops(int threads) {
  const bool avx2 = best_cpu_isa() >= CpuIsa::kAvx2;
  const int64_t iterations = 1 << 22;
  std::atomic<float> sink{0};
  const double s = median_seconds(
      [&] {
        parallel_for_at_most(threads, threads, 1, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
#if defined(__x86_64__)
            sink = sink + (avx2 ? fma_chains_avx2(iterations) : fma_chains_portable(iterations));
#else
            sink = sink + fma_chains_portable(iterations);
#endif
          }
        });
      },
      5, 0.05);
  return double(threads) * double(iterations) * 12 * 8 * 2 / s * 1e-9;
}

double bf16_dot_peak_gflops(int threads) {
#if defined(__x86_64__)
  if (best_cpu_isa() < CpuIsa::kAvx512Bf16) return 0.0;
  const int64_t iterations = 1 << 21;
  std::atomic<float> sink{0};
  const double s = median_seconds(
      [&] {
        parallel_for_at_most(threads, threads, 1, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) sink = sink + dot_chains_avx512bf16(iterations);
        });
      },
      5, 0.05);
  return double(threads) * double(iterations) * 12 * 16 * 4 / s * 1e-9;
#else
  return 0.0;
#endif
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (!(in >> a >> b >> c)) return "load ?";
  char text[64];
  std::snprintf(text, sizeof(text), "load %.2f %.2f %.2f", a, b, c);
  return text;
}

}  // namespace fp8kit::bench
