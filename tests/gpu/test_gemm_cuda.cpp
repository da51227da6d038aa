// scaled_mm on the GPU against the CPU reference and an fp64 reference: every scaling, output
// dtype and bias, the wgmma and decode kernels, cuBLASLt and the generic kernel (forced with
// FP8KIT_GEMM_BACKEND), the wgmma kernel over many persistent tiles, ragged and misaligned shapes, exact results on integer grids, poisoned outputs, run-to-run
// determinism.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "cpu/gemm_test_util.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/quant.h"
#include "gpu_test_util.h"

namespace fp8kit {
namespace {

using namespace gemm_test;
using ops::ScaledMmOptions;

const Device kGpu = Device::cuda(0);

struct Backend {
  const char* name;  // value of FP8KIT_GEMM_BACKEND, or "" for automatic
};

// The cuda:0 context the GPU calls run in: nothing overridden, or the backend a ForceBackend in
// scope names.
const ForwardContext* g_forced = nullptr;
const ForwardContext& gpu_ctx() { return g_forced != nullptr ? *g_forced : gpu_test::cuda_ctx(); }

class ForceBackend {
 public:
  explicit ForceBackend(const char* name)
      : ctx_(kGpu, gpu_test::overrides_of({{"FP8KIT_GEMM_BACKEND", name}})) {
    g_forced = &ctx_;
  }
  ~ForceBackend() { g_forced = nullptr; }

