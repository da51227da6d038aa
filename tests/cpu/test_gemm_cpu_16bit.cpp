// weight_only_mm (bf16/f16 activations x FP8 weights) and matmul_16bit (bf16/f16/f32) on the
// fast CPU engine, every plan this machine can run, against weight_only_mm_ref and
// matmul_16bit_ref: bit for bit on integer grids with power-of-two scales (per tensor, per
// channel, blocks with a partial last K block, bias, odd and strided shapes), within half an
// output ulp plus the f32-accumulation bound on random operands, and the same bits from GEMV and
// panel shapes.
#include <gtest/gtest.h>

#include <optional>

#include "gemm_cpu_test_util.h"
#include "ops/gemm/gemm_cpu.h"
#include "ops/gemm/gemm_cpu_families.h"
#include "ops/gemm/matmul_16bit_args.h"
#include "ops/gemm/weight_only_ref.h"

namespace fp8kit {
namespace {

using namespace gemm_cpu_test;

enum class WScale { kTensor, kChannel, kBlock128, kBlock32x16 };
const char* name(WScale s) {
  const char* names[] = {"per-tensor", "per-channel", "block 128x128", "block 32x16"};
  return names[int(s)];
}

struct WoCase {
  Tensor x, w, scale, bias;
  WScale scaling = WScale::kTensor;
};

std::pair<int64_t, int64_t> block_of(WScale s) { return s == WScale::kBlock128 ? std::pair{128, 128} : std::pair{32, 16}; }

ops::WeightOnlyMmArgs wo_args(const WoCase& c, const Tensor& out) {
  ops::WeightOnlyMmArgs a;
  a.m = c.x.size(0);
  a.k = c.x.size(1);
  a.n = c.w.size(0);
  a.x = c.x.data_ptr();
  a.ldx = c.x.stride(0);
  a.act_dtype = c.x.dtype();
  a.w = static_cast<const uint8_t*>(c.w.data_ptr());
  a.ldw = c.w.stride(0);
  a.scale = c.scale.data<float>();
  switch (c.scaling) {
    case WScale::kTensor: a.scale_kind = ops::ScaleKind::kTensor; break;
    case WScale::kChannel: a.scale_kind = ops::ScaleKind::kRow; break;
    default:
      a.scale_kind = ops::ScaleKind::kBlock;
      a.s_row_stride = c.scale.stride(0);
      a.s_col_stride = c.scale.stride(1);
      std::tie(a.block_n, a.block_k) = block_of(c.scaling);
  }
  a.bias = c.bias.defined() ? c.bias.data_ptr() : nullptr;
  a.out = out.data_ptr();
  a.ldc = a.n;
  return a;
}

WoCase make_wo(int64_t m, int64_t n, int64_t k, WScale s, DType act, bool grid, std::mt19937& rng) {
  WoCase c;
  c.scaling = s;
  // Activations with a row stride of K + 5 (a misaligned start for odd K).
  c.x = make_matrix(grid ? grid_values(m * k, 4, rng) : normal_values(m * k, 1.0f, rng), m, k, act, k + 5, 1);
  c.w = make_matrix(grid ? grid_values(n * k, 3, rng) : random_code_values(n * k, rng), n, k, DType::kE4M3FN);
  auto scales = [&](const Shape& shape) { return grid ? pow2_scales(shape, rng) : uniform_scales(shape, rng); };
  if (s == WScale::kTensor) {
    c.scale = scales({});
  } else if (s == WScale::kChannel) {
    c.scale = scales({n, 1});
  } else {
    const auto [bn, bk] = block_of(s);
    c.scale = scales({(n + bn - 1) / bn, (k + bk - 1) / bk});
  }
  if ((m + n) % 2 == 1) c.bias = make_matrix(grid_values(n, 9, rng), 1, n, act).view({n});
  return c;
}

TEST(GemmCpu, WeightOnlyExactOnIntegerGridsForEveryPlan) {
  std::mt19937 rng(11);
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1}, {1, 40, 100}, {2, 9, 33}, {4, 64, 300},
                                                      {7, 13, 129}, {8, 70, 1030}, {9, 5, 17}, {17, 33, 513}};
  for (WScale s : {WScale::kTensor, WScale::kChannel, WScale::kBlock128, WScale::kBlock32x16}) {
    for (auto [m, n, k] : shapes) {
      for (DType act : {DType::kBF16, DType::kF16}) {
        const WoCase c = make_wo(m, n, k, s, act, true, rng);
        Tensor want = Tensor::empty({m, n}, act);
        ops::weight_only_mm_ref(wo_args(c, want));
        for (const NamedPlan& p : plans_for(m, act == DType::kBF16 && s != WScale::kBlock32x16)) {
          Tensor got = poisoned({m, n}, act);
          ops::cpu::run_cpu_gemm(ops::cpu::weight_only_mm_problem(wo_args(c, got)), p.plan);
          std::string first;
          EXPECT_EQ(bit_mismatches(got, want, &first), 0)
              << name(s) << " " << m << "x" << n << "x" << k << " " << dtype_name(act) << " " << p.name << ": " << first;
        }
      }
    }
  }
}

