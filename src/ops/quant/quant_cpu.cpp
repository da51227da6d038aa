// scaled_fp8_quant and per_token_group_quant on the CPU (quant_cpu.h): the reference's row logic
// (quant_ref.cpp: scales, the zero-scale rule of spec 2.9 H2, padding rows, ue8m0, scale_ub)
// with the element loops of the AVX2 kernels. Tested by tests/cpu/test_quant_cpu.cpp.
#include "ops/quant/quant_cpu.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/quant/quant_encode.h"
#include "ops/quant/quant_ref.h"

namespace fp8kit::ops {
namespace cpu {
namespace {

float absmax_to_float(uint32_t bits, DType in) {
  switch (in) {
    case DType::kBF16: return abs_bits_to_float(bits, BFloat16{});
    case DType::kF16: return abs_bits_to_float(bits, Float16{});
    default: return abs_bits_to_float(bits, 0.0f);
  }
}

const uint8_t* in_row(const void* base, DType in, int64_t row, int64_t stride) {
  return static_cast<const uint8_t*>(base) + size_t(row * stride) * dtype_size(in);
}

int64_t grain_rows(int64_t k) { return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(k, 1)); }

}  // namespace

void run_scaled_fp8_quant(const ScaledFp8QuantArgs& a, const QuantPlan& plan) {
  FP8KIT_CHECK(plan.kernel == QuantKernel::kAvx2 && best_cpu_isa() >= CpuIsa::kAvx2, ErrorCode::kInternal,
               "run_scaled_fp8_quant: an AVX2 plan needs an AVX2 CPU");
  const QuantKernels& kern = quant_kernels_avx2(a.in_dtype, a.out_dtype == DType::kE4M3FNUZ);
  auto* out = static_cast<uint8_t*>(a.out);
  auto per_tensor = [&](float s) {
    if (s == 0.0f) {  // zero codes (spec 2.9 H2, as the reference)
      for (int64_t r = 0; r < a.m; ++r) std::memset(out + r * a.out_row_stride, 0, size_t(a.k));
      return;
    }
    const float inv = 1.0f / s;
    parallel_for_at_most(plan.threads, a.m, grain_rows(a.k), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        kern.quantize_mul(in_row(a.input, a.in_dtype, r, a.input_row_stride), a.k, inv, a.fp8_max, out + r * a.out_row_stride);
      }
    });
  };
  switch (a.mode) {
    case ScaledQuantMode::kStatic: per_tensor(a.scale[0]); break;
    case ScaledQuantMode::kDynamicPerTensor: {
      std::atomic<uint32_t> amax{0};
      parallel_for_at_most(plan.threads, a.m, grain_rows(a.k), [&](int64_t r0, int64_t r1) {
        uint32_t local = 0;
        for (int64_t r = r0; r < r1; ++r) {
          local = std::max(local, kern.absmax_bits(in_row(a.input, a.in_dtype, r, a.input_row_stride), a.k));
        }
        uint32_t seen = amax.load();
        while (local > seen && !amax.compare_exchange_weak(seen, local)) {
        }
      });
      const float s = absmax_to_float(amax.load(), a.in_dtype) / a.fp8_max;  // no floor (spec 2.2 rule 2)
      a.scale[0] = s;
      per_tensor(s);
      break;
    }
    case ScaledQuantMode::kDynamicPerToken:
      parallel_for_at_most(plan.threads, a.m, grain_rows(a.k), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const uint8_t* x = in_row(a.input, a.in_dtype, r, a.input_row_stride);
          const float amax = absmax_to_float(kern.absmax_bits(x, a.k), a.in_dtype);
          const float bounded = a.scale_ub != nullptr ? std::fminf(amax, *a.scale_ub) : amax;
          const float s = std::fmaxf(bounded / a.fp8_max, a.min_scaling_factor);
          a.scale[r] = s;
          kern.quantize_div(x, a.k, s, amax, a.fp8_max, out + r * a.out_row_stride);
        }
      });
      break;
  }
  for (int64_t r = a.m; r < a.out_rows; ++r) std::memset(out + r * a.out_row_stride, 0, size_t(a.k));
  if (a.mode == ScaledQuantMode::kDynamicPerToken) {
    for (int64_t r = a.m; r < a.out_rows; ++r) a.scale[r] = 1.0f;
  }
}

void run_per_token_group_quant(const PerTokenGroupQuantArgs& a, const QuantPlan& plan) {
  FP8KIT_CHECK(plan.kernel == QuantKernel::kAvx2 && best_cpu_isa() >= CpuIsa::kAvx2, ErrorCode::kInternal,
               "run_per_token_group_quant: an AVX2 plan needs an AVX2 CPU");
  const QuantKernels& kern = quant_kernels_avx2(a.in_dtype, a.out_dtype == DType::kE4M3FNUZ);
  auto* out = static_cast<uint8_t*>(a.out);
  const int64_t groups = a.k / a.group_size;
  const size_t es = dtype_size(a.in_dtype);
  parallel_for_at_most(plan.threads, a.rows, grain_rows(a.k), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* x = in_row(a.input, a.in_dtype, r, a.input_row_stride) + size_t(g * a.group_size) * es;
        uint8_t* q = out + r * a.out_row_stride + g * a.group_size;
        const float amax = absmax_to_float(kern.absmax_bits(x, a.group_size), a.in_dtype);
        float s = std::fmaxf(amax, a.eps) / a.fp8_max;
        if (a.use_ue8m0) s = ue8m0_bits_to_float(float_to_ue8m0_bits(s, E8M0Rounding::kUpward));
        a.scale[r * a.scale_row_stride + g * a.scale_group_stride] = s;
        if (s == 0.0f) {
          std::memset(q, 0, size_t(a.group_size));  // eps underflowed: zero codes, as the reference
        } else {
          kern.quantize_div(x, a.group_size, s, amax, a.fp8_max, q);
        }
      }
    }
  });
}

}  // namespace cpu

void scaled_fp8_quant_cpu(const ScaledFp8QuantArgs& args, const Overrides& overrides, int num_threads) {
  const cpu::QuantPlan plan = cpu::plan_cpu_quant({args.m, args.k, best_cpu_isa(), num_threads}, overrides);
  if (plan.kernel == cpu::QuantKernel::kReference) return scaled_fp8_quant_ref(args);
  cpu::run_scaled_fp8_quant(args, plan);
}

void per_token_group_quant_cpu(const PerTokenGroupQuantArgs& args, const Overrides& overrides, int num_threads) {
  const cpu::QuantPlan plan = cpu::plan_cpu_quant({args.rows, args.k, best_cpu_isa(), num_threads}, overrides);
  if (plan.kernel == cpu::QuantKernel::kReference) return per_token_group_quant_ref(args);
  cpu::run_per_token_group_quant(args, plan);
}

}  // namespace fp8kit::ops