 private:
  ForwardContext ctx_;
};

// The wgmma kernel runs on sm_90 only.
bool has_wgmma() {
  static const bool yes = [] {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    return major == 9 && minor == 0;
  }();
  return yes;
}

std::vector<Backend> backends() {
  std::vector<Backend> b{Backend{""}, Backend{"fallback"}};
  if (has_wgmma()) b.push_back(Backend{"wgmma"});
  return b;
}

struct Problem {
  Tensor a, b, sa, sb, bias;  // CPU tensors
  std::optional<std::pair<int64_t, int64_t>> block;
  DType out = DType::kBF16;
  bool fast_accum = false;  // ScaledMmOptions::fast_accum (the GPU run only)
};

enum class Scaling { kTensor, kTokenChannel, kTokenTensor, kTensorChannel, kBlock };

Problem make_problem(int64_t m, int64_t n, int64_t k, Scaling s, DType out, bool bias, std::mt19937& rng) {
  Problem p;
  p.a = random_e4m3(m, k, rng);
  p.b = random_e4m3(n, k, rng);
  p.out = out;
  switch (s) {
    case Scaling::kTensor: p.sa = random_scales({}, rng); p.sb = random_scales({}, rng); break;
    case Scaling::kTokenChannel: p.sa = random_scales({m, 1}, rng); p.sb = random_scales({n}, rng); break;
    case Scaling::kTokenTensor: p.sa = random_scales({m}, rng); p.sb = random_scales({1}, rng); break;
    case Scaling::kTensorChannel: p.sa = random_scales({1}, rng); p.sb = random_scales({1, n}, rng); break;
    case Scaling::kBlock: {
      // Column-major activation scales, as per_token_group_quant writes them for block GEMMs.
      const Tensor storage = random_scales({k / 128, m}, rng);
      p.sa = storage.t();
      p.sb = random_scales({(n + 127) / 128, k / 128}, rng);
      p.block = std::make_pair(128, 128);
      break;
    }
  }
  if (bias) {
    p.bias = Tensor::empty({n}, out);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float v = d(rng);
      if (out == DType::kBF16) p.bias.data<BFloat16>()[j] = float_to_bf16(v);
      if (out == DType::kF16) p.bias.data<Float16>()[j] = float_to_f16(v);
      if (out == DType::kF32) p.bias.data<float>()[j] = v;
    }
  }
  return p;
}

// Runs the problem on the GPU into a poisoned output (0xFF: NaN in every output dtype).
Tensor run_gpu(const Problem& p) {
  ScaledMmOptions o;
  o.out_dtype = p.out;
  o.block = p.block;
  o.fast_accum = p.fast_accum;
  if (p.bias.defined()) o.bias = p.bias.to(kGpu);
  o.output = Tensor::empty({p.a.size(0), p.b.size(0)}, p.out, kGpu);
  o.output.fill_bytes_(0xff);
  Tensor sa = p.sa.to(kGpu);
  if (p.block) sa = p.sa.contiguous().t().contiguous().to(kGpu).t();  // keep the column-major layout
  return ops::scaled_mm(gpu_ctx(), p.a.to(kGpu), p.b.to(kGpu), sa, p.sb.to(kGpu), o).to(Device::cpu());
}

Tensor run_cpu(const Problem& p) {
  ScaledMmOptions o;
  o.out_dtype = p.out;
  o.block = p.block;
  o.bias = p.bias;
  return ops::scaled_mm(gpu_test::ctx_of(p.a), p.a, p.b, p.sa, p.sb, o);
}

// The sum of |terms| of every output element, sum_k |a b| * sa * sb (per K-block for block
// scaling), in double: the natural scale of accumulation error.
std::vector<double> term_magnitudes(const Problem& p) {
  const int64_t k = p.a.size(1), bk = p.block ? p.block->second : k, bn = p.block ? p.block->first : 1;
  auto sa = [&](int64_t i, int64_t kb) {
    return p.block ? p.sa.data<float>()[i * p.sa.stride(0) + kb * p.sa.stride(1)]
                   : p.sa.data<float>()[p.sa.numel() == 1 ? 0 : i];
  };
  auto sb = [&](int64_t j, int64_t kb) {
    return p.block ? p.sb.data<float>()[(j / bn) * p.sb.stride(0) + kb * p.sb.stride(1)]
                   : p.sb.data<float>()[p.sb.numel() == 1 ? 0 : j];
  };
  Tensor abs_a = p.a.clone(), abs_b = p.b.contiguous().clone();
  for (int64_t i = 0; i < abs_a.numel(); ++i) static_cast<uint8_t*>(abs_a.data_ptr())[i] &= 0x7f;
  for (int64_t i = 0; i < abs_b.numel(); ++i) static_cast<uint8_t*>(abs_b.data_ptr())[i] &= 0x7f;
  return reference_fp64(abs_a, abs_b, bk, sa, sb, {});
}

// GPU against CPU: the FP8 tensor cores accumulate with fewer bits than float (about 14 on
// Hopper), so the bound is a share of the sum of |terms| (2^-10 of it), plus the output's own
// rounding. A dropped or doubled term, a wrong scale or an unwritten (NaN) element fails it.
void expect_close(const Tensor& got, const Tensor& want, const std::vector<double>& magnitude,
                  const std::string& what, double accumulation_bound = 0x1p-10) {
  const double unit = got.dtype() == DType::kF32 ? 1e-6 : got.dtype() == DType::kF16 ? 1e-3 : 8e-3;
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = read_out(got, i), w = read_out(want, i);
    const bool ok = std::abs(g - w) <= 2 * unit * std::abs(w) + accumulation_bound * magnitude[size_t(i)];  // NaN fails
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.numel() << " differ; first at " << first << ": got "
                    << (first >= 0 ? read_out(got, first) : 0) << " want " << (first >= 0 ? read_out(want, first) : 0);
}

const char* scaling_name(Scaling s) {
  switch (s) {
    case Scaling::kTensor: return "tensor";
    case Scaling::kTokenChannel: return "token x channel";
    case Scaling::kTokenTensor: return "token x tensor";
    case Scaling::kTensorChannel: return "tensor x channel";
    case Scaling::kBlock: return "block";
  }
  return "";
}

TEST(GemmCuda, EveryScalingDTypeBiasAndBackendMatchesTheReference) {
  std::mt19937 rng(2026);
  for (const Backend backend : backends()) {
    ForceBackend force(backend.name);
    for (Scaling s : {Scaling::kTensor, Scaling::kTokenChannel, Scaling::kTokenTensor, Scaling::kTensorChannel,
                      Scaling::kBlock}) {
      for (DType out : {DType::kBF16, DType::kF16, DType::kF32}) {
        for (bool bias : {false, true}) {
          for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 256, 256}, {1, 384, 512}, {16, 384, 512}, {8, 320, 256}, {129, 512, 1024}}) {
            const Problem p = make_problem(m, n, k, s, out, bias, rng);
            expect_close(run_gpu(p), run_cpu(p), term_magnitudes(p),
                         std::string("backend '") + backend.name + "' " + scaling_name(s) + " out " + dtype_name(out) +
                             (bias ? " bias" : "") + " m,n,k " + std::to_string(m) + "," + std::to_string(n) + "," +
                             std::to_string(k));
          }
        }
      }
    }
  }
}

