// The GEMV kernels prefetch weight lines ahead of the loads, past the end of the rows they were
// given; a prefetch never faults, and the loads themselves must stay inside the matrix. Weights
// that end where an inaccessible page begins, for every GEMV plan and the row counts that leave
// a short last group, give the reference's bits (integer grids, power-of-two scales).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "gemm_cpu_test_util.h"
#include "ops/gemm/gemm_cpu.h"
#include "ops/gemm/gemm_cpu_families.h"
#include "ops/gemm/gemm_ref.h"
#include "ops/gemm/matmul_16bit_args.h"

namespace fp8kit {
namespace {

using namespace gemm_cpu_test;

// `bytes` of memory that end where a PROT_NONE page begins.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    span_ = (bytes + page - 1) / page * page + page;
    base_ = static_cast<uint8_t*>(mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
    EXPECT_EQ(mprotect(base_ + span_ - page, page, PROT_NONE), 0);
    data_ = base_ + span_ - page - bytes;
  }
  ~GuardedBuffer() { munmap(base_, span_); }
  uint8_t* data() const { return data_; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t span_ = 0;
};

std::vector<NamedPlan> gemv_plans(int64_t m) {
  std::vector<NamedPlan> out;
  for (NamedPlan& p : plans_for(m, true)) {
    if (p.plan.shape == GemmShape::kGemv) out.push_back(std::move(p));
  }
  return out;
}

TEST(GemmCpuGemvGuard, E4m3WeightsEndingAtAnInaccessiblePage) {
  std::mt19937 rng(7);
  for (int64_t m : {1, 2, 5}) {
    for (int64_t n : {1, 9, 67}) {
      for (int64_t k : {64, 576, 1000}) {
        const auto av = grid_values(m * k, 3, rng), bv = grid_values(n * k, 3, rng);
        const Tensor a = make_matrix(av, m, k, DType::kE4M3FN);
        GuardedBuffer b(size_t(n * k));
        for (int64_t i = 0; i < n * k; ++i) b.data()[i] = float_to_e4m3fn_bits(bv[size_t(i)]);
        const float sa = 0.5f, sb = 4.0f;
        ops::ScaledMmArgs args;
        args.m = m, args.n = n, args.k = k;
        args.a = static_cast<const uint8_t*>(a.data_ptr()), args.lda = a.stride(0);
        args.b = b.data(), args.ldb = k;
        args.scale_a = &sa, args.scale_b = &sb;
        args.out_dtype = DType::kF32, args.ldc = n;
        std::vector<float> want(size_t(m * n)), got(size_t(m * n));
        args.out = want.data();
        ops::scaled_mm_ref(args);
        for (const NamedPlan& p : gemv_plans(m)) {
          std::fill(got.begin(), got.end(), std::nanf(""));
          args.out = got.data();
          ops::cpu::run_cpu_gemm(ops::cpu::scaled_mm_problem(args), p.plan);
          EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
              << p.name << " m " << m << " n " << n << " k " << k;
        }
      }
    }
  }
}

TEST(GemmCpuGemvGuard, Bf16WeightsEndingAtAnInaccessiblePage) {
  std::mt19937 rng(8);
  for (int64_t m : {1, 3}) {
    for (int64_t n : {1, 9, 67}) {
      for (int64_t k : {32, 576, 1000}) {
        const auto av = grid_values(m * k, 3, rng), bv = grid_values(n * k, 3, rng);
        const Tensor a = make_matrix(av, m, k, DType::kBF16);
        GuardedBuffer b(size_t(n * k) * 2);
        auto* w = reinterpret_cast<BFloat16*>(b.data());
        for (int64_t i = 0; i < n * k; ++i) w[i] = float_to_bf16(bv[size_t(i)]);
        ops::Matmul16Args args;
        args.m = m, args.n = n, args.k = k, args.dtype = DType::kBF16;
        args.x = a.data_ptr(), args.ldx = a.stride(0);
        args.w = w, args.ldw = k;
        args.ldc = n;
        std::vector<BFloat16> want(size_t(m * n)), got(size_t(m * n));
        args.out = want.data();
        ops::matmul_16bit_ref(args);
        for (const NamedPlan& p : gemv_plans(m)) {
          std::fill(got.begin(), got.end(), BFloat16{0x7fc0});
          args.out = got.data();
          ops::cpu::run_cpu_gemm(ops::cpu::matmul_16bit_problem(args), p.plan);
          EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 2), 0)
              << p.name << " m " << m << " n " << n << " k " << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fp8kit
