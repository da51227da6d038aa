// Helpers of the fast CPU GEMM tests: operands on integer grids and at random, the op args built
// from tensors as the entry points build them, and every plan this machine can run for a shape
// (each kernel family present, GEMV and panel shapes, small panels that exercise tile edges, one
// and two threads), so a test runs the engine on each and compares with the reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "fp8kit/tensor.h"
#include "ops/gemm/gemm_cpu_plan.h"

namespace fp8kit::gemm_cpu_test {

using ops::cpu::GemmKernel;
using ops::cpu::GemmPlan;
using ops::cpu::GemmShape;

struct NamedPlan {
  std::string name;
  GemmPlan plan;
};

// Every plan for an m-row problem: portable, and AVX2 and AVX-512-BF16 when the CPU has them
// (the latter only where `bf16_operands`: every operand e4m3fn or bf16, chunks of 32); GEMV
// (m <= 8) and panels (default tiles, and 4 x 8 tiles whose 3 x 4 / 4 x 4 tiles overhang); 1 and 2
// threads.
inline std::vector<NamedPlan> plans_for(int64_t m, bool bf16_operands = false) {
  std::vector<NamedPlan> out;
  std::vector<GemmKernel> kernels = {GemmKernel::kPortable};
  if (best_cpu_isa() >= CpuIsa::kAvx2) kernels.push_back(GemmKernel::kAvx2);
  if (bf16_operands && best_cpu_isa() >= CpuIsa::kAvx512Bf16) kernels.push_back(GemmKernel::kAvx512Bf16);
  for (GemmKernel kernel : kernels) {
    const std::string family(ops::cpu::gemm_kernel_name(kernel));
    for (int threads : {1, 2}) {
      const std::string suffix = " x" + std::to_string(threads);
      GemmPlan p;
      p.kernel = kernel;
      p.threads = threads;
      if (m <= ops::cpu::kGemvMaxRows) {
        p.shape = GemmShape::kGemv;
        out.push_back({family + " gemv" + suffix, p});
      }
      p.shape = GemmShape::kPanel;
      p.panel_m = std::min<int64_t>(m, 192);
      p.panel_n = 64;
      out.push_back({family + " panel" + suffix, p});
      p.panel_m = std::min<int64_t>(m, 4);
      p.panel_n = 8;
      out.push_back({family + " panel 4x8" + suffix, p});
    }
  }
  return out;
}

// Values on an integer grid [-r, r] (exact in every format here).
inline std::vector<float> grid_values(int64_t count, int r, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-r, r);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = float(d(rng));
  return v;
}

// Values of uniformly random e4m3 codes (no NaN): magnitudes log-uniform over [2^-9, 448], so
// that f32 sums of their products round (normal values rounded to e4m3 mostly sum exactly).
inline std::vector<float> random_code_values(int64_t count, std::mt19937& rng) {
  std::uniform_int_distribution<int> code(0, 0xfd);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) {
    const int c = code(rng);
    x = e4m3fn_bits_to_float(uint8_t(c < 0x7f ? c : c + 1));  // skip 0x7f
  }
  return v;
}

inline std::vector<float> normal_values(int64_t count, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = d(rng);
  return v;
}

// A [rows, cols] tensor of `dtype` (e4m3fn, bf16, f16, f32) holding `v` (rounded), with row
// stride `ld` >= cols and its first element `offset` elements into its buffer (misaligned).
inline Tensor make_matrix(const std::vector<float>& v, int64_t rows, int64_t cols, DType dtype, int64_t ld = 0,
                          int64_t offset = 0) {
  if (ld == 0) ld = cols;
  Tensor base = Tensor::zeros({rows * ld + offset}, dtype);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t at = offset + r * ld + c;
      const float x = v[size_t(r * cols + c)];
      switch (dtype) {
        case DType::kE4M3FN: static_cast<uint8_t*>(base.data_ptr())[at] = float_to_e4m3fn_bits(x); break;
        case DType::kBF16: base.data<BFloat16>()[at] = float_to_bf16(x); break;
        case DType::kF16: base.data<Float16>()[at] = float_to_f16(x); break;
        default: base.data<float>()[at] = x; break;
      }
    }
  }
  return base.narrow(0, offset, rows * ld).view({rows, ld}).narrow(1, 0, cols);
}

// Powers of two 2^[lo, hi] (scales that keep integer-grid results exact).
inline Tensor pow2_scales(const Shape& shape, std::mt19937& rng, int lo = -4, int hi = 2) {
  std::uniform_int_distribution<int> e(lo, hi);
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::ldexp(1.0f, e(rng));
  return t;
}

inline Tensor uniform_scales(const Shape& shape, std::mt19937& rng, float lo = 0.01f, float hi = 0.1f) {
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// An output buffer filled with NaN bits (all ones), so an element a kernel forgets stays NaN.
inline Tensor poisoned(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  std::memset(t.data_ptr(), 0xff, t.nbytes());
  return t;
}

inline float element(const Tensor& y, int64_t i) {
  switch (y.dtype()) {
    case DType::kBF16: return bf16_to_float(y.data<BFloat16>()[i]);
    case DType::kF16: return f16_to_float(y.data<Float16>()[i]);
    default: return y.data<float>()[i];
  }
}

// Elements whose bits differ, with the first one described.
inline int64_t bit_mismatches(const Tensor& got, const Tensor& want, std::string* first = nullptr) {
  const size_t es = got.element_size();
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::memcmp(static_cast<const uint8_t*>(got.data_ptr()) + i * es, static_cast<const uint8_t*>(want.data_ptr()) + i * es,
                    es) != 0) {
      if (bad == 0 && first != nullptr) {
        *first = "element " + std::to_string(i) + ": " + std::to_string(element(got, i)) + " vs " +
                 std::to_string(element(want, i));
      }
      ++bad;
    }
  }
  return bad;
}

// max |got - want| / (|want| + floor); NaN anywhere in got makes it NaN (so `<= tol` fails).
inline double max_rel_error(const Tensor& got, const std::vector<double>& want, double floor) {
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double e = std::abs(double(element(got, i)) - want[size_t(i)]) / (std::abs(want[size_t(i)]) + floor);
    if (std::isnan(e)) return e;
    worst = std::max(worst, e);
  }
  return worst;
}

}  // namespace fp8kit::gemm_cpu_test
