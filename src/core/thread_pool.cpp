// ThreadPool (see thread_pool.h). Tested in tests/cpu/test_parallel.cpp.
#include "core/thread_pool.h"

#include <algorithm>

#include "core/cpu_affinity.h"
#include "core/prefetch.h"

namespace fp8kit {
namespace {

thread_local bool t_inside_job = false;

// Spins of the wait loops before they sleep: 4096 pause instructions, some tens of microseconds.
constexpr int kSpins = 4096;

// Fields of the job word (thread_pool.h): next chunk and chunk count of 20 bits each, the rest
// the generation (wrapping; a worker that misses one job of 2^24 only does not help with it).
constexpr int kFieldBits = 20;
constexpr uint64_t kFieldMask = (uint64_t(1) << kFieldBits) - 1;
constexpr int64_t kMaxChunksPerJob = int64_t(kFieldMask);
constexpr int kGenerationShift = 2 * kFieldBits;
constexpr uint64_t kGenerationMask = (uint64_t(1) << (64 - kGenerationShift)) - 1;

uint64_t next_of(uint64_t job) { return job & kFieldMask; }
uint64_t chunks_of(uint64_t job) { return (job >> kFieldBits) & kFieldMask; }
uint64_t generation_of(uint64_t job) { return job >> kGenerationShift; }

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads, bool pin) {
  workers_.reserve(static_cast<size_t>(std::max(threads - 1, 0)));
  for (int i = 1; i < threads; ++i) {
    try {
      workers_.emplace_back([this] { work(); });
    } catch (const std::exception& e) {
      // EAGAIN from pthread_create (a process or memory limit). The workers already started
      // wait on this pool's condition variables: they must be kept, not abandoned mid-start.
      start_failure_ = e.what();
      break;
    }
  }
  if (!pin || workers_.empty()) return;
  const std::vector<int> cpus = pinning_order();
  if (cpus.size() < size_t(size())) return;
  for (size_t w = 0; w < workers_.size(); ++w) pinned_ += pin_thread(workers_[w], cpus[w + 1]) ? 1 : 0;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

bool ThreadPool::inside_job() { return t_inside_job; }

void ThreadPool::run(int64_t chunks, FunctionRef<void(int64_t)> body) {
  std::lock_guard<std::mutex> serial(run_mutex_);
  error_ = nullptr;
  for (int64_t first = 0; first < chunks; first += kMaxChunksPerJob) {
    run_job(first, std::min(kMaxChunksPerJob, chunks - first), body);
  }
  body_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::run_job(int64_t first, int64_t chunks, const FunctionRef<void(int64_t)>& body) {
  body_ = &body;
  first_ = first;
  if (workers_.empty() || chunks == 1) {  // nothing to hand off: the word stays as it is
    for (int64_t i = 0; i < chunks; ++i) run_chunk(first + i);
    return;
  }
  unfinished_.store(chunks, std::memory_order_relaxed);
  generation_ = (generation_ + 1) & kGenerationMask;
  const uint64_t job = (generation_ << kGenerationShift) | (uint64_t(chunks) << kFieldBits);
  jobs_.fetch_add(1, std::memory_order_relaxed);
  job_.store(job, std::memory_order_seq_cst);  // publishes body_, first_ and unfinished_
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }  // a worker between its check and its wait
    wake_.notify_all();
  }
  drain(job);
  const auto done = [&] { return unfinished_.load(std::memory_order_seq_cst) == 0; };
  for (int spin = 0; spin < kSpins && !done(); ++spin) pause();
  if (!done()) {
    std::unique_lock<std::mutex> lock(mutex_);
    caller_sleeps_.store(true, std::memory_order_seq_cst);
    done_.wait(lock, done);
    caller_sleeps_.store(false, std::memory_order_relaxed);
  }
}

void ThreadPool::run_chunk(int64_t i) {
  t_inside_job = true;
  try {
    (*body_)(i);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
  t_inside_job = false;
}

uint64_t ThreadPool::drain(uint64_t job) {
  // The chunks this thread ran are counted off unfinished_ together once it finds none left to
  // claim (one write to a shared line per thread and job, not per chunk). Until then the job
  // cannot end, so a failed claim shows the same job, and a later one only when `done` is 0.
  int64_t done = 0;
  while (next_of(job) < chunks_of(job)) {
    // On failure `job` is the word now, possibly a later job's: claims continue from that one.
    if (!job_.compare_exchange_weak(job, job + 1, std::memory_order_acquire, std::memory_order_acquire)) continue;
    run_chunk(first_ + int64_t(next_of(job)));
    ++done;
    job = job_.load(std::memory_order_acquire);
  }
  if (done > 0 && unfinished_.fetch_sub(done, std::memory_order_seq_cst) == done &&
      caller_sleeps_.load(std::memory_order_seq_cst)) {
    { std::lock_guard<std::mutex> lock(mutex_); }  // run() between its check and its wait
    done_.notify_all();
  }
  return job;
}

void ThreadPool::hint(const void* p, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  // A worker that reads the new start with the old end prefetches a piece of the new range at
  // most (or none), which is harmless either way.
  hint_next_.store(UINTPTR_MAX, std::memory_order_relaxed);
  hint_end_.store(begin + bytes, std::memory_order_relaxed);
  hint_next_.store(begin, std::memory_order_release);
}

bool ThreadPool::prefetch_hinted_piece() {
  uintptr_t at = hint_next_.load(std::memory_order_acquire);
  const uintptr_t end = hint_end_.load(std::memory_order_relaxed);
  if (at >= end) return false;
  if (!hint_next_.compare_exchange_strong(at, at + kHintPiece, std::memory_order_relaxed)) return true;
  const char* p = reinterpret_cast<const char*>(at);
  const size_t n = std::min<uintptr_t>(kHintPiece, end - at);
  for (size_t line = 0; line < n; line += 64) prefetch_l2(p + line);
  return true;
}

void ThreadPool::work() {
  uint64_t seen = 0;  // generation of the last job this worker found with every chunk claimed
  const auto published = [&] {
    return stop_.load(std::memory_order_seq_cst) || generation_of(job_.load(std::memory_order_seq_cst)) != seen;
  };
  for (;;) {
    for (int spin = 0; spin < kSpins && !published(); ++spin) {
      if (!prefetch_hinted_piece()) pause();
    }
    if (!published()) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, published);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (stop_.load()) return;
    seen = generation_of(drain(job_.load(std::memory_order_acquire)));
  }
}

}  // namespace fp8kit