TEST(GemmCuda, RaggedAndMisalignedShapesTakeTheGenericKernel) {
  std::mt19937 rng(7);
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {3, 127, 129}, {129, 3, 4097}, {127, 129, 3}}) {
    for (Scaling s : {Scaling::kTensor, Scaling::kTokenChannel}) {
      const Problem p = make_problem(m, n, k, s, DType::kBF16, true, rng);
      expect_close(run_gpu(p), run_cpu(p), term_magnitudes(p), std::string("ragged ") + scaling_name(s) + " m,n,k " + std::to_string(m) + "," +
                                               std::to_string(n) + "," + std::to_string(k));
    }
  }
  // b as the [K, N] column-major view and a narrowed a (row stride 160, K 128).
  const Problem p = make_problem(8, 64, 160, Scaling::kTensor, DType::kF32, false, rng);
  const Tensor a_gpu = p.a.to(kGpu).narrow(1, 0, 128);
  const Tensor b_gpu = p.b.to(kGpu).narrow(1, 0, 128).contiguous().t();
  ScaledMmOptions o;
  o.out_dtype = DType::kF32;
  const Tensor got = ops::scaled_mm(gpu_ctx(), a_gpu, b_gpu, p.sa.to(kGpu), p.sb.to(kGpu), o).to(Device::cpu());
  Problem narrowed = p;
  narrowed.a = p.a.narrow(1, 0, 128).contiguous();
  narrowed.b = p.b.narrow(1, 0, 128).contiguous();
  const Tensor want = ops::scaled_mm(gpu_test::ctx_of(narrowed.a), narrowed.a, narrowed.b, p.sa, p.sb, o);
  expect_close(got, want, term_magnitudes(narrowed), "strided a, column-major b");
}

// Operands on the integer grid -3 .. 3 (exact in e4m3) and an f32 output; scales set by the caller.
Problem integer_grid_problem(int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  std::uniform_int_distribution<int> v(-3, 3);
  std::vector<float> av(m * k), bv(n * k);
  for (float& x : av) x = float(v(rng));
  for (float& x : bv) x = float(v(rng));
  Problem p;
  p.a = e4m3_from(av, m, k);
  p.b = e4m3_from(bv, n, k);
  p.out = DType::kF32;
  return p;
}

// Scales 2^-3 .. 2^2: every product with them is exact.
Tensor pow2_scales(const Shape& shape, std::mt19937& rng) {
  std::uniform_int_distribution<int> e(-3, 2);
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::ldexp(1.0f, e(rng));
  return t;
}

TEST(GemmCuda, ExactOnIntegerGrids) {
  std::mt19937 rng(9);
  // |partial sums| <= 512 * 9 < 2^13: exact even in the tensor cores' reduced-precision FP8
  // accumulation (about 14 bits on Hopper). K = 512 keeps the block case on cuBLASLt.
  const int64_t m = 64, n = 256, k = 512;
  Problem p = integer_grid_problem(m, n, k, rng);
  auto pow2 = [&](const Shape& shape) { return pow2_scales(shape, rng); };
  for (const Backend backend : backends()) {
    ForceBackend force(backend.name);
    p.sa = pow2({m, 1});
    p.sb = pow2({n});
    p.block.reset();
    const Tensor y1 = run_gpu(p), y_ref = run_cpu(p);
    EXPECT_EQ(std::memcmp(y1.data_ptr(), y_ref.data_ptr(), y1.nbytes()), 0) << "token x channel, " << backend.name;
    if (backend.name[0] == '\0' || std::strcmp(backend.name, "wgmma") == 0) {
      p.fast_accum = true;  // the whole K in the tensor cores: exact while its partial sums fit their bits
      const Tensor y_fast = run_gpu(p);
      EXPECT_EQ(std::memcmp(y_fast.data_ptr(), y_ref.data_ptr(), y_fast.nbytes()), 0)
          << "token x channel, fast_accum, " << backend.name;
      p.fast_accum = false;
    }
    p.sa = pow2({k / 128, m}).t();
    p.sb = pow2({n / 128, k / 128});
    p.block = std::make_pair(128, 128);
    const Tensor y2 = run_gpu(p), y2_ref = run_cpu(p);
    if (backend.name[0] == '\0') {
      // Measured on the H200 (CUDA 13.0): cuBLASLt's 128x128 block mode did not give the exact
      // result on this integer-grid problem; it is held to the accumulation bound instead.
      expect_close(y2, y2_ref, term_magnitudes(p), "block (cuBLASLt)");
    } else {
      EXPECT_EQ(std::memcmp(y2.data_ptr(), y2_ref.data_ptr(), y2.nbytes()), 0) << "block, " << backend.name;
    }
  }
}

