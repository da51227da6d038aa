// Which CPUs the thread pool pins its workers to (thread_pool.h): the CPUs of the process's
// affinity mask, one hardware thread of each core before the second thread of any core, so that a
// pool smaller than the machine gets whole cores. Linux only (sched_getaffinity and sysfs'
// topology); elsewhere no CPU is known and nothing is pinned. Not a public header.
// Tested in tests/cpu/test_parallel.cpp.
#pragma once

#include <thread>
#include <vector>

namespace fp8kit {

// The CPUs this process may run on, each once, in pinning order: the first hardware thread of
// each core (the lowest CPU of its thread_siblings_list) in increasing order, then the others in
// increasing order. The mask's order when the topology cannot be read; empty when the mask
// cannot be read (or off Linux).
std::vector<int> pinning_order();

// Restricts `thread` to `cpu`; false when the OS refuses (a CPU outside a cgroup's set, say).
bool pin_thread(std::thread& thread, int cpu);

// The CPUs the calling thread may run on, in increasing order (empty off Linux).
std::vector<int> current_thread_cpus();

}  // namespace fp8kit
