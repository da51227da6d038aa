// One threaded pass over a floating tensor: its largest magnitude and whether it holds a NaN or
// an infinity (which a checkpoint tool must refuse rather than quantize).
#pragma once

#include <cstdint>

#include "fp8kit/tensor.h"

namespace fp8kit::convert {

struct ScanResult {
  float absmax = 0.0f;             // over the finite elements
  int64_t first_non_finite = -1;   // flat index of a NaN or inf, -1 when none
};

// `t`: contiguous f32, f16 or bf16 on the CPU.
ScanResult scan_tensor(const Tensor& t);

}  // namespace fp8kit::convert
