// f32 operations rounded once each, to nearest even, on the host and in CUDA kernels alike:
// nvcc fuses a separate multiply and add into an FMA unless told otherwise, so code whose bits
// the CPU reference must reproduce spells each rounding out (MoE routing, the quantizers'
// division by a reciprocal).
#pragma once

#include <cmath>

#include "fp8kit/host_device.h"

namespace fp8kit::ops {

FP8KIT_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

FP8KIT_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

FP8KIT_HOST_DEVICE float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

FP8KIT_HOST_DEVICE float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

}  // namespace fp8kit::ops
