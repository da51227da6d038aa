// The cases of bench_gemm (bench_gemm_cases.h). Weights are random e4m3 codes (never zero or NaN)
// or random bf16, generated on the GPU once per shape; activations once per (shape, M). When a
// case's operands are under 2x the L2 they are copied so that timed launches rotate through >= 2x
// L2 of data. Verification: the output is poisoned and must be fully written; a slice (first and
// last 8 rows x three 128-column blocks) must match the CPU reference within vLLM's tolerance.
#include "bench_gemm_cases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <random>

#include "bench_gemm_cublas.h"
#include "fp8kit/half.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/quant.h"
#include "fp8kit/platform.h"

namespace fp8kit::bench {
namespace {

constexpr int64_t kBlock = 128;
// vLLM's FP8 GEMM tests: |y - ref| <= atol + rtol |ref|. Also ||y - ref|| / ||ref|| <= kMaxRelL2.
constexpr double kAtol = 0.15, kRtol = 2e-2, kMaxRelL2 = 1e-2;
// RMS of a random e4m3 code drawn as fill_random_e4m3 draws them (E[v^2] = 11501).
constexpr double kE4m3Rms = 107.24;

struct ScalingInfo {
  const char* key;
  const char* description;
};

constexpr ScalingInfo kScalings[] = {
    {"per_tensor", "scaled_mm, per-tensor x per-tensor scales, bf16 out"},
    {"per_token_channel", "scaled_mm, per-token [M,1] x per-channel [N,1] scales, bf16 out"},
    {"block", "scaled_mm, 1x128 act groups (column-major scales) x 128x128 weight blocks, bf16 out"},
    {"bf16", "bf16 x bf16 -> bf16, cuBLASLt, f32 accumulation"},
    {"weight_only", "weight_only_mm (W8A16): bf16 x e4m3 weights, per-channel scales, bf16 out"},
    {"weight_only_block", "weight_only_mm (W8A16): bf16 x e4m3 weights, 128x128 block scales, bf16 out"},
};

bool is_weight_only(const std::string& key) { return key == "weight_only" || key == "weight_only_block"; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Tensor host_f32(const std::vector<float>& values, const Shape& shape) { return Tensor::from_vector(values, shape); }

// `count` values base * U(0.5, 1.5): positive, never equal, never zero.
std::vector<float> random_scales(int64_t count, double base, std::mt19937& rng) {
  std::uniform_real_distribution<double> d(0.5, 1.5);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = static_cast<float>(base * d(rng));
  return v;
}

// Inputs of one shape, shared by every M: weights (copies) and weight scales.
struct WeightInputs {
  int64_t n = 0, k = 0;
  std::vector<Tensor> w8;   // [N, K] e4m3fn
  std::vector<Tensor> wbf;  // [N, K] bf16
  Tensor sb_tensor, sb_channel, sb_block;            // on the GPU
  Tensor sb_tensor_h, sb_channel_h, sb_block_h;      // the same on the CPU
};

// Inputs of one (shape, M).
struct ActInputs {
  int64_t m = 0;
  std::vector<Tensor> a8;                 // [M, K] e4m3fn random codes
  std::vector<Tensor> abf;                // [M, K] bf16
  std::vector<Tensor> ablock, sa_block;   // per_token_group_quant(abf): codes, [M, K/128] col-major scales
  Tensor sa_tensor, sa_token;             // GPU
  Tensor sa_tensor_h, sa_token_h;         // CPU
  std::vector<Tensor> out;                // [M, N] bf16
};

// One case: the GPU call on input copy i, and the reference of the output block
// rows [r0, r0 + nr) x columns [c0, c0 + nc) as f32 (CPU).
struct Plan {
  std::function<void(int)> run;
  std::function<std::vector<double>(int64_t, int64_t, int64_t, int64_t)> reference;
};

std::vector<double> to_doubles(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> v(static_cast<size_t>(c.numel()));
  if (c.dtype() == DType::kF32) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = c.data<float>()[i];
  } else if (c.dtype() == DType::kBF16) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_float(c.data<BFloat16>()[i]);
  } else {
    throw std::runtime_error("to_doubles: unexpected dtype " + c.description());
  }
  return v;
}

Plan make_plan(const std::string& key, const WeightInputs& w, const ActInputs& a, Bf16CublasLtGemm* bf16_gemm,
               bool fast_accum, cudaStream_t stream) {
  const Device cpu = Device::cpu();
  Plan p;
  auto options = [&a, fast_accum](int i) {
    ops::ScaledMmOptions o;
    o.out_dtype = DType::kBF16;
    o.output = a.out[static_cast<size_t>(i)];
    o.fast_accum = fast_accum;
    return o;
  };
  // CPU scaled_mm of the slice: a rows, b rows (= output columns), their scales.
  auto cpu_ref = [cpu](const Tensor& a_dev, const Tensor& w_dev, const Tensor& sa, const Tensor& sb, bool block,
                       int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
    ops::ScaledMmOptions o;
    o.out_dtype = DType::kF32;
    if (block) o.block = std::pair<int64_t, int64_t>{kBlock, kBlock};
    const Tensor y = ops::scaled_mm(bench_ctx(a_dev.narrow(0, r0, nr).to(cpu)), a_dev.narrow(0, r0, nr).to(cpu), w_dev.narrow(0, c0, nc).to(cpu), sa, sb, o);
    return to_doubles(y);
  };
  if (key == "per_tensor") {
    p.run = [&w, &a, options](int i) {
      ops::scaled_mm(bench_ctx(a.a8[size_t(i)]), a.a8[size_t(i)], w.w8[size_t(i)].t(), a.sa_tensor, w.sb_tensor, options(i));
    };
    p.reference = [&w, &a, cpu_ref](int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
      return cpu_ref(a.a8[0], w.w8[0], a.sa_tensor_h, w.sb_tensor_h, false, r0, nr, c0, nc);
    };
  } else if (key == "per_token_channel") {
    p.run = [&w, &a, options](int i) {
      ops::scaled_mm(bench_ctx(a.a8[size_t(i)]), a.a8[size_t(i)], w.w8[size_t(i)].t(), a.sa_token, w.sb_channel, options(i));
    };
    p.reference = [&w, &a, cpu_ref](int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
      return cpu_ref(a.a8[0], w.w8[0], a.sa_token_h.narrow(0, r0, nr), w.sb_channel_h.narrow(0, c0, nc), false, r0,
                     nr, c0, nc);
    };
  } else if (key == "block") {
    p.run = [&w, &a, options](int i) {
      ops::ScaledMmOptions o = options(i);
      o.block = std::pair<int64_t, int64_t>{kBlock, kBlock};
      ops::scaled_mm(bench_ctx(a.ablock[size_t(i)]), a.ablock[size_t(i)], w.w8[size_t(i)].t(), a.sa_block[size_t(i)], w.sb_block, o);
    };
    p.reference = [&w, &a, cpu_ref, cpu](int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
      // c0 is a multiple of 128: the slice's weight blocks start at block row c0 / 128.
      const Tensor sa = a.sa_block[0].narrow(0, r0, nr).to(cpu);
      const Tensor sb = w.sb_block_h.narrow(0, c0 / kBlock, ceil_div(nc, kBlock));
      return cpu_ref(a.ablock[0], w.w8[0], sa, sb, true, r0, nr, c0, nc);
    };
  } else if (key == "bf16") {
    p.run = [&w, &a, bf16_gemm, stream](int i) {
      bf16_gemm->run(a.abf[size_t(i)].data_ptr(), w.wbf[size_t(i)].data_ptr(), a.out[size_t(i)].data_ptr(), stream);
    };
    p.reference = [&w, &a, cpu](int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
      const std::vector<double> x = to_doubles(a.abf[0].narrow(0, r0, nr).to(cpu));
      const std::vector<double> wt = to_doubles(w.wbf[0].narrow(0, c0, nc).to(cpu));
      const int64_t k = w.k;
      std::vector<double> y(static_cast<size_t>(nr * nc));
      for (int64_t i = 0; i < nr; ++i) {
        for (int64_t j = 0; j < nc; ++j) {
          double s = 0;
          for (int64_t kk = 0; kk < k; ++kk) s += x[size_t(i * k + kk)] * wt[size_t(j * k + kk)];
          y[size_t(i * nc + j)] = s;
        }
      }
      return y;
    };
  } else if (key == "weight_only") {
    p.run = [&w, &a](int i) {
      ops::WeightOnlyMmOptions o;
      o.output = a.out[size_t(i)];
      ops::weight_only_mm(bench_ctx(a.abf[size_t(i)]), a.abf[size_t(i)], w.w8[size_t(i)].t(), w.sb_channel, o);
    };
    p.reference = [&w, &a, cpu](int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
      return to_doubles(ops::weight_only_mm(bench_ctx(a.abf[0].narrow(0, r0, nr).to(cpu)), a.abf[0].narrow(0, r0, nr).to(cpu), w.w8[0].narrow(0, c0, nc).to(cpu),
                                            w.sb_channel_h.narrow(0, c0, nc)));
    };
  } else if (key == "weight_only_block") {
    p.run = [&w, &a](int i) {
      ops::WeightOnlyMmOptions o;
      o.block = std::pair<int64_t, int64_t>{kBlock, kBlock};
      o.output = a.out[size_t(i)];
      ops::weight_only_mm(bench_ctx(a.abf[size_t(i)]), a.abf[size_t(i)], w.w8[size_t(i)].t(), w.sb_block, o);
    };
    p.reference = [&w, &a, cpu](int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
      ops::WeightOnlyMmOptions o;
      o.block = std::pair<int64_t, int64_t>{kBlock, kBlock};
      const Tensor sb = w.sb_block_h.narrow(0, c0 / kBlock, ceil_div(nc, kBlock));
      return to_doubles(
          ops::weight_only_mm(bench_ctx(a.abf[0].narrow(0, r0, nr).to(cpu)), a.abf[0].narrow(0, r0, nr).to(cpu), w.w8[0].narrow(0, c0, nc).to(cpu), sb, o));
    };
  } else {
    throw std::runtime_error("unknown scaling " + key);
  }
  return p;
}

// Row ranges (first, count) and 128-aligned column ranges checked against the reference.
std::vector<std::pair<int64_t, int64_t>> verify_rows(int64_t m) {
  if (m <= 16) return {{0, m}};
  return {{0, 8}, {m - 8, 8}};
}

std::vector<std::pair<int64_t, int64_t>> verify_cols(int64_t n) {
  if (n <= 3 * kBlock) return {{0, n}};
  std::vector<int64_t> starts = {0, (n / 2) / kBlock * kBlock, (n - 1) / kBlock * kBlock};
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  std::vector<std::pair<int64_t, int64_t>> cols;
  for (int64_t c : starts) cols.push_back({c, std::min(kBlock, n - c)});
  return cols;
}

// Runs the plan once on copy 0 into a poisoned output, checks that every element was written and
// compares the slices with the reference; fills the verify fields of `r`.
void verify(const Plan& p, const ActInputs& a, int64_t n, cudaStream_t stream, GemmCaseResult& r) {
  Tensor out = a.out[0];  // shares the buffer
  out.fill_bytes_(kPoisonByte, Stream{static_cast<void*>(stream)});
  p.run(0);
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (verify)");
  check_cuda(cudaGetLastError(), "verify launch");
  std::string note;
  const int64_t missing = count_poisoned(out.data_ptr(), a.m, n, n, 1, 2, stream);
  if (missing != 0) note = fmt::format("{} of {} output elements never written", missing, a.m * n);
  double worst = 0, diff2 = 0, ref2 = 0;
  bool nan = false;
  for (const auto& [r0, nr] : verify_rows(a.m)) {
    for (const auto& [c0, nc] : verify_cols(n)) {
      const std::vector<double> want = p.reference(r0, nr, c0, nc);
      const std::vector<double> got = to_doubles(out.narrow(0, r0, nr).narrow(1, c0, nc).to(Device::cpu()));
      for (size_t i = 0; i < got.size(); ++i) {
        const double e = std::abs(got[i] - want[i]);
        const double ratio = e / (kAtol + kRtol * std::abs(want[i]));
        if (!(ratio <= worst)) {
          if (std::isnan(ratio)) nan = true;
          else worst = ratio;
        }
        diff2 += e * e;
        ref2 += want[i] * want[i];
      }
      r.verify_elements += static_cast<int64_t>(got.size());
    }
  }
  r.max_err_over_tol = nan ? std::nan("") : worst;
  r.rel_l2 = std::sqrt(diff2 / std::max(ref2, 1e-300));
  auto add = [&note](const std::string& s) { note += (note.empty() ? "" : "; ") + s; };
  if (nan) add("NaN in the output");
  if (!nan && worst > 1.0) add(fmt::format("max |y - ref| / ({} + {} |ref|) = {:.3g} > 1", kAtol, kRtol, worst));
  if (!(r.rel_l2 <= kMaxRelL2)) add(fmt::format("relative L2 error {:.3g} > {}", r.rel_l2, kMaxRelL2));
  r.verify_ok = note.empty();
  r.verify_note = note;
}

std::string case_name(const std::string& scaling, const GemmShape& s, int64_t m) {
  return fmt::format("{} {}x{} M={}", scaling, s.n, s.k, m);
}

// A seed per (what, a, b, c), well mixed: the generators index a counter-based stream from the
// seed, so plain sums of small numbers would give overlapping (shifted) streams.
uint64_t seed_of(uint64_t what, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = what;
  for (uint64_t v : {a, b, c}) {
    x ^= v + 0x9e3779b97f4a7c15ull + (x << 6) + (x >> 2);
    x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
  }
  return x ^ (x >> 29);
}

void fill_e4m3(const Tensor& t, uint64_t seed, cudaStream_t stream) {
  fill_random_e4m3(t.data_ptr(), t.numel(), seed, stream);
}

// One CUDA graph per input copy, each capturing plan.run(copy); r.graph_us is the median of their
// replays, timed like the launches. A call that cannot be captured leaves r.graph_error.
void time_graph_replays(Timer& timer, cudaStream_t stream, const Plan& plan, int copies, GemmCaseResult& r) {
  std::vector<cudaGraphExec_t> execs;
  auto destroy = [&] {
    for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
  };
  try {
    for (int i = 0; i < copies; ++i) {
      cudaGraph_t graph = nullptr;
      check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
      try {
        plan.run(i);
      } catch (...) {
        cudaStreamEndCapture(stream, &graph);
        if (graph != nullptr) cudaGraphDestroy(graph);
        throw;
      }
      check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
      cudaGraphExec_t exec = nullptr;
      const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      check_cuda(instantiated, "cudaGraphInstantiate");
      execs.push_back(exec);
    }
    r.graph_us = timer.time([&](int i) { check_cuda(cudaGraphLaunch(execs[i % copies], stream), "cudaGraphLaunch"); })
                     .median_us;
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (graph replays)");
  } catch (const std::exception& e) {
    r.graph_error = e.what();
    cudaGetLastError();
  }
  destroy();
}

}  // namespace

