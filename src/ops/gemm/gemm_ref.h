// CPU reference of scaled_mm (include/fp8kit/ops/gemm.h): the executable spec of every GEMM
// backend. Products of two e4m3 values are exact in float; sums over K are taken in double and
// rounded to float once (per K-block for block scaling), then the epilogue runs in float:
//   per-tensor / per-token / per-channel:  y = round_out(fmaf(sa, float(sb * acc), bias))
//   block:  acc = sum over K-blocks of float((float(acc_kb) * sa[m, kb]) * sb[n / bn, kb]),
//           accumulated in float in K order;  y = round_out(acc + bias)
// Tested by tests/cpu/test_gemm.cpp (GemmRef.*: hand-computed cases, integer grids, fp64 tolerance).
#pragma once

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

void scaled_mm_ref(const ScaledMmArgs& args);

}  // namespace fp8kit::ops
