// scaled_mm on the fast CPU engine, every plan this machine can run (portable and AVX2 families,
// GEMV and panel shapes, 1 and 2 threads) against scaled_mm_ref: bit for bit on integer grids
// with power-of-two scales (every scaling, output dtype, bias, odd shapes), within the worst-case
// f32-accumulation bound on random operands, the same bits from GEMV and panel shapes, NaN codes,
// strided and misaligned operands, and the public entry's routing by FP8KIT_CPU_BACKEND.
#include <gtest/gtest.h>

#include <optional>

#include "core/parallel.h"
#include "fp8kit/ops/gemm.h"
#include "gemm_cpu_test_util.h"
#include "reference_context.h"
#include "test_context.h"
#include "ops/gemm/gemm_cpu.h"
#include "ops/gemm/gemm_cpu_families.h"
#include "ops/gemm/gemm_ref.h"

namespace fp8kit {
namespace {

using namespace gemm_cpu_test;
using Block = std::optional<std::pair<int64_t, int64_t>>;

struct MmCase {
  Tensor a, b, sa, sb, bias;
  Block block;
  DType out_dtype = DType::kF32;
};

uint8_t* codes(const Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

// ScaledMmArgs as ops::scaled_mm fills them (gemm.cpp), writing into `out`.
ops::ScaledMmArgs mm_args(const MmCase& c, const Tensor& out) {
  ops::ScaledMmArgs a;
  a.m = c.a.size(0);
  a.k = c.a.size(1);
  a.n = c.b.size(0);
  a.a = static_cast<const uint8_t*>(c.a.data_ptr());
  a.lda = c.a.stride(0);
  a.b = static_cast<const uint8_t*>(c.b.data_ptr());
  a.ldb = c.b.stride(0);
  a.scale_a = c.sa.data<float>();
  a.scale_b = c.sb.data<float>();
  if (c.block) {
    a.scale_a_kind = a.scale_b_kind = ops::ScaleKind::kBlock;
    a.sa_row_stride = c.sa.stride(0);
    a.sa_group_stride = c.sa.stride(1);
    a.sb_row_stride = c.sb.stride(0);
    a.sb_group_stride = c.sb.stride(1);
    std::tie(a.block_n, a.block_k) = *c.block;
  } else {
    a.scale_a_kind = c.sa.numel() == 1 ? ops::ScaleKind::kTensor : ops::ScaleKind::kRow;
    a.scale_b_kind = c.sb.numel() == 1 ? ops::ScaleKind::kTensor : ops::ScaleKind::kRow;
  }
  a.bias = c.bias.defined() ? c.bias.data_ptr() : nullptr;
  a.out = out.data_ptr();
  a.ldc = a.n;
  a.out_dtype = c.out_dtype;
  return a;
}

Tensor run_ref(const MmCase& c) {
  Tensor out = Tensor::empty({c.a.size(0), c.b.size(0)}, c.out_dtype);
  ops::scaled_mm_ref(mm_args(c, out));
  return out;
}

Tensor run_fast(const MmCase& c, const GemmPlan& plan) {
  Tensor out = poisoned({c.a.size(0), c.b.size(0)}, c.out_dtype);
  ops::cpu::run_cpu_gemm(ops::cpu::scaled_mm_problem(mm_args(c, out)), plan);
  return out;
}

// kBlock20x32: blocks of 20 output rows, which a GEMV call's rows straddle (one row of B's scales
// per column there, not one per call).
enum class Scaling { kTensor, kTokenTensor, kTensorChannel, kTokenChannel, kBlock128, kBlock64, kBlock32x16, kBlock20x32 };
const char* name(Scaling s) {
  const char* names[] = {"tensor", "token x tensor", "tensor x channel", "token x channel", "block 128x128",
                         "block 64x64", "block 32x16", "block 20x32"};
  return names[int(s)];
}

int64_t block_k_of(Scaling s) {
  switch (s) {
    case Scaling::kBlock128: return 128;
    case Scaling::kBlock64: return 64;
    case Scaling::kBlock32x16: return 16;
    case Scaling::kBlock20x32: return 32;
    default: return 1;
  }
}

MmCase make_case(int64_t m, int64_t n, int64_t k, Scaling s, DType out, bool bias, bool grid, std::mt19937& rng) {
  MmCase c;
  const auto av = grid ? grid_values(m * k, 3, rng) : random_code_values(m * k, rng);
  const auto bv = grid ? grid_values(n * k, 3, rng) : random_code_values(n * k, rng);
  c.a = make_matrix(av, m, k, DType::kE4M3FN);
  c.b = make_matrix(bv, n, k, DType::kE4M3FN);
  auto scales = [&](const Shape& shape) { return grid ? pow2_scales(shape, rng) : uniform_scales(shape, rng); };
  switch (s) {
    case Scaling::kTensor: c.sa = scales({}), c.sb = scales({}); break;
    case Scaling::kTokenTensor: c.sa = scales({m, 1}), c.sb = scales({1}); break;
    case Scaling::kTensorChannel: c.sa = scales({1}), c.sb = scales({n}); break;
    case Scaling::kTokenChannel: c.sa = scales({m}), c.sb = scales({n, 1}); break;
    default: {
      const int64_t bn = s == Scaling::kBlock128 ? 128 : s == Scaling::kBlock64 ? 64 : s == Scaling::kBlock20x32 ? 20 : 32;
      const int64_t bk = block_k_of(s);
      c.block = std::make_pair(bn, bk);
      c.sa = scales({m, k / bk});
      c.sb = scales({(n + bn - 1) / bn, k / bk});
    }
  }
  c.out_dtype = out;
  if (bias) c.bias = make_matrix(grid_values(n, 20, rng), 1, n, out).view({n});
  return c;
}


// The AVX-512-BF16 family serves e4m3 x e4m3 with K chunks of whole 32-element steps.
bool bf16_family(Scaling s) { return s != Scaling::kBlock32x16; }

TEST(GemmCpu, ScaledMmExactOnIntegerGridsForEveryPlan) {
  std::mt19937 rng(1);
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1}, {1, 33, 100}, {2, 7, 31}, {3, 9, 64}, {5, 16, 129},
                                                      {8, 24, 513}, {9, 5, 40}, {17, 70, 1030}, {4, 129, 256}};
  for (Scaling s : {Scaling::kTensor, Scaling::kTokenTensor, Scaling::kTensorChannel, Scaling::kTokenChannel,
                    Scaling::kBlock128, Scaling::kBlock64, Scaling::kBlock32x16, Scaling::kBlock20x32}) {
    for (auto [m, n, k] : shapes) {
      const int64_t bk = block_k_of(s);
      k = std::max<int64_t>(bk, k / bk * bk);  // block scaling: K divisible by block_k
      for (DType out : {DType::kF32, DType::kBF16, DType::kF16}) {
        const MmCase c = make_case(m, n, k, s, out, (m + n) % 2 == 0, true, rng);
        const Tensor want = run_ref(c);
        for (const NamedPlan& p : plans_for(m, bf16_family(s))) {
          std::string first;
          EXPECT_EQ(bit_mismatches(run_fast(c, p.plan), want, &first), 0)
              << name(s) << " " << m << "x" << n << "x" << k << " " << dtype_name(out) << " " << p.name << ": " << first;
        }
      }
    }
  }
}

// fp64 value and the sum of |terms| (the scale of the f32 rounding errors) of every output.
void fp64_reference(const MmCase& c, std::vector<double>& ref, std::vector<double>& mag) {
  const int64_t m = c.a.size(0), k = c.a.size(1), n = c.b.size(0);
  const int64_t bk = c.block ? c.block->second : k, bn = c.block ? c.block->first : 1;
  ref.assign(size_t(m * n), 0.0);
  mag.assign(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double total = 0, size = 0;
      for (int64_t kb = 0; kb * bk < k; ++kb) {
        double s = 0, sabs = 0;
        for (int64_t kk = kb * bk; kk < (kb + 1) * bk; ++kk) {
          const double p = double(e4m3fn_bits_to_float(codes(c.a)[i * k + kk])) *
                           e4m3fn_bits_to_float(codes(c.b)[j * k + kk]);
          s += p;
          sabs += std::abs(p);
        }
        const double sa = c.block ? c.sa.data<float>()[i * (k / bk) + kb] : c.sa.data<float>()[c.sa.numel() == 1 ? 0 : i];
        const double sb = c.block ? c.sb.data<float>()[(j / bn) * (k / bk) + kb] : c.sb.data<float>()[c.sb.numel() == 1 ? 0 : j];
        total += s * sa * sb;
        size += sabs * sa * sb;
      }
      ref[size_t(i * n + j)] = total;
      mag[size_t(i * n + j)] = size;
    }
  }
}

