// CPU parallelism for the reference ops and the checkpoint tools: one process-wide pool of worker
// threads (FP8KIT_NUM_THREADS, default: the hardware threads) and a blocking parallel_for.
#pragma once

#include <cstdint>
#include <functional>

namespace fp8kit {

int num_threads();

// Calls fn(begin, end) on disjoint chunks covering [0, n), each at least `grain` long (except
// the last), on the pool and the calling thread; returns when all are done. The first exception
// thrown by fn is rethrown here. Nested calls run serially on the calling thread.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

}  // namespace fp8kit
