// Opens the region of a CPU backend source file that is compiled for AVX2/FMA/F16C: functions
// defined after it get that target, so the file builds for the baseline ISA and its kernels run
// only where best_cpu_isa() reports AVX2. Include it after the file's other headers, on x86-64
// with GCC or clang, and close the region with avx2_target_end.h. Brings <immintrin.h>.
// (No include guard: each file opens its region once.)
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