// Random codes over e4m3's whole range, f32 output: the
// error against fp64 stays below the worst case of f32 summation, u * (adds on the longest path)
// * sum|terms|: within a chunk (512, or block_k) K/8 adds per lane, 3 in the lane tree, one per
// chunk, and the epilogue's 3 roundings, with u = 2^-24.
TEST(GemmCpu, ScaledMmRandomWithinTheF32AccumulationBound) {
  std::mt19937 rng(2);
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 300, 4096}, {3, 40, 1000}, {8, 17, 2050}, {20, 33, 1536}};
  for (Scaling s : {Scaling::kTokenChannel, Scaling::kTensor, Scaling::kBlock128, Scaling::kBlock64, Scaling::kBlock20x32}) {
    for (auto [m, n, k] : shapes) {
      const int64_t bk = block_k_of(s);
      if (bk > 1) k = k / bk * bk;
      const MmCase c = make_case(m, n, k, s, DType::kF32, false, false, rng);
      std::vector<double> ref, mag;
      fp64_reference(c, ref, mag);
      const int64_t chunk = bk > 1 ? bk : 512;
      const double adds = double(std::min(chunk, k) / 8 + 3 + (k + chunk - 1) / chunk + 3);
      for (const NamedPlan& p : plans_for(m, bf16_family(s))) {
        const Tensor y = run_fast(c, p.plan);
        double worst = 0;  // error / bound; NaN propagates and fails
        for (int64_t i = 0; i < y.numel(); ++i) {
          const double bound = std::ldexp(adds, -24) * (mag[size_t(i)] + std::abs(ref[size_t(i)])) + 1e-30;
          const double r = std::abs(double(y.data<float>()[i]) - ref[size_t(i)]) / bound;
          worst = std::isnan(r) ? r : std::max(worst, r);
        }
        EXPECT_TRUE(worst <= 1.0) << name(s) << " " << m << "x" << n << "x" << k << " " << p.name << ": " << worst;
      }
    }
  }
}

