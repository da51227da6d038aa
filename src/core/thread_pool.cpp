// ThreadPool (see thread_pool.h). Tested in tests/cpu/test_parallel.cpp.
#include "core/thread_pool.h"

#include <algorithm>

namespace fp8kit {
namespace {

thread_local bool t_inside_job = false;

// Spins of the wait loops before they sleep: 4096 pause instructions, some tens of microseconds.
constexpr int kSpins = 4096;

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

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
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

bool ThreadPool::inside_job() { return t_inside_job; }

void ThreadPool::run(int64_t chunks, const std::function<void(int64_t)>& body) {
  std::lock_guard<std::mutex> serial(run_mutex_);  // one job at a time
  body_ = &body;
  chunks_.store(chunks, std::memory_order_relaxed);
  next_.store(0, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  {
    // Under the mutex, so that a worker checking whether to sleep sees it or is woken.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain();
  const int workers = static_cast<int>(workers_.size());
  const auto all_done = [&] { return finished_.load(std::memory_order_acquire) == workers; };
  for (int spin = 0; spin < kSpins && !all_done(); ++spin) pause();
  if (!all_done()) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, all_done);
  }
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
  }
  t_inside_job = false;
}

void ThreadPool::work() {
  uint64_t seen = 0;
  for (;;) {
    const auto published = [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; };
    for (int spin = 0; spin < kSpins && !published(); ++spin) pause();
    if (!published()) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, published);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    drain();
    // (workers_ is complete: run() starts jobs only after the constructor returned)
    if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<int>(workers_.size())) {
      std::lock_guard<std::mutex> lock(mutex_);  // run() checks under it before it sleeps
      done_.notify_all();
    }
  }
}

}  // namespace fp8kit
