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

// parallel_for on at most `max_threads` threads at once (the calling thread included; <= 0 or
// more than the pool has: the whole pool). With fewer threads than the pool the range is cut into
// exactly that many chunks (no more threads than chunks can be busy); with the whole pool, as
// parallel_for. For kernels whose thread count is part of their plan (ForwardContext::num_threads).
void parallel_for_at_most(int max_threads, int64_t n, int64_t grain,
                          const std::function<void(int64_t begin, int64_t end)>& fn);

}  // namespace fp8kit
