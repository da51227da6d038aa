// CPU feature detection (core/cpu_features.h): CPUID leaves 1 and 7, and XGETBV for the register
// state the OS saves (AVX needs XMM|YMM, AVX-512 also opmask|ZMM_Hi256|Hi16_ZMM).
#include "core/cpu_features.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define FP8KIT_X86_CPUID 1
#endif

namespace fp8kit {
namespace {

#if FP8KIT_X86_CPUID
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;
  const bool fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
  if (!ymm_state) return f;
  f.fma = fma;
  f.f16c = f16c;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (b >> 5) & 1;
  if (zmm_state) {
    f.avx512f = (b >> 16) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vbmi = (c >> 1) & 1;
    f.avx512_fp16 = (d >> 23) & 1;
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512_bf16 = (a1 >> 5) & 1;
  }
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

CpuIsa best_cpu_isa(const CpuFeatures& f) {
  if (!(f.avx2 && f.fma && f.f16c)) return CpuIsa::kPortable;
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512vbmi && f.avx512_bf16) return CpuIsa::kAvx512Bf16;
  return CpuIsa::kAvx2;
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable: return "portable";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512Bf16: return "avx512-bf16";
  }
  return "?";
}

}  // namespace fp8kit