// A row's result does not depend on the path, the tiles or the threads that computed it: the
// batch size never changes a token's output.
TEST(GemmCpu, ScaledMmGemvAndPanelGiveTheSameBits) {
  std::mt19937 rng(3);
  for (Scaling s : {Scaling::kTokenChannel, Scaling::kBlock128, Scaling::kBlock64, Scaling::kBlock20x32}) {
    for (int64_t m = 1; m <= 8; ++m) {
      const int64_t bk = block_k_of(s);
      const MmCase c = make_case(m, 37, bk > 1 ? 1152 / bk * bk : 1100, s, DType::kF32, true, false, rng);
      for (GemmKernel kernel : {GemmKernel::kPortable, GemmKernel::kAvx2, GemmKernel::kAvx512Bf16}) {
        std::vector<Tensor> results;
        for (const NamedPlan& p : plans_for(m, true)) {
          if (p.plan.kernel == kernel) results.push_back(run_fast(c, p.plan));
        }
        for (size_t r = 1; r < results.size(); ++r) {
          EXPECT_EQ(bit_mismatches(results[r], results[0]), 0) << name(s) << " m " << m << " plan " << r;
        }
      }
    }
  }
}

TEST(GemmCpu, ScaledMmNaNCodesGiveNaNWhereTheReferenceDoes) {
  std::mt19937 rng(4);
  for (Scaling s : {Scaling::kTokenChannel, Scaling::kBlock64}) {
    for (int64_t m : {1, 3, 12}) {
      MmCase c = make_case(m, 11, 192, s, DType::kBF16, true, true, rng);
      codes(c.a)[(m - 1) * 192 + 5] = 0xff;  // -NaN in the last row of a
      codes(c.b)[2 * 192 + 191] = 0x7f;      // NaN in row 2 of b, at its last element
      codes(c.b)[7 * 192 + 40] = 0xff;
      const Tensor want = run_ref(c);
      for (const NamedPlan& p : plans_for(m, true)) {
        const Tensor y = run_fast(c, p.plan);
        int64_t nan_mismatch = 0, value_mismatch = 0;
        for (int64_t i = 0; i < y.numel(); ++i) {
          const bool yn = std::isnan(element(y, i)), wn = std::isnan(element(want, i));
          nan_mismatch += yn != wn;
          value_mismatch += !yn && !wn && element(y, i) != element(want, i);
        }
        EXPECT_EQ(nan_mismatch, 0) << name(s) << " m " << m << " " << p.name;
        EXPECT_EQ(value_mismatch, 0) << name(s) << " m " << m << " " << p.name;
      }
    }
  }
}

