// Benchmark of the fast CPU GEMM engine (not a test): decode GEMV (M = 1, 2, 4, 8) in GB/s of
// weights against the read bandwidth of a buffer of the same bytes measured in the same run
// (same threads; weights and buffer rotated over copies so the working set exceeds the caches,
// as a model's layers do), and prefill GEMM (M = 64, 512) in GFLOP/s against the f32 FMA peak of
// the same run; for W8A8 (per-tensor, per-token x per-channel, 128x128 blocks), W8A16 (bf16
// activations) and BF16, on SmolLM2-135M's and Llama-3-8B's layer shapes. Every kernel is first
// verified against the reference on a 64-column slice (the engine's columns do not depend on
// each other, so the slice's bits must equal the full run's). Each row carries the load average,
// the share of the cores the run got (kernel / floor) and the rate per core-second of CPU time
// (rate / (share * threads)): on a machine shared with other work, the kernel's own efficiency.
//   bench_cpu_gemm [--threads T] [--decode-only | --prefill-only] [--quick]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_cpu_floors.h"
#include "core/cpu_features.h"
#include "core/parallel.h"
#include "fp8kit/half.h"
#include "ops/gemm/gemm_cpu.h"
#include "ops/gemm/gemm_cpu_plan.h"
#include "ops/gemm/gemm_ref.h"
#include "ops/gemm/weight_only_ref.h"