// ScaledMmOptions::fast_accum on cuBLASLt and on the wgmma kernel (128 x 256 tiles: tails of N,
// many persistent tiles, short and long K). Each k32 instruction adds its products into the
// accumulator with about 13 fraction bits of the larger magnitude (DeepSeek-V3 report, 3.3.2), so
// the error is bounded by (K / 32 + 2) 2^-13 of the sum of |terms|; a skipped K tile or a wrong
// scale breaks it at K = 256-640, and the wgmma result must differ from the promoted one at
// K = 4096 (the option reaches the kernel).
TEST(GemmCuda, FastAccumulation) {
  std::mt19937 rng(23);
  std::vector<Backend> backends_fast{Backend{""}};
  if (has_wgmma()) backends_fast.push_back(Backend{"wgmma"});
  for (const Backend backend : backends_fast) {
    ForceBackend force(backend.name);
    for (Scaling s : {Scaling::kTensor, Scaling::kTokenChannel}) {
      for (const auto& [m, n, k] :
           std::vector<std::array<int64_t, 3>>{{129, 520, 4096}, {1536, 4352, 640}, {200, 136, 256}, {1, 264, 512}}) {
        Problem p = make_problem(m, n, k, s, DType::kBF16, true, rng);
        p.fast_accum = true;
        const Tensor fast = run_gpu(p);
        const std::string what = std::string("fast_accum '") + backend.name + "' " + scaling_name(s) + " m,n,k " +
                                 std::to_string(m) + "," + std::to_string(n) + "," + std::to_string(k);
        expect_close(fast, run_cpu(p), term_magnitudes(p), what, double(k / 32 + 2) * 0x1p-13);
        if (k == 4096 && backend.name[0] != '\0') {
          p.fast_accum = false;
          const Tensor promoted = run_gpu(p);
          EXPECT_NE(std::memcmp(fast.data_ptr(), promoted.data_ptr(), fast.nbytes()), 0)
              << what << ": the same bits as the promoted kernel";
        }
      }
    }
  }
}

TEST(GemmCuda, RunsAreBitwiseDeterministic) {
  std::mt19937 rng(13);
  for (const Backend backend : backends()) {
    ForceBackend force(backend.name);
    for (Scaling s : {Scaling::kTensor, Scaling::kTokenChannel, Scaling::kBlock}) {
      const Problem p = make_problem(256, 1024, 2048, s, DType::kBF16, true, rng);
      const Tensor y1 = run_gpu(p), y2 = run_gpu(p);
      EXPECT_EQ(std::memcmp(y1.data_ptr(), y2.data_ptr(), y1.nbytes()), 0) << scaling_name(s) << " " << backend.name;
    }
  }
}

