// ThreadPool: worker threads that drain the chunks of one job at a time with the calling thread
// (parallel.h's parallel_for runs on the process-wide one). A decode step of a small model is
// about a hundred jobs of tens of microseconds, so a job's hand-off is one atomic word: run()
// publishes it, every thread claims chunks from it by compare-and-swap, and run() returns when
// the chunks are done, without waiting for workers that did not take part (on a loaded machine
// a worker may not run for milliseconds). Between jobs a worker spins for a short while before it
// sleeps, and so does run() waiting for a chunk another thread holds; the mutex and the
// notifications are used only when a thread sleeps. A worker that cannot be started leaves the
// pool smaller, never hung: it runs with the threads it got. Not a public header.
// Tested in tests/cpu/test_parallel.cpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/function_ref.h"

namespace fp8kit {

class ThreadPool {
 public:
  // Starts threads - 1 workers (the caller of run() is the last thread). When the system refuses
  // a thread, the pool keeps the ones it has and start_failure() says why. With `pin`, and when
  // the process may run on at least `threads` CPUs, worker w runs on CPU pinning_order()[w + 1]
  // alone (cpu_affinity.h): a worker that the OS moves mid-job leaves its share of a decode step's
  // GEMV to end late, and the others wait. The calling thread is the user's and stays unpinned;
  // the OS keeps it on the CPU the workers leave free. With more threads than CPUs nothing is
  // pinned (threads that share a CPU must be free to move).
  explicit ThreadPool(int threads, bool pin = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  const std::string& start_failure() const { return start_failure_; }  // empty when all started
  int pinned_workers() const { return pinned_; }  // workers the OS restricted to one CPU each

  // Calls body(i) for every i in [0, chunks) on the workers and the calling thread; returns when
  // all are done and rethrows the first exception. One job at a time; each thread takes its
  // chunks in increasing order.
  void run(int64_t chunks, FunctionRef<void(int64_t)> body);

  // Jobs published to the workers since the pool started (run() calls of more than one chunk on
  // a pool with workers): what a decode step costs in hand-offs.
  uint64_t jobs() const { return jobs_.load(std::memory_order_relaxed); }

  // Whether the calling thread is inside a job's chunk (nested parallel_for calls run serially).
  static bool inside_job();

  // Asks the workers, while they wait for a job, to prefetch [p, p + bytes) into L2, a piece of
  // kHintPiece bytes between two looks at the job word (a job waits for at most one piece). A
  // decode step of a small model leaves the workers idle for a quarter of it while the calling
  // thread runs the serial ops (attention, norms), and DRAM idle with them: a hint of the next
  // layer's weights brings some of them in meanwhile. Prefetch instructions only, so a range
  // freed or unmapped meanwhile costs nothing; a later hint replaces this one; a sleeping worker
  // does not wake for it. Best effort: what it asks for may or may not be done.
  void hint(const void* p, size_t bytes);
  static constexpr size_t kHintPiece = 4096;
  // Whether pieces of the last hint are still to be prefetched.
  bool hint_pending() const {
    return hint_next_.load(std::memory_order_acquire) < hint_end_.load(std::memory_order_relaxed);
  }

 private:
  void run_job(int64_t first, int64_t chunks, const FunctionRef<void(int64_t)>& body);
  uint64_t drain(uint64_t job);
  void run_chunk(int64_t i);
  void work();

  std::vector<std::thread> workers_;
  std::string start_failure_;
  int pinned_ = 0;
  std::mutex run_mutex_;  // one job at a time

  // The job word: generation (bits 40-63), chunks (bits 20-39) and the next chunk to claim (bits
  // 0-19). A thread claims chunk `next` by a compare-and-swap that adds one, so a worker that
  // wakes after its job ended (or during a later one) claims only from the job published now and
  // never runs a chunk of one whose run() returned.
  alignas(64) std::atomic<uint64_t> job_{0};
  alignas(64) std::atomic<int64_t> unfinished_{0};  // chunks of the current job not yet done
  // Written by run() before the job word is published; read by a thread only after it claimed a
  // chunk of that job, whose run() cannot return before the chunk is done.
  const FunctionRef<void(int64_t)>* body_ = nullptr;
  int64_t first_ = 0;  // index of chunk 0 of the job (run() splits more chunks than a word holds)
  std::exception_ptr error_;

  // Sleeping: a worker counts itself in sleepers_ and a waiting run() sets caller_sleeps_ before
  // they wait under mutex_, so that run() and the last chunk notify only when someone sleeps.
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeps_{false};
  std::atomic<bool> stop_{false};
  uint64_t generation_ = 0;  // of the last job published (run() only)
  std::atomic<uint64_t> jobs_{0};

  // The hint: the next piece to prefetch and the end. hint() closes the old range, stores the
  // end, then the start.
  alignas(64) std::atomic<uintptr_t> hint_next_{0};
  std::atomic<uintptr_t> hint_end_{0};
  bool prefetch_hinted_piece();  // false when the hint is done
};

}  // namespace fp8kit