TEST(GemmCpu, ScaledMmStridedAndMisalignedOperands) {
  std::mt19937 rng(5);
  for (int64_t m : {2, 11}) {
    const int64_t n = 19, k = 77;
    MmCase c = make_case(m, n, k, Scaling::kTokenChannel, DType::kF16, true, false, rng);
    MmCase strided = c;
    std::vector<float> av(size_t(m * k)), bv(size_t(n * k));
    for (int64_t i = 0; i < m * k; ++i) av[size_t(i)] = e4m3fn_bits_to_float(codes(c.a)[i]);
    for (int64_t i = 0; i < n * k; ++i) bv[size_t(i)] = e4m3fn_bits_to_float(codes(c.b)[i]);
    strided.a = make_matrix(av, m, k, DType::kE4M3FN, k + 3, 1);  // row stride K + 3, one byte off
    strided.b = make_matrix(bv, n, k, DType::kE4M3FN, k + 50, 3);
    for (const NamedPlan& p : plans_for(m, true)) {
      EXPECT_EQ(bit_mismatches(run_fast(strided, p.plan), run_fast(c, p.plan)), 0) << "m " << m << " " << p.name;
    }
  }
}

// ops::scaled_mm routes the CPU to the plan: the fast engine by default, the reference in a context
// whose overrides say cpu_backend = kReference (random operands, where the two differ in the last bits).
TEST(GemmCpu, PublicEntryRoutesByCpuBackend) {
  std::mt19937 rng(6);
  const MmCase c = make_case(5, 64, 2048, Scaling::kTokenChannel, DType::kF32, false, false, rng);
  ops::ScaledMmOptions o;
  o.out_dtype = DType::kF32;
  const Tensor want_ref = run_ref(c);
  const ops::cpu::GemmPlan plan = ops::cpu::plan_cpu_gemm(ops::cpu::describe(ops::cpu::scaled_mm_problem(mm_args(c, want_ref)), num_threads()), Overrides{});
  const Tensor want_fast = run_fast(c, plan);
  ASSERT_GT(bit_mismatches(want_fast, want_ref), 0) << "the two backends should differ somewhere here";
  EXPECT_EQ(bit_mismatches(ops::scaled_mm(cpu_ctx(), c.a, c.b, c.sa, c.sb, o), want_fast), 0);
  EXPECT_EQ(bit_mismatches(ops::scaled_mm(cpu_reference_ctx(), c.a, c.b, c.sa, c.sb, o), want_ref), 0);
}

}  // namespace
}  // namespace fp8kit
