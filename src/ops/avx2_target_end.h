// Closes the AVX2/FMA/F16C region that avx2_target_begin.h opened.
// (No include guard: each file closes its region once.)
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
