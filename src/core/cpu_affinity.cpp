// pinning_order and pin_thread (cpu_affinity.h). Tested in tests/cpu/test_parallel.cpp.
#include "core/cpu_affinity.h"

#include <algorithm>
#include <cstdio>
#include <string>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace fp8kit {
namespace {

#if defined(__linux__)
// Affinity masks are sized for this many CPUs (glibc's cpu_set_t holds 1024; hosts have more).
constexpr int kMaxCpus = 8192;

struct CpuMask {
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  size_t bytes = CPU_ALLOC_SIZE(kMaxCpus);
  CpuMask() { CPU_ZERO_S(bytes, set); }
  ~CpuMask() { CPU_FREE(set); }
  CpuMask(const CpuMask&) = delete;
  CpuMask& operator=(const CpuMask&) = delete;
  std::vector<int> cpus() const {
    std::vector<int> out;
    for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
      if (CPU_ISSET_S(cpu, bytes, set)) out.push_back(cpu);
    }
    return out;
  }
};

// The lowest CPU of `cpu`'s core ("0-1", "0,64" or "3" in thread_siblings_list), or -1.
int first_sibling(int cpu) {
  const std::string path = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list";
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return -1;
  int first = -1;
  if (std::fscanf(f, "%d", &first) != 1) first = -1;
  std::fclose(f);
  return first;
}
#endif

}  // namespace

std::vector<int> pinning_order() {
#if defined(__linux__)
  CpuMask mask;
  if (sched_getaffinity(0, mask.bytes, mask.set) != 0) return {};
  std::vector<int> cpus = mask.cpus();
  std::vector<int> firsts, seconds;
  for (const int cpu : cpus) {
    const int first = first_sibling(cpu);
    if (first < 0) return cpus;  // no topology: the mask's order
    (first == cpu ? firsts : seconds).push_back(cpu);
  }
  firsts.insert(firsts.end(), seconds.begin(), seconds.end());
  return firsts;
#else
  return {};
#endif
}

bool pin_thread(std::thread& thread, int cpu) {
#if defined(__linux__)
  if (cpu < 0 || cpu >= kMaxCpus) return false;
  CpuMask mask;
  CPU_SET_S(size_t(cpu), mask.bytes, mask.set);
  return pthread_setaffinity_np(thread.native_handle(), mask.bytes, mask.set) == 0;
#else
  (void)thread;
  (void)cpu;
  return false;
#endif
}

std::vector<int> current_thread_cpus() {
#if defined(__linux__)
  CpuMask mask;
  if (pthread_getaffinity_np(pthread_self(), mask.bytes, mask.set) != 0) return {};
  return mask.cpus();
#else
  return {};
#endif
}

}  // namespace fp8kit
