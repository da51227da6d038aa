// cuBLASLt, loaded with dlopen on first use instead of linked: libcublasLt's static initialisers
// cost every process that links it ~190 MiB of resident memory and 0.1-0.4 s at start-up, CPU-only
// commands included (`fp8kit --version`). Only the cuBLASLt GEMM backends call cublaslt().
// Safe to include from .cu files (no fmt). Tested by tests/gpu/test_gemm_cuda.cpp (GemmCuda.*, the
// cuBLASLt backend) and tests/cpu/test_cli_startup.cpp (the resident memory of CPU commands).
#pragma once

#include <cublasLt.h>

namespace fp8kit::cuda {

// The entry points fp8kit uses, named as the library names them; the types are the header's.
struct CublasLtApi {
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtDestroy) cublasLtDestroy;
  decltype(&::cublasLtGetStatusName) cublasLtGetStatusName;
  decltype(&::cublasLtGetStatusString) cublasLtGetStatusString;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic;
};

// Loads libcublasLt.so.<major of the headers> on the first call (thread-safe) and returns its
// entry points. Throws Error(kCuda) naming the library and the loader's message when it cannot be
// loaded or lacks an entry point.
const CublasLtApi& cublaslt();

}  // namespace fp8kit::cuda