double half_ulp(double v, DType dtype) {
  const int mantissa = dtype == DType::kBF16 ? 8 : dtype == DType::kF16 ? 11 : 24;
  const int min_exponent = dtype == DType::kF16 ? -14 : -126;
  const int e = v == 0 ? min_exponent : std::max(std::ilogb(v), min_exponent);
  return std::ldexp(1.0, e - mantissa);
}

// |y - exact| <= half an output ulp of the exact value (the output rounding) plus the f32
// summation's worst case u * adds * sum|terms| (which can move the value across a rounding point).
// exact[i] = {fp64 value, sum of |terms|} of output i.
using Exact = std::vector<std::pair<double, double>>;

template <typename Fn>
Exact tabulate(int64_t count, Fn fn) {
  Exact out;
  for (int64_t i = 0; i < count; ++i) out.push_back(fn(i));
  return out;
}

void expect_within_bound(const Tensor& y, int64_t k, int64_t chunk, const Exact& exact, const std::string& what) {
  const double adds = double(std::min(chunk, k) / 8 + 3 + (k + chunk - 1) / chunk + 3);
  double worst = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const auto [value, magnitude] = exact[size_t(i)];
    const double bound = std::ldexp(adds, -24) * magnitude;
    const double err = std::abs(double(element(y, i)) - value);
    const double r = (err - bound) / half_ulp(std::abs(value) + bound, y.dtype());
    worst = std::isnan(r) ? r : std::max(worst, r);
  }
  EXPECT_TRUE(worst <= 1.0 + 1e-9) << what << ": " << worst;
}

TEST(GemmCpu, WeightOnlyRandomWithinTheOutputRoundingAndF32Bound) {
  std::mt19937 rng(12);
  for (WScale s : {WScale::kChannel, WScale::kBlock128}) {
    for (const auto& shape : std::vector<std::array<int64_t, 3>>{{1, 200, 2000}, {5, 31, 777}, {20, 40, 1100}}) {
      const int64_t m = shape[0], n = shape[1], k = shape[2];  // lambdas capture these
      for (DType act : {DType::kBF16, DType::kF16}) {
        const WoCase c = make_wo(m, n, k, s, act, false, rng);
        const auto block = block_of(s);
        const int64_t bn = block.first, bk = block.second;
        const Tensor xc = c.x.contiguous();
        const Exact exact = tabulate(m * n, [&](int64_t idx) {
          const int64_t i = idx / n, j = idx % n;
          double v = c.bias.defined() ? element(c.bias, j) : 0.0, mag = std::abs(v);
          for (int64_t kk = 0; kk < k; ++kk) {
            const double sc = s == WScale::kChannel ? c.scale.data<float>()[j]
                                                    : c.scale.data<float>()[(j / bn) * c.scale.stride(0) + kk / bk];
            const double t = double(element(xc, i * k + kk)) *
                             e4m3fn_bits_to_float(static_cast<const uint8_t*>(c.w.data_ptr())[j * k + kk]) * sc;
            v += t;
            mag += std::abs(t);
          }
          return std::pair{v, mag};
        });
        for (const NamedPlan& p : plans_for(m, act == DType::kBF16)) {
          Tensor got = poisoned({m, n}, act);
          ops::cpu::run_cpu_gemm(ops::cpu::weight_only_mm_problem(wo_args(c, got)), p.plan);
          expect_within_bound(got, k, s == WScale::kChannel ? 512 : 128, exact,
                              std::string(name(s)) + " " + dtype_name(act) + " " + std::to_string(m) + "x" +
                                  std::to_string(n) + "x" + std::to_string(k) + " " + p.name);
        }
      }
    }
  }
}

