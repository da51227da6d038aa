// The instruction sets of the machine fp8kit runs on, detected once (CPUID and the OS's saved
// register state, XGETBV), and the kernel families the fast CPU backend has for them. The plans
// of the CPU ops (src/ops/*/..._cpu_plan.cpp) take a CpuIsa as data, so tests can force any
// family the machine can run. Tested by CpuFeatures.* (tests/cpu/test_gemm_cpu_plan.cpp).
#pragma once

#include <cstdint>
#include <string_view>

namespace fp8kit {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;  // with the OS saving YMM state
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vbmi = false;  // with ZMM state
  bool avx512_bf16 = false, avx512_fp16 = false;
};

// Kernel families of the fast CPU backend, each a superset of the one before. kPortable is plain
// C++ the compiler vectorizes for the build's baseline (SSE2 on x86-64, NEON on AArch64); kAvx2
// needs AVX2, FMA and F16C; kAvx512Bf16 also AVX-512 F/BW/VL/VBMI and AVX512_BF16 (Zen 4,
// Sapphire Rapids), whose VDPBF16PS does twice the multiply-adds of an f32 FMA.
enum class CpuIsa : uint8_t { kPortable, kAvx2, kAvx512Bf16 };

// Detected on first use (thread-safe); all false off x86-64.
const CpuFeatures& cpu_features();

// The best family `features` can run.
CpuIsa best_cpu_isa(const CpuFeatures& features);
inline CpuIsa best_cpu_isa() { return best_cpu_isa(cpu_features()); }

std::string_view cpu_isa_name(CpuIsa isa);

}  // namespace fp8kit
