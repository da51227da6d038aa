// CPU parallelism for the reference ops and the checkpoint tools: one process-wide pool of worker
// threads (process_overrides().num_threads: FP8KIT_NUM_THREADS or --threads; default: the
// hardware threads) and a blocking parallel_for.
// Tested in tests/cpu/test_parallel.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>

#include "core/function_ref.h"

namespace fp8kit {

// The threads of the process-wide pool (the caller included). The pool starts at the first call,
// sized from process_overrides() (whose first use parses the environment: an invalid
// FP8KIT_NUM_THREADS throws Error(kInvalidArgument) there). When the system refuses threads, the
// pool runs with those it got and says so once on the log.
int num_threads();

// Jobs the process-wide pool has handed to its workers so far (0 before it starts): a test or a
// benchmark reads it before and after some work to count the hand-offs that work cost.
uint64_t pool_jobs();

// The most threads a pool may have: 4 per hardware thread, at least 64 (oversubscription that
// small costs little, and tests of the pool need more threads than a 2-core machine has), at
// most 1024 (each thread costs ~130 KiB resident and a process id; 100,000 exhausted a host).
int max_threads();

// A thread count given as text (FP8KIT_NUM_THREADS, --threads): decimal digits only, from 1 to
// max_threads(). Error(kInvalidArgument) "<what> must be an integer from 1 to N, got '<text>'".
int parse_thread_count(std::string_view text, std::string_view what);

// Calls fn(begin, end) on disjoint chunks covering [0, n), each at least `grain` long (except
// the last), on the pool and the calling thread; returns when all are done. The first exception
// thrown by fn is rethrown here. Nested calls run serially on the calling thread.
void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t begin, int64_t end)> fn);

// How parallel_for cuts [0, n) for `threads` threads: first one large chunk per thread (three
// quarters of the range together, in whole grains), then the rest in 2 x threads small ones.
// Threads of equal speed each take one large and as many small chunks, and one that falls
// behind takes fewer of the small ones: the threads of a job end together, after few hand-offs
// (6 chunks on 2 threads). Every chunk but the last is at least `grain` long; too few grains
// for large chunks give chunks of about n / (4 threads).
struct ChunkSchedule {
  int64_t n = 0;
  int64_t heads = 0, big = 0;  // chunks [0, heads) of `big`
  int64_t small = 1;           // then chunks of `small` (the last one shorter)
  int64_t chunks() const { return heads + (n - heads * big + small - 1) / small; }
  std::pair<int64_t, int64_t> range(int64_t i) const {
    if (i < heads) return {i * big, (i + 1) * big};
    const int64_t begin = heads * big + (i - heads) * small;
    return {begin, std::min(n, begin + small)};
  }
};
ChunkSchedule chunk_schedule(int64_t n, int64_t grain, int threads);

// Asks the process-wide pool's idle workers to prefetch [p, p + bytes) into L2 (ThreadPool::hint):
// the runner names the weights of the next layer before the serial ops of a decode step. Does
// nothing while the pool has not started or has no workers.
void prefetch_hint(const void* p, size_t bytes);

// parallel_for on at most `max_threads` threads at once (the calling thread included; <= 0 or
// more than the pool has: the whole pool). With fewer threads than the pool the range is cut into
// exactly that many chunks (no more threads than chunks can be busy); with the whole pool, as
// parallel_for. For kernels whose thread count is part of their plan (ForwardContext::num_threads).
void parallel_for_at_most(int max_threads, int64_t n, int64_t grain,
                          FunctionRef<void(int64_t begin, int64_t end)> fn);

}  // namespace fp8kit