namespace fp8kit::bench {
namespace {

enum class Kind { kPerTensor, kTokenChannel, kBlock, kW8A16, kBF16 };
const char* kind_name(Kind k) {
  const char* names[] = {"W8A8 per-tensor", "W8A8 token x channel", "W8A8 block 128", "W8A16 bf16", "BF16"};
  return names[int(k)];
}

struct Shape2 {
  const char* model;
  int64_t n, k;
};
const std::vector<Shape2> kShapes = {{"SmolLM2 q/o", 576, 576},      {"SmolLM2 gate/up", 1536, 576},
                                     {"SmolLM2 down", 576, 1536},    {"SmolLM2 lm_head", 49152, 576},
                                     {"Llama-3-8B q/o", 4096, 4096}, {"Llama-3-8B gate/up", 14336, 4096},
                                     {"Llama-3-8B down", 4096, 14336}};

// One problem's buffers: `copies` weight copies (rotated), activations, scales, output.
struct Problem {
  Kind kind;
  int64_t m, n, k;
  int copies;
  std::vector<uint8_t> w;  // copies x n x k x weight bytes
  std::vector<uint8_t> a;  // m x k x activation bytes
  std::vector<float> sa, sb;
  std::vector<BFloat16> out;
  size_t weight_bytes() const { return size_t(n * k) * (kind == Kind::kBF16 ? 2 : 1); }
};

void fill(Problem& p, std::mt19937& rng) {
  std::uniform_int_distribution<int> code(0, 0xfd);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto e4m3 = [&] {
    const int c = code(rng);
    return uint8_t(c < 0x7f ? c : c + 1);  // no NaN
  };
  const size_t wcount = size_t(p.n * p.k) * size_t(p.copies);
  if (p.kind == Kind::kBF16) {
    p.w.resize(wcount * 2);
    auto* w = reinterpret_cast<BFloat16*>(p.w.data());
    for (size_t i = 0; i < wcount; ++i) w[i] = float_to_bf16(0.05f * nd(rng));
  } else {
    p.w.resize(wcount);
    for (auto& c : p.w) c = e4m3();
  }
  const size_t acount = size_t(p.m * p.k);
  if (p.kind == Kind::kW8A16 || p.kind == Kind::kBF16) {
    p.a.resize(acount * 2);
    auto* a = reinterpret_cast<BFloat16*>(p.a.data());
    for (size_t i = 0; i < acount; ++i) a[i] = float_to_bf16(nd(rng));
  } else {
    p.a.resize(acount);
    for (auto& c : p.a) c = e4m3();
  }
  std::uniform_real_distribution<float> s(0.001f, 0.01f);
  const int64_t kb = (p.k + 127) / 128, nb = (p.n + 127) / 128;
  p.sa.resize(size_t(p.kind == Kind::kBlock ? p.m * kb : p.m));
  p.sb.resize(size_t(p.kind == Kind::kBlock ? nb * kb : p.n));
  for (auto& x : p.sa) x = s(rng);
  for (auto& x : p.sb) x = s(rng);
  p.out.resize(size_t(p.m * p.n));
}

// The engine's plan for p (its kernel family), for the tables.
std::string family_of(const Problem& p, int threads) {
  ops::cpu::Operand a = ops::cpu::Operand::kE4M3, b = ops::cpu::Operand::kE4M3;
  if (p.kind == Kind::kW8A16) a = ops::cpu::Operand::kBF16;
  if (p.kind == Kind::kBF16) a = b = ops::cpu::Operand::kBF16;
  ops::cpu::GemmDesc d;
  d.m = p.m, d.n = p.n, d.k = p.k, d.a_type = a, d.b_type = b;
  d.blockwise = p.kind == Kind::kBlock;
  d.block_k = 128;
  d.isa = best_cpu_isa();
  d.max_threads = threads;
  return std::string(ops::cpu::gemm_kernel_name(ops::cpu::plan_cpu_gemm(d, Overrides{}).kernel));
}

// Runs weight copy `copy` (columns [0, cols)) of p on the engine (fast) or the reference, into out.
void run(const Problem& p, int copy, int64_t cols, BFloat16* out, bool reference, int threads) {
  Overrides o;
  o.cpu_backend = reference ? CpuBackend::kReference : CpuBackend::kFast;
  const uint8_t* w = p.w.data() + size_t(copy) * p.weight_bytes();
  if (p.kind == Kind::kW8A16) {
    ops::WeightOnlyMmArgs a;
    a.m = p.m, a.n = cols, a.k = p.k;
    a.x = p.a.data(), a.ldx = p.k, a.act_dtype = DType::kBF16;
    a.w = w, a.ldw = p.k;
    a.scale = p.sb.data(), a.scale_kind = ops::ScaleKind::kRow;
    a.out = out, a.ldc = cols;
    ops::weight_only_mm_cpu(a, o, threads);
  } else if (p.kind == Kind::kBF16) {
    ops::Matmul16Args a;
    a.m = p.m, a.n = cols, a.k = p.k, a.dtype = DType::kBF16;
    a.x = p.a.data(), a.ldx = p.k, a.w = w, a.ldw = p.k;
    a.out = out, a.ldc = cols;
    ops::matmul_16bit_cpu(a, o, threads);
  } else {
    ops::ScaledMmArgs a;
    a.m = p.m, a.n = cols, a.k = p.k;
    a.a = p.a.data(), a.lda = p.k, a.b = w, a.ldb = p.k;
    a.scale_a = p.sa.data(), a.scale_b = p.sb.data();
    if (p.kind == Kind::kBlock) {
      a.scale_a_kind = a.scale_b_kind = ops::ScaleKind::kBlock;
      a.sa_row_stride = (p.k + 127) / 128, a.sa_group_stride = 1;
      a.sb_row_stride = (p.k + 127) / 128, a.sb_group_stride = 1;
      a.block_n = a.block_k = 128;
    } else {
      a.scale_a_kind = p.kind == Kind::kPerTensor ? ops::ScaleKind::kTensor : ops::ScaleKind::kRow;
      a.scale_b_kind = a.scale_a_kind;
    }
    a.out = out, a.ldc = cols, a.out_dtype = DType::kBF16;
    ops::scaled_mm_cpu(a, o, threads);
  }
}

// The fast engine against the reference on 64 columns, and the full run's first 64 columns
// against the slice's bits. Returns an empty string when all is well.
std::string verify(const Problem& p, int threads) {
  const int64_t cols = std::min<int64_t>(64, p.n);
  std::vector<BFloat16> fast(size_t(p.m * cols)), ref(size_t(p.m * cols)), full(size_t(p.m * p.n));
  run(p, 0, cols, fast.data(), false, threads);
  run(p, 0, cols, ref.data(), true, threads);
  run(p, 0, p.n, full.data(), false, threads);
  double peak = 0;
  for (auto v : ref) peak = std::max(peak, std::abs(double(bf16_to_float(v))));
  for (int64_t i = 0; i < p.m * cols; ++i) {
    const double f = bf16_to_float(fast[size_t(i)]), r = bf16_to_float(ref[size_t(i)]);
    // bf16 outputs: a rounding step of either result, plus f32 summation noise far below it.
    if (!(std::abs(f - r) <= std::ldexp(std::abs(r), -7) + 1e-4 * peak)) {
      return "mismatch at " + std::to_string(i) + ": " + std::to_string(f) + " vs " + std::to_string(r);
    }
    const int64_t row = i / cols, col = i % cols;
    if (std::memcmp(&full[size_t(row * p.n + col)], &fast[size_t(i)], 2) != 0) return "full run differs from the slice";
  }
  return {};
}

int copies_for(size_t bytes) { return int(std::clamp<size_t>((size_t(192) << 20) / bytes + 1, 1, 64)); }

void decode_table(int threads, bool quick) {
  std::printf("\n### Decode GEMV, %d threads: GB/s of weights vs the read bandwidth of the same bytes\n\n", threads);
  std::printf("| layer | N x K | kernel | family | M | us | weight GB/s | read GB/s | ratio | cpu share | GB/s per core-s | load |\n");
  std::printf("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::mt19937 rng(1);
  for (const Shape2& s : kShapes) {
    for (Kind kind : {Kind::kTokenChannel, Kind::kBlock, Kind::kW8A16, Kind::kBF16}) {
      if (quick && kind != Kind::kTokenChannel) continue;
      const size_t bytes = size_t(s.n * s.k) * (kind == Kind::kBF16 ? 2 : 1);
      const int copies = copies_for(bytes);
      const double read = read_bandwidth_gbs(bytes, copies, threads);
      const double read_share = last_cpu_share(threads);
      for (int64_t m : {1, 2, 4, 8}) {
        Problem p{kind, m, s.n, s.k, copies, {}, {}, {}, {}, {}};
        fill(p, rng);
        const std::string bad = verify(p, threads);
        if (!bad.empty()) {
          std::printf("| %s | %lldx%lld | %s | %lld | VERIFY FAILED: %s |\n", s.model, (long long)s.n, (long long)s.k,
                      kind_name(kind), (long long)m, bad.c_str());
          continue;
        }
        int call = 0;
        const double sec = median_seconds([&] { run(p, call++ % copies, p.n, p.out.data(), false, threads); });
        const double gbs = double(bytes) / sec * 1e-9;
        const double share = last_cpu_share(threads);
        std::printf("| %s | %lldx%lld | %s | %s | %lld | %.1f | %.2f | %.2f | %.2f | %.2f / %.2f | %.2f | %s |\n", s.model,
                    (long long)s.n, (long long)s.k, kind_name(kind), family_of(p, threads).c_str(), (long long)m,
                    sec * 1e6, gbs, read, gbs / read, share, read_share, gbs / (share * threads), load_average().c_str());
        std::fflush(stdout);
      }
    }
  }
}

void prefill_table(int threads, bool quick) {
  const double peak = fma_peak_gflops(threads);
  const double peak_share = last_cpu_share(threads);
  const double dot_peak = bf16_dot_peak_gflops(threads);
  std::printf("\n### Prefill GEMM, %d threads: GFLOP/s vs the f32 FMA peak (%.1f GFLOP/s, cpu share %.2f: %.1f per "
              "core-s) and the VDPBF16PS peak (%.1f GFLOP/s), %s\n\n",
              threads, peak, peak_share, peak / (peak_share * threads), dot_peak, load_average().c_str());
  std::printf("| layer | N x K | kernel | family | M | ms | GFLOP/s | of f32 FMA peak | cpu share | GFLOP/s per core-s | load |\n");
  std::printf("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  std::mt19937 rng(2);
  for (const Shape2& s : kShapes) {
    for (Kind kind : {Kind::kPerTensor, Kind::kTokenChannel, Kind::kBlock, Kind::kW8A16, Kind::kBF16}) {
      if (quick && kind != Kind::kTokenChannel) continue;
      for (int64_t m : {64, 512}) {
        Problem p{kind, m, s.n, s.k, 1, {}, {}, {}, {}, {}};
        fill(p, rng);
        const std::string bad = verify(p, threads);
        if (!bad.empty()) {
          std::printf("| %s | %lldx%lld | %s | %lld | VERIFY FAILED: %s |\n", s.model, (long long)s.n, (long long)s.k,
                      kind_name(kind), (long long)m, bad.c_str());
          continue;
        }
        const double sec = median_seconds([&] { run(p, 0, p.n, p.out.data(), false, threads); }, 3, 0.0);
        const double gflops = 2.0 * double(m * s.n * s.k) / sec * 1e-9;
        const double share = last_cpu_share(threads);
        std::printf("| %s | %lldx%lld | %s | %s | %lld | %.2f | %.1f | %.2f | %.2f | %.1f | %s |\n", s.model, (long long)s.n,
                    (long long)s.k, kind_name(kind), family_of(p, threads).c_str(), (long long)m, sec * 1e3, gflops,
                    gflops / peak, share, gflops / (share * threads), load_average().c_str());
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace
}  // namespace fp8kit::bench

int main(int argc, char** argv) {
  using namespace fp8kit;
  int threads = num_threads();
  bool decode = true, prefill = true, quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--decode-only") {
      prefill = false;
    } else if (arg == "--prefill-only") {
      decode = false;
    } else if (arg == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: bench_cpu_gemm [--threads T] [--decode-only | --prefill-only] [--quick]\n");
      return 2;
    }
  }
  const CpuFeatures& f = cpu_features();
  std::printf("CPU backend: kernel family %s (avx2 %d fma %d f16c %d avx512f %d avx512_bf16 %d), pool %d threads, %s\n",
              std::string(cpu_isa_name(best_cpu_isa())).c_str(), f.avx2, f.fma, f.f16c, f.avx512f, f.avx512_bf16,
              num_threads(), bench::load_average().c_str());
  if (decode) bench::decode_table(threads, quick);
  if (prefill) bench::prefill_table(threads, quick);
  return 0;
}
