#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fp8kit {
namespace {

thread_local bool t_inside_parallel = false;

int configured_threads() {
  if (const char* env = std::getenv("FP8KIT_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Workers wait for a job; a job is a chunk counter that every participant drains.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t chunks, const std::function<void(int64_t)>& body) {
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

 private:
  void drain() {
    t_inside_parallel = true;
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
    t_inside_parallel = false;
  }

  void work() {
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

  std::vector<std::thread> workers_;
  std::mutex run_mutex_, mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* body_ = nullptr;
  std::atomic<int64_t> chunks_{0};
  std::atomic<int64_t> next_{0};
  int64_t pending_ = 0;
  int active_ = 0;  // workers inside drain()
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool p(configured_threads());
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = num_threads();
  if (t_inside_parallel || threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balance uneven work without much overhead.
  const int64_t max_chunks = static_cast<int64_t>(threads) * 4;
  const int64_t chunk = std::max(grain, (n + max_chunks - 1) / max_chunks);
  const int64_t chunks = (n + chunk - 1) / chunk;
  pool().run(chunks, [&](int64_t i) {
    const int64_t begin = i * chunk;
    fn(begin, std::min(n, begin + chunk));
  });
}

void parallel_for_at_most(int max_threads, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  const int pool_threads = num_threads();
  if (max_threads <= 0 || max_threads >= pool_threads) return parallel_for(n, grain, fn);
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (t_inside_parallel || max_threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  const int64_t chunk = std::max(grain, (n + max_threads - 1) / max_threads);
  const int64_t chunks = (n + chunk - 1) / chunk;
  pool().run(chunks, [&](int64_t i) {
    const int64_t begin = i * chunk;
    fn(begin, std::min(n, begin + chunk));
  });
}

}  // namespace fp8kit
