// CPU reference of the FP8 quantization ops: the executable form of spec SEMANTICS.md 1.6
// (scaled_fp8_quant, per_token_group_quant), 1.11 (requantize_with_max_scale,
// normalize_e4m3fn_to_e4m3fnuz, per_tensor_dequantize), 2.1-2.2 (bit-exact formulas) and 2.9 H2
// (a zero per-tensor scale quantizes to zero codes). Arguments are validated by quant.cpp.
// Tested by tests/cpu/test_quant_*.cpp; the CUDA kernels are tested bit-exact against it.
#pragma once

#include "ops/quant/quant_args.h"

namespace fp8kit::ops {

void scaled_fp8_quant_ref(const ScaledFp8QuantArgs& args);
void per_token_group_quant_ref(const PerTokenGroupQuantArgs& args);
void quantize_weight_ref(const WeightQuantArgs& args);
void dequantize_ref(const DequantArgs& args);
void requantize_with_max_scale_ref(const RequantizeArgs& args);
void normalize_e4m3fn_to_e4m3fnuz_ref(const FnuzNormalizeArgs& args);

}  // namespace fp8kit::ops