// Quantized by fp8kit on the GPU end to end (per-token-group activations, 128x128 weights), the
// product stays within FP8's error of the bf16 product.
TEST(GemmCuda, QuantizedLinearQualityAgainstBf16) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t m = 128, n = 512, k = 1024;
  Tensor x = Tensor::empty({m, k}, DType::kBF16), w = Tensor::empty({n, k}, DType::kBF16);
  for (int64_t i = 0; i < m * k; ++i) x.data<BFloat16>()[i] = float_to_bf16(nd(rng));
  for (int64_t i = 0; i < n * k; ++i) w.data<BFloat16>()[i] = float_to_bf16(0.02f * nd(rng));
  ops::PerTokenGroupQuantOptions g;
  g.column_major_scales = true;
  const ops::QuantResult xq = ops::per_token_group_quant(gpu_ctx(), x.to(kGpu), g);
  const ops::QuantResult wq = ops::quantize_weight_block(gpu_ctx(), w.to(kGpu), 128, 128);
  ScaledMmOptions o;
  o.out_dtype = DType::kF32;
  o.block = std::make_pair(128, 128);
  for (const Backend backend : backends()) {
    ForceBackend force(backend.name);
    const Tensor y = ops::scaled_mm(gpu_ctx(), xq.q, wq.q, xq.scale, wq.scale, o).to(Device::cpu());
    double num = 0, den = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk) s += double(bf16_to_float(x.data<BFloat16>()[i * k + kk])) * bf16_to_float(w.data<BFloat16>()[j * k + kk]);
        num += std::pow(double(y.data<float>()[i * n + j]) - s, 2);
        den += s * s;
      }
    }
    const double err = std::sqrt(num / den);
    EXPECT_TRUE(err <= 0.06) << err << " " << backend.name;
  }
}

// The wgmma kernel: more tiles than multiprocessors (each CTA walks several, its stage ring
// wrapping across them), M/N tails inside a tile, odd K-tile counts (the two fragments' turns),
// and a ragged K (4097, zero-filled by TMA) read through row strides of 4112 bytes.
TEST(GemmCuda, WgmmaPersistentTilesAndTails) {
  if (!has_wgmma()) GTEST_SKIP() << "wgmma needs sm_90";
  std::mt19937 rng(19);
  ForceBackend force("wgmma");
  for (Scaling s : {Scaling::kTensor, Scaling::kTokenChannel, Scaling::kBlock}) {
    const Problem p = make_problem(1152, 2048, 640, s, DType::kBF16, s == Scaling::kTokenChannel, rng);  // 144 tiles
    expect_close(run_gpu(p), run_cpu(p), term_magnitudes(p), std::string("persistent ") + scaling_name(s));
  }
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{129, 300, 640}, {1, 8, 128}, {200, 136, 256}}) {
    for (Scaling s : {Scaling::kTensorChannel, Scaling::kBlock}) {
      const Problem p = make_problem(m, n, k, s, DType::kF16, true, rng);
      expect_close(run_gpu(p), run_cpu(p), term_magnitudes(p),
                   std::string("tails ") + scaling_name(s) + " m,n,k " + std::to_string(m) + "," + std::to_string(n) +
                       "," + std::to_string(k));
    }
  }
  // Ragged K through padded rows.
  const int64_t m = 200, k = 4097, ld = 4112;
  Problem wide = make_problem(m, 257, ld, Scaling::kTokenChannel, DType::kF32, true, rng);
  const Tensor a_gpu = wide.a.to(kGpu).narrow(1, 0, k), b_gpu = wide.b.to(kGpu).narrow(1, 0, k);
  ScaledMmOptions o;
  o.out_dtype = DType::kF32;
  o.bias = wide.bias.to(kGpu);
  o.output = Tensor::empty({m, 257}, DType::kF32, kGpu);
  o.output.fill_bytes_(0xff);
  const Tensor got = ops::scaled_mm(gpu_ctx(), a_gpu, b_gpu, wide.sa.to(kGpu), wide.sb.to(kGpu), o).to(Device::cpu());
  Problem narrowed = wide;
  narrowed.a = wide.a.narrow(1, 0, k).contiguous();
  narrowed.b = wide.b.narrow(1, 0, k).contiguous();
  expect_close(got, run_cpu(narrowed), term_magnitudes(narrowed), "ragged K");
}

