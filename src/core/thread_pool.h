// ThreadPool: worker threads that drain the chunks of one job at a time with the calling thread
// (parallel.h's parallel_for runs on the process-wide one). Between jobs a worker spins for a
// short while before it sleeps, and so does run() waiting for the workers: a decode step of a
// small model is hundreds of jobs of tens of microseconds, and a futex wake-up per job cost
// about as much as the job. A worker that cannot be started
// leaves the pool smaller, never hung: it runs with the threads it got. Not a public header.
// Tested in tests/cpu/test_parallel.cpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fp8kit {

class ThreadPool {
 public:
  // Starts threads - 1 workers (the caller of run() is the last thread). When the system refuses
  // a thread, the pool keeps the ones it has and start_failure() says why.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  const std::string& start_failure() const { return start_failure_; }  // empty when all started

  // Calls body(i) for every i in [0, chunks) on the workers and the calling thread; returns when
  // all are done and rethrows the first exception. One job at a time.
  void run(int64_t chunks, const std::function<void(int64_t)>& body);

  // Whether the calling thread is inside a job's chunk (nested parallel_for calls run serially).
  static bool inside_job();

 private:
  void drain();
  void work();

  std::vector<std::thread> workers_;
  std::string start_failure_;
  std::mutex run_mutex_, mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* body_ = nullptr;
  std::atomic<int64_t> chunks_{0};
  std::atomic<int64_t> next_{0};
  // A job is published by a new generation; each worker drains it once and counts itself in
  // finished_, and run() returns only when every worker has, so none is still in drain() when the
  // next job resets the counters.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> finished_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
};

}  // namespace fp8kit
