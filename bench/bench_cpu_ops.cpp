// Benchmark of the fast CPU backend's element-wise ops (not a test): the activation
// quantizations (scaled_fp8_quant static / dynamic per-tensor / per-token, per_token_group_quant
// 1 x 128) and silu_and_mul, the fast kernels against the reference in the same run, in GB/s of
// bytes read + written against the read bandwidth of the input's bytes (same threads), on the
// activations of SmolLM2-135M and Llama-3-8B layers at decode and prefill sizes. Each pair is
// verified once (the quantizations byte for byte; silu within one bf16 step) before timing.
//   bench_cpu_ops [--threads T]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_cpu_floors.h"
#include "core/parallel.h"
#include "fp8kit/half.h"
#include "ops/activation/activation_cpu.h"
#include "ops/quant/quant_cpu.h"

namespace fp8kit::bench {
namespace {

enum class Op { kStatic, kPerTensor, kPerToken, kGroup, kSilu };
const char* op_name(Op op) {
  const char* names[] = {"scaled_fp8_quant static", "scaled_fp8_quant per-tensor", "scaled_fp8_quant per-token",
                         "per_token_group_quant 1x128", "silu_and_mul"};
  return names[int(op)];
}

struct Buffers {
  int64_t m, k;  // quant: [m, k] bf16 in; silu: [m, 2k] bf16 in, [m, k] out
  std::vector<BFloat16> x;
  std::vector<uint8_t> q;
  std::vector<BFloat16> y;
  std::vector<float> scale;
};

void run(Op op, Buffers& b, bool reference, int threads) {
  Overrides o;
  o.cpu_backend = reference ? CpuBackend::kReference : CpuBackend::kFast;
  if (op == Op::kSilu) {
    ops::ActAndMulArgs a;
    a.rows = b.m, a.d = b.k, a.x = b.x.data(), a.ldx = 2 * b.k, a.out = b.y.data(), a.ldo = b.k;
    a.dtype = DType::kBF16;
    return ops::act_and_mul_cpu(a, o, threads);
  }
  if (op == Op::kGroup) {
    ops::PerTokenGroupQuantArgs a;
    a.input = b.x.data(), a.in_dtype = DType::kBF16, a.rows = b.m, a.k = b.k, a.input_row_stride = b.k;
    a.out = b.q.data(), a.out_row_stride = b.k, a.scale = b.scale.data();
    a.scale_row_stride = 1, a.scale_group_stride = b.m, a.group_size = 128;
    return ops::per_token_group_quant_cpu(a, o, threads);
  }
  ops::ScaledFp8QuantArgs a;
  a.input = b.x.data(), a.in_dtype = DType::kBF16, a.m = b.m, a.k = b.k, a.input_row_stride = b.k;
  a.out = b.q.data(), a.out_rows = b.m, a.out_row_stride = b.k, a.scale = b.scale.data();
  a.mode = op == Op::kStatic ? ops::ScaledQuantMode::kStatic
           : op == Op::kPerTensor ? ops::ScaledQuantMode::kDynamicPerTensor
                                  : ops::ScaledQuantMode::kDynamicPerToken;
  if (op == Op::kStatic) b.scale[0] = 0.02f;
  ops::scaled_fp8_quant_cpu(a, o, threads);
}

// The fast result against the reference's: "" when they agree.
std::string verify(Op op, Buffers& b, int threads) {
  run(op, b, true, threads);
  const std::vector<uint8_t> q = b.q;
  const std::vector<BFloat16> y = b.y;
  const std::vector<float> s = b.scale;
  run(op, b, false, threads);
  if (op == Op::kSilu) {
    for (size_t i = 0; i < y.size(); ++i) {
      if (std::abs(int(y[i].bits) - int(b.y[i].bits)) > 1) return "silu differs by more than one step at " + std::to_string(i);
    }
    return {};
  }
  if (q != b.q) return "codes differ";
  if (std::memcmp(s.data(), b.scale.data(), s.size() * 4) != 0) return "scales differ";
  return {};
}

}  // namespace
}  // namespace fp8kit::bench

int main(int argc, char** argv) {
  using namespace fp8kit;
  using namespace fp8kit::bench;
  int threads = num_threads();
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--threads" && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_cpu_ops [--threads T]\n");
      return 2;
    }
  }
  std::printf("### Element-wise ops, %d threads: GB/s (bytes read + written), fast vs reference\n\n", threads);
  std::printf("| op | rows x K (bf16) | fast us | fast GB/s | reference us | speedup | read GB/s | fast / read | cpu share | load |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (Op op : {Op::kStatic, Op::kPerTensor, Op::kPerToken, Op::kGroup, Op::kSilu}) {
    for (auto [m, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 576}, {1, 4096}, {512, 576}, {512, 4096}}) {
      const int64_t kk = op == Op::kSilu ? (k == 576 ? 1536 : 14336) : k;  // silu: the MLP's intermediate
      Buffers b{m, kk, {}, {}, {}, {}};
      b.x.resize(size_t(m * kk * (op == Op::kSilu ? 2 : 1)));
      for (auto& v : b.x) v = float_to_bf16(nd(rng));
      b.q.resize(size_t(m * kk));
      b.y.resize(size_t(m * kk));
      b.scale.resize(size_t(m * kk / 128 + m + 1), 1.0f);
      const std::string bad = verify(op, b, threads);
      if (!bad.empty()) {
        std::printf("| %s | %lldx%lld | VERIFY FAILED: %s |\n", op_name(op), (long long)m, (long long)kk, bad.c_str());
        continue;
      }
      const size_t in_bytes = b.x.size() * 2;
      const size_t bytes = in_bytes + (op == Op::kSilu ? b.y.size() * 2 : b.q.size());
      const double fast = median_seconds([&] { run(op, b, false, threads); });
      const double share = last_cpu_share(threads);
      const double ref = median_seconds([&] { run(op, b, true, threads); });
      const double read = read_bandwidth_gbs(in_bytes, 1, threads);
      const double gbs = double(bytes) / fast * 1e-9;
      std::printf("| %s | %lldx%lld | %.1f | %.2f | %.1f | %.2f | %.2f | %.2f | %.2f | %s |\n", op_name(op), (long long)m,
                  (long long)kk, fast * 1e6, gbs, ref * 1e6, ref / fast, read, gbs / read, share, load_average().c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