const std::vector<GemmShape>& default_shapes() {
  static const std::vector<GemmShape> shapes = {
      {"llama3-8b", 6144, 4096},   {"llama3-8b", 4096, 4096},    {"llama3-8b", 28672, 4096},
      {"llama3-8b", 4096, 14336},  {"llama3-70b", 8192, 8192},   {"llama3-70b", 57344, 8192},
      {"llama3-70b", 8192, 28672}, {"deepseek-v3", 24576, 7168}, {"deepseek-v3", 7168, 18432},
      {"deepseek-v3", 2112, 7168}, {"deepseek-v3", 7168, 2048},
  };
  return shapes;
}

const std::vector<int64_t>& default_ms() {
  static const std::vector<int64_t> ms = {1, 16, 64, 128, 512, 2048, 8192};
  return ms;
}

const std::vector<std::string>& all_scalings() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const ScalingInfo& s : kScalings) k.push_back(s.key);
    return k;
  }();
  return keys;
}

std::vector<GemmCaseResult> GemmRunner::run_all(const GemmRunConfig& config) {
  std::vector<GemmCaseResult> results;
  std::unique_ptr<Bf16CublasLtGemm> bf16_gemm;
  const Device gpu = Device::cuda(0);
  for (const GemmShape& shape : config.shapes) {
    const int64_t n = shape.n, k = shape.k;
    // Which scalings run at which M for this shape.
    std::vector<std::pair<int64_t, std::vector<int>>> work;
    bool need_fp8 = false, need_bf16 = false;
    for (int64_t m : config.ms) {
      std::vector<int> wanted;
      for (int s = 0; s < int(std::size(kScalings)); ++s) {
        const std::string key = kScalings[s].key;
        if (std::find(config.scalings.begin(), config.scalings.end(), key) == config.scalings.end()) continue;
        if (!config.filter.empty() && case_name(key, shape, m).find(config.filter) == std::string::npos) continue;
        wanted.push_back(s);
        (key == "bf16" ? need_bf16 : need_fp8) = true;
      }
      if (!wanted.empty()) work.push_back({m, wanted});
    }
    if (work.empty()) continue;

    std::mt19937 rng(static_cast<uint32_t>(n * 7919 + k));
    const int copies_w = static_cast<int>(std::clamp(std::ceil(2.0 * l2_bytes_ / double(n * k)), 1.0, 8.0));
    WeightInputs w;
    w.n = n;
    w.k = k;
    // |y| ~ 8: per-tensor / per-channel scales sa * sb ~ 8 / (sqrt(K) E[v^2]) for random codes.
    const double code_base = std::sqrt(8.0 / (std::sqrt(double(k)) * kE4m3Rms * kE4m3Rms));
    for (int c = 0; c < copies_w; ++c) {
      if (need_fp8) {
        w.w8.push_back(Tensor::empty({n, k}, DType::kE4M3FN, gpu));
        fill_e4m3(w.w8.back(), seed_of(1, uint64_t(n), uint64_t(k), uint64_t(c)), stream_);
      }
      if (need_bf16) {
        w.wbf.push_back(Tensor::empty({n, k}, DType::kBF16, gpu));
        fill_random_bf16(w.wbf.back().data_ptr(), n, k, seed_of(2, uint64_t(n), uint64_t(k), uint64_t(c)), stream_);
      }
    }
    w.sb_tensor_h = Tensor::scalar_f32(random_scales(1, code_base, rng)[0]);
    w.sb_channel_h = host_f32(random_scales(n, code_base, rng), {n, 1});
    // Block weights meet activations quantized from bf16 rows of |x| <= 2^e (E[x^2] = 4^e / 3):
    // sb ~ 8 sqrt(3) / (sqrt(K) rms(code)) keeps |y| ~ 8 for e = 0.
    const double block_base = 8.0 * std::sqrt(3.0) / (std::sqrt(double(k)) * kE4m3Rms);
    w.sb_block_h = host_f32(random_scales(ceil_div(n, kBlock) * (k / kBlock), block_base, rng),
                            {ceil_div(n, kBlock), k / kBlock});
    // The read floor of the weights where a case streams them (decode sizes).
    double read_us_w8 = -1, read_us_wbf = -1;
    if (std::any_of(work.begin(), work.end(), [](const auto& item) { return item.first <= kReadFloorMaxM; })) {
      check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (weights)");
      if (need_fp8) read_us_w8 = measure_stream_read(w.w8[0].data_ptr(), size_t(n * k), timer_, stream_).median_us;
      if (need_bf16) read_us_wbf = measure_stream_read(w.wbf[0].data_ptr(), size_t(2 * n * k), timer_, stream_).median_us;
    }
    w.sb_tensor = w.sb_tensor_h.to(gpu);
    w.sb_channel = w.sb_channel_h.to(gpu);
    w.sb_block = w.sb_block_h.to(gpu);

    for (const auto& item : work) {
      const int64_t m = item.first;
      const std::vector<int>& wanted = item.second;
      bool need_a8 = false, need_abf = false, need_block = false;
      for (int s : wanted) {
        const std::string key = kScalings[s].key;
        if (key == "per_tensor" || key == "per_token_channel") need_a8 = true;
        if (key == "block") need_abf = need_block = true;
        if (key == "bf16" || is_weight_only(key)) need_abf = true;
      }
      const double case_bytes = double(n) * k + double(m) * k + 2.0 * m * n;
      const int copies = static_cast<int>(std::clamp(std::ceil(2.0 * l2_bytes_ / case_bytes), 1.0, double(copies_w)));
      ActInputs a;
      a.m = m;
      for (int c = 0; c < copies; ++c) {
        if (need_a8) {
          a.a8.push_back(Tensor::empty({m, k}, DType::kE4M3FN, gpu));
          fill_e4m3(a.a8.back(), seed_of(3, uint64_t(m), uint64_t(k), uint64_t(c)), stream_);
        }
        if (need_abf) {
          a.abf.push_back(Tensor::empty({m, k}, DType::kBF16, gpu));
          fill_random_bf16(a.abf.back().data_ptr(), m, k, seed_of(4, uint64_t(m), uint64_t(k), uint64_t(c)), stream_);
        }
        if (need_block) {
          ops::PerTokenGroupQuantOptions o;
          o.group_size = kBlock;
          o.column_major_scales = true;
          o.tma_aligned_scales = config.block_scales_tma_aligned;
          const ops::QuantResult q = ops::per_token_group_quant(bench_ctx(a.abf.back()), a.abf.back(), o);
          a.ablock.push_back(q.q);
          a.sa_block.push_back(q.scale);
        }
        a.out.push_back(Tensor::empty({m, n}, DType::kBF16, gpu));
      }
      a.sa_tensor_h = Tensor::scalar_f32(random_scales(1, code_base, rng)[0]);
      a.sa_token_h = host_f32(random_scales(m, code_base, rng), {m, 1});
      a.sa_tensor = a.sa_tensor_h.to(gpu);
      a.sa_token = a.sa_token_h.to(gpu);
      check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (inputs)");

      for (int s : wanted) {
        GemmCaseResult r;
        r.scaling = kScalings[s].key;
        r.description = kScalings[s].description;
        r.scaling_order = s;
        r.model = shape.model;
        r.shape = fmt::format("{}x{}", n, k);
        r.m = m;
        r.n = n;
        r.k = k;
        r.input_copies = copies;
        const bool bf16 = r.scaling == "bf16";
        r.flops = 2.0 * double(m) * double(n) * double(k);
        r.weight_bytes = (bf16 ? 2.0 : 1.0) * double(n) * double(k);
        const double mk = double(m) * k, mn = double(m) * n;
        if (bf16 || is_weight_only(r.scaling)) {
          const double scale_bytes = r.scaling == "weight_only_block" ? 4.0 * double(ceil_div(n, kBlock)) * double(k / kBlock)
                                                                      : 4.0 * double(n);
          r.min_bytes = 2.0 * mk + r.weight_bytes + 2.0 * mn + (bf16 ? 0.0 : scale_bytes);
        } else {
          double scale_bytes = 8;
          if (r.scaling == "per_token_channel") scale_bytes = 4.0 * double(m + n);
          if (r.scaling == "block") scale_bytes = 4.0 * (double(m) + double(ceil_div(n, kBlock))) * double(k / kBlock);
          r.min_bytes = mk + r.weight_bytes + 2.0 * mn + scale_bytes;
        }
        r.peak_tflops = bf16 || is_weight_only(r.scaling) ? kBf16PeakTflops : kFp8PeakTflops;
        const bool big_weight = double(n) * double(k) >= kLargeWeightBytes && !is_weight_only(r.scaling);
        if (!bf16 && big_weight && m >= kLargeMinM) r.target = fmt::format(">={:.0f} TF/s", kLargeTargetTflops);
        if (!bf16 && big_weight && m <= kDecodeMaxM) r.target = fmt::format(">={:.0f}% copy", kDecodeTargetPctCopy);
        try {
          if (bf16) {
            if (!bf16_gemm) bf16_gemm = std::make_unique<Bf16CublasLtGemm>();
            bf16_gemm->prepare(m, n, k);
            r.description += " (" + bf16_gemm->algo_note() + ")";
          }
          const Plan plan = make_plan(r.scaling, w, a, bf16_gemm.get(), config.fast_accum, stream_);
          verify(plan, a, n, stream_, r);
          auto launch = [&](int i) { plan.run(i % copies); };
          r.timing = timer_.time(launch);
          if (config.back_to_back && m <= kDecodeMaxM) r.b2b_us = timer_.back_to_back_us(launch);
          if (config.graphs && m <= kDecodeMaxM) time_graph_replays(timer_, stream_, plan, copies, r);
          check_cuda(cudaGetLastError(), "timed launches");
          const double t = r.timing.median_us;
          r.tflops = r.flops / (t * 1e6);
          r.pct_peak = 100.0 * r.tflops / r.peak_tflops;
          r.weight_gbps = r.weight_bytes / (t * 1e3);
          r.pct_copy = 100.0 * r.weight_gbps / copy_.gbps;
          if (m <= kReadFloorMaxM) {
            r.read_us = bf16 ? read_us_wbf : read_us_w8;
            r.pct_read = r.read_us > 0 ? 100.0 * r.read_us / t : 0.0;
          }
          if (!r.verify_ok) {
            r.verdict = "FAIL";
          } else if (r.target.empty()) {
            r.verdict = "info";
          } else if (m >= kLargeMinM) {
            r.verdict = r.tflops >= kLargeTargetTflops ? "pass" : "miss";
          } else {
            r.verdict = r.pct_copy >= kDecodeTargetPctCopy ? "pass" : "miss";
          }
        } catch (const std::exception& e) {
          r.error = e.what();
          r.verdict = "FAIL";
          cudaGetLastError();  // a non-sticky launch error must not fail the next case
          cudaStreamSynchronize(stream_);
        }
        if (r.error.empty()) {
          const std::string read = r.read_us > 0 ? fmt::format(" {:>5.1f}% read", r.pct_read) : "";
          fmt::print("  {:<18} {:>11} M={:<5} {:>10.2f} us {:>7.1f} TF/s {:>6.2f} TB/s w {:>5.1f}% copy{}  {}\n",
                     r.scaling, r.shape, r.m, r.timing.median_us, r.tflops, r.weight_gbps / 1e3, r.pct_copy, read,
                     r.verify_ok ? "verified" : "VERIFY FAIL: " + r.verify_note);
        } else {
          fmt::print("  {:<18} {:>11} M={:<5} error: {}\n", r.scaling, r.shape, r.m, r.error);
        }
        std::fflush(stdout);
        results.push_back(std::move(r));
      }
    }
    w = WeightInputs{};
    cuda_empty_cache(0);
  }
  return results;
}

}  // namespace fp8kit::bench
