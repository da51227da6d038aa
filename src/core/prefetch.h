// Prefetches of the cache line at p, into L2 (x86: prefetcht1) or into L1 (prefetcht0), which
// never fault: an address that is not mapped costs nothing. Written as asm on x86 because GCC
// counts __builtin_prefetch as no side effect and deleted loops, and calls of functions, that did
// nothing else (the CPU GEMV's bf16 kernel had none left; the CPU attention's loop too). Used by
// the CPU GEMV (ops/gemm/gemm_cpu_driver.h), the thread pool's hints (core/thread_pool.h) and the
// CPU attention's key and value rows (ops/attention/attention_cpu.cpp). Not a public header.
#pragma once

#include <cstdint>

namespace fp8kit {

[[gnu::always_inline]] inline void prefetch_l2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const uint8_t*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

[[gnu::always_inline]] inline void prefetch_l1(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const uint8_t*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

}  // namespace fp8kit