ops::Matmul16Args mm16_args(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  ops::Matmul16Args a;
  a.m = x.size(0);
  a.k = x.size(1);
  a.n = w.size(0);
  a.dtype = x.dtype();
  a.x = x.data_ptr();
  a.ldx = x.stride(0);
  a.w = w.data_ptr();
  a.ldw = w.stride(0);
  a.bias = bias.defined() ? bias.data_ptr() : nullptr;
  a.out = out.data_ptr();
  a.ldc = a.n;
  return a;
}

TEST(GemmCpu, Matmul16ExactOnIntegerGridsAndWithinTheBoundOnRandom) {
  std::mt19937 rng(13);
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (const auto& shape : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {1, 65, 576}, {3, 17, 31}, {8, 40, 1030}, {13, 21, 300}}) {
      const int64_t m = shape[0], n = shape[1], k = shape[2];  // lambdas capture these
      for (bool grid : {true, false}) {
        const Tensor x = make_matrix(grid ? grid_values(m * k, 8, rng) : normal_values(m * k, 1.0f, rng), m, k, dtype, k + 3, 1);
        const Tensor w = make_matrix(grid ? grid_values(n * k, 8, rng) : normal_values(n * k, 0.1f, rng), n, k, dtype, k + 7);
        const Tensor bias = m % 2 == 1 ? make_matrix(grid_values(n, 50, rng), 1, n, dtype).view({n}) : Tensor();
        Tensor want = Tensor::empty({m, n}, dtype);
        ops::matmul_16bit_ref(mm16_args(x, w, bias, want));
        const std::string shape = std::string(dtype_name(dtype)) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                                  std::to_string(k) + (grid ? " grid" : " random");
        const Tensor xc = x.contiguous(), wc = w.contiguous();
        const Exact exact = grid ? Exact() : tabulate(m * n, [&](int64_t idx) {
          const int64_t i = idx / n, j = idx % n;
          double v = bias.defined() ? element(bias, j) : 0.0, mag = std::abs(v);
          for (int64_t kk = 0; kk < k; ++kk) {
            const double t = double(element(xc, i * k + kk)) * element(wc, j * k + kk);
            v += t;
            mag += std::abs(t);
          }
          return std::pair{v, mag};
        });
        for (const NamedPlan& p : plans_for(m, dtype == DType::kBF16)) {
          Tensor got = poisoned({m, n}, dtype);
          ops::cpu::run_cpu_gemm(ops::cpu::matmul_16bit_problem(mm16_args(x, w, bias, got)), p.plan);
          if (grid) {
            EXPECT_EQ(bit_mismatches(got, want), 0) << shape << " " << p.name;
          } else {
            expect_within_bound(got, k, 512, exact, shape + " " + p.name);
          }
        }
      }
    }
  }
}

TEST(GemmCpu, SixteenBitGemvAndPanelGiveTheSameBits) {
  std::mt19937 rng(14);
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int64_t m : {1, 3, 8}) {
      const Tensor x = make_matrix(normal_values(m * 1500, 1.0f, rng), m, 1500, dtype);
      const Tensor w = make_matrix(normal_values(45 * 1500, 0.1f, rng), 45, 1500, dtype);
      std::vector<Tensor> results;
      const auto plans = plans_for(m, dtype == DType::kBF16);
      for (const NamedPlan& p : plans) {
        if (p.plan.kernel != plans.back().plan.kernel) continue;  // one family: the best present
        Tensor got = poisoned({m, 45}, dtype);
        ops::cpu::run_cpu_gemm(ops::cpu::matmul_16bit_problem(mm16_args(x, w, Tensor(), got)), p.plan);
        results.push_back(got);
      }
      for (size_t r = 1; r < results.size(); ++r) EXPECT_EQ(bit_mismatches(results[r], results[0]), 0) << dtype_name(dtype) << " m " << m;
    }
  }
}

}  // namespace
}  // namespace fp8kit
