// The process-wide pool of parallel.h: its size from the process overrides (FP8KIT_NUM_THREADS or
// --threads, parsed once), bounded by max_threads(), its workers pinned unless FP8KIT_PIN_THREADS=0,
// and parallel_for on top of core/thread_pool.h.
// Tested in tests/cpu/test_parallel.cpp.
#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "core/check.h"
#include "core/checked_math.h"
#include "core/names.h"
#include "core/thread_pool.h"
#include "fp8kit/log.h"
#include "fp8kit/runtime/overrides.h"

namespace fp8kit {
namespace {

int hardware_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min(hw, 1024u));
}

// The process overrides' FP8KIT_NUM_THREADS (parsed once, by Overrides::parse with
// parse_thread_count), else every hardware thread.
int configured_threads() {
  const int wanted = process_overrides().num_threads;
  return wanted > 0 ? wanted : std::min(hardware_threads(), max_threads());
}

std::unique_ptr<ThreadPool> start_pool() {
  const int wanted = configured_threads();
  auto pool = std::make_unique<ThreadPool>(wanted, process_overrides().pin_threads);
  if (!pool->start_failure().empty()) {
    log_warning(fmt::format("started {} of {} threads ({}); running with {}", pool->size(), wanted,
                            pool->start_failure(), pool->size()));
  }
  return pool;
}

std::atomic<ThreadPool*> g_started{nullptr};

ThreadPool& pool() {
  // A function-local static: started once, by the first caller; an Error from a bad
  // FP8KIT_NUM_THREADS leaves it unstarted, and the next call reports it again.
  static const std::unique_ptr<ThreadPool> p = [] {
    auto started = start_pool();
    g_started.store(started.get(), std::memory_order_release);
    return started;
  }();
  return *p;
}

}  // namespace

ChunkSchedule chunk_schedule(int64_t n, int64_t grain, int threads) {
  grain = std::max<int64_t>(grain, 1);
  threads = std::max(threads, 1);
  ChunkSchedule s;
  s.n = n;
  s.big = n * 3 / (4 * int64_t(threads)) / grain * grain;  // whole grains
  if (s.big == 0) {  // too few grains for a large chunk each: chunks of about n / (4 threads)
    s.small = std::max(grain, ceil_div(n, int64_t(threads) * 4));
    return s;
  }
  s.heads = threads;
  s.small = std::max(grain, (n - s.big * threads) / (2 * int64_t(threads)));
  return s;
}

int max_threads() { return std::clamp(4 * hardware_threads(), 64, 1024); }

int parse_thread_count(std::string_view text, std::string_view what) {
  const int most = max_threads();
  int64_t value = 0;
  bool ok = !text.empty() && text.size() <= 9;  // more digits than that are out of range anyway
  for (const char c : text) {
    ok = ok && c >= '0' && c <= '9';
    if (ok) value = value * 10 + (c - '0');
  }
  FP8KIT_CHECK_ARG(ok && value >= 1 && value <= most, "{} must be an integer from 1 to {}, got '{}'", what, most,
                   shown_path(text.substr(0, 64)));
  return static_cast<int>(value);
}

int num_threads() { return pool().size(); }

void prefetch_hint(const void* p, size_t bytes) {
  if (ThreadPool* started = g_started.load(std::memory_order_acquire)) started->hint(p, bytes);
}

uint64_t pool_jobs() {
  const ThreadPool* p = g_started.load(std::memory_order_acquire);
  return p != nullptr ? p->jobs() : 0;
}

void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (ThreadPool::inside_job()) {  // nested: serial, and before pool() so a worker never starts one
    fn(0, n);
    return;
  }
  const int threads = num_threads();
  if (threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  const ChunkSchedule s = chunk_schedule(n, grain, threads);
  pool().run(s.chunks(), [&](int64_t i) {
    const auto [begin, end] = s.range(i);
    fn(begin, end);
  });
}

void parallel_for_at_most(int max_threads, int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (ThreadPool::inside_job()) {  // nested: serial, as parallel_for
    fn(0, n);
    return;
  }
  if (max_threads <= 0 || max_threads >= num_threads()) return parallel_for(n, grain, fn);
  if (max_threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // One chunk per allowed thread: at most max_threads of the pool's threads find work.
  const int64_t chunk = std::max(grain, ceil_div(n, int64_t(max_threads)));
  const int64_t chunks = ceil_div(n, chunk);
  pool().run(chunks, [&](int64_t i) {
    const int64_t begin = i * chunk;
    fn(begin, std::min(n, begin + chunk));
  });
}

}  // namespace fp8kit
