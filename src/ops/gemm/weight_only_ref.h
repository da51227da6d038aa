// CPU reference of weight_only_mm (include/fp8kit/ops/gemm.h): weights dequantized to float
// (decode * scale, one float rounding), products with the 16-bit activations summed in double,
// rounded to float, bias added in float, then one rounding to the activation dtype. Tested by
// tests/cpu/test_weight_only.cpp.
#pragma once

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

void weight_only_mm_ref(const WeightOnlyMmArgs& args);

}  // namespace fp8kit::ops
