// ThreadPool (see thread_pool.h). Tested in tests/cpu/test_parallel.cpp.
#include "core/thread_pool.h"

#include <algorithm>

namespace fp8kit {
namespace {

thread_local bool t_inside_job = false;

}  // namespace

ThreadPool::ThreadPool(int threads) {
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
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

bool ThreadPool::inside_job() { return t_inside_job; }

void ThreadPool::run(int64_t chunks, const std::function<void(int64_t)>& body) {
  std::lock_guard<std::mutex> serial(run_mutex_);  // one job at a time
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    chunks_.store(chunks);
    next_.store(0);
    pending_ = chunks;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  drain();
  std::unique_lock<std::mutex> lock(mutex_);
  // Every chunk done and every worker out of drain(): a worker still inside it could otherwise
  // claim an index of the next job before that job's counters are all set, and count a chunk
  // twice (the job would end with a chunk never run).
  done_.wait(lock, [this] { return pending_ == 0 && active_ == 0; });
  body_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::drain() {
  t_inside_job = true;
  for (;;) {
    const int64_t i = next_.fetch_add(1);
    if (i >= chunks_.load()) break;
    try {
      (*body_)(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) done_.notify_all();
  }
  t_inside_job = false;
}

void ThreadPool::work() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || (generation_ != seen && body_ != nullptr); });
      if (stop_) return;
      seen = generation_;
      ++active_;  // joins the job while it runs (body_ is set until run() has seen active_ == 0)
    }
    drain();
    std::lock_guard<std::mutex> lock(mutex_);
    if (--active_ == 0) done_.notify_all();
  }
}

}  // namespace fp8kit