// The decode kernel (FP8KIT_GEMM_BACKEND=decode, M <= 64): token tiles of 16, 32 and 64 with row
// tails, N tails inside a 64-row tile, one K split and several (few tiles over a long K: the
// partial sums and the reduction), odd and even K-tile counts, every scaling, dtype and bias; a
// ragged K through padded rows; exact on an integer grid with and without splits.
TEST(GemmCuda, DecodeKernelTilesSplitsAndTails) {
  if (!has_wgmma()) GTEST_SKIP() << "the decode kernel needs sm_90";
  std::mt19937 rng(29);
  ForceBackend force("decode");
  const std::vector<std::array<int64_t, 3>> shapes{{1, 256, 256},   {3, 200, 640},  {16, 2112, 7168}, {17, 320, 4096},
                                                   {33, 136, 1152}, {64, 4096, 384}, {5, 64, 16384}};
  int variant = 0;
  for (Scaling s : {Scaling::kTensor, Scaling::kTokenChannel, Scaling::kTokenTensor, Scaling::kTensorChannel,
                    Scaling::kBlock}) {
    for (const auto& [m, n, k] : shapes) {
      const DType out = std::array<DType, 3>{DType::kBF16, DType::kF16, DType::kF32}[variant % 3];
      const bool bias = variant++ % 2 == 0;
      const Problem p = make_problem(m, n, k, s, out, bias, rng);
      expect_close(run_gpu(p), run_cpu(p), term_magnitudes(p),
                   std::string("decode ") + scaling_name(s) + " out " + dtype_name(out) + (bias ? " bias" : "") +
                       " m,n,k " + std::to_string(m) + "," + std::to_string(n) + "," + std::to_string(k));
    }
  }
  // Ragged K (zero-filled by the TMA) through rows 4112 bytes apart, one split and several, token
  // tiles of 8, 16, 32 (their chunks a box a K tile) and 64.
  for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{{7, 8192}, {12, 640}, {20, 2112}, {40, 96}}) {
    const int64_t k = 4097, ld = 4112;
    Problem wide = make_problem(m, n, ld, Scaling::kTokenChannel, DType::kF32, true, rng);
    ScaledMmOptions o;
    o.out_dtype = DType::kF32;
    o.bias = wide.bias.to(kGpu);
    o.output = Tensor::empty({m, n}, DType::kF32, kGpu);
    o.output.fill_bytes_(0xff);
    const Tensor got = ops::scaled_mm(gpu_ctx(), wide.a.to(kGpu).narrow(1, 0, k), wide.b.to(kGpu).narrow(1, 0, k),
                                      wide.sa.to(kGpu), wide.sb.to(kGpu), o)
                           .to(Device::cpu());
    Problem narrowed = wide;
    narrowed.a = wide.a.narrow(1, 0, k).contiguous();
    narrowed.b = wide.b.narrow(1, 0, k).contiguous();
    expect_close(got, run_cpu(narrowed), term_magnitudes(narrowed), "decode ragged K, n " + std::to_string(n));
  }
  // Integer grid, power-of-two scales: every 128-wide tile's partial sum (|.| <= 128 * 9) is exact
  // in the tensor cores and every promotion and split sum is exact in f32.
  auto pow2 = [&](const Shape& shape) { return pow2_scales(shape, rng); };
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{16, 256, 4096}, {64, 8192, 512}, {2, 384, 1024}}) {
    Problem p = integer_grid_problem(m, n, k, rng);
    p.sa = pow2({m, 1});
    p.sb = pow2({n});
    const Tensor y1 = run_gpu(p), y1_ref = run_cpu(p);
    EXPECT_EQ(std::memcmp(y1.data_ptr(), y1_ref.data_ptr(), y1.nbytes()), 0) << "decode token x channel " << m << "," << n;
    p.sa = pow2({k / 128, m}).t();
    p.sb = pow2({n / 128, k / 128});
    p.block = std::make_pair(128, 128);
    const Tensor y2 = run_gpu(p), y2_ref = run_cpu(p), y3 = run_gpu(p);
    EXPECT_EQ(std::memcmp(y2.data_ptr(), y2_ref.data_ptr(), y2.nbytes()), 0) << "decode block " << m << "," << n;
    EXPECT_EQ(std::memcmp(y2.data_ptr(), y3.data_ptr(), y2.nbytes()), 0) << "decode block, second run " << m << "," << n;
  }
}

}  // namespace
}  // namespace fp8kit
