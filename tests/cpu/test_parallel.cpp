// parallel_for (src/core/parallel.h): every index runs exactly once across many back-to-back jobs
// of different chunk counts (a worker still finishing one job must not take part in the next
// before it is set up), exceptions reach the caller, nested calls run serially. The race the
// first test guards against needs more threads than CI's two cores give: with
// FP8KIT_NUM_THREADS=4 or 16 the pool before the fix hung in two of three runs of 500,000 jobs.
// A pool the system gives fewer threads than asked for runs with those (it used to deadlock), and
// FP8KIT_NUM_THREADS takes only integers from 1 to max_threads().
#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/cpu_affinity.h"
#include "core/parallel.h"
#include "core/thread_pool.h"
#include "expect_error.h"

namespace fp8kit {
namespace {

TEST(ParallelFor, EveryIndexExactlyOnceAcrossBackToBackJobs) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> size(1, 300);
  std::vector<std::atomic<int>> hits(300);
  for (int job = 0; job < 200000; ++job) {
    const int64_t n = size(rng);
    for (int64_t i = 0; i < n; ++i) hits[size_t(i)].store(0, std::memory_order_relaxed);
    parallel_for(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[size_t(i)].load(), 1) << "job " << job << " n " << n << " index " << i;
    }
  }
}

TEST(ParallelFor, RethrowsTheFirstException) {
  EXPECT_THROW(parallel_for(1000, 1,
                            [](int64_t begin, int64_t) {
                              if (begin == 0) throw std::runtime_error("chunk 0");
                            }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  parallel_for(1000, 1, [&](int64_t begin, int64_t end) { sum += end - begin; });
  EXPECT_EQ(sum.load(), 1000);
}

TEST(ParallelFor, NestedCallsRunOnTheCallingThread) {
  std::atomic<int64_t> inner{0};
  parallel_for(64, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      parallel_for(10, 1, [&](int64_t b, int64_t e) { inner += e - b; });
    }
  });
  EXPECT_EQ(inner.load(), 640);
}

// Threads whose default stack cannot be mapped: pthread_create fails with EAGAIN, as under a
// process limit (ulimit -u), but without one that root ignores.
class UnstartableThreads {
 public:
  UnstartableThreads() {
    pthread_getattr_default_np(&saved_);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, size_t(1) << 50);
    pthread_setattr_default_np(&attr);
    pthread_attr_destroy(&attr);
  }
  ~UnstartableThreads() { pthread_setattr_default_np(&saved_); }

 private:
  pthread_attr_t saved_;
};

TEST(ThreadPool, RunsWithTheThreadsItGot) {
  std::unique_ptr<ThreadPool> pool;
  {
    UnstartableThreads no_threads;
    pool = std::make_unique<ThreadPool>(8);
  }
  EXPECT_EQ(pool->size(), 1);
  EXPECT_FALSE(pool->start_failure().empty());
  std::vector<std::atomic<int>> hits(1000);
  pool->run(1000, [&](int64_t i) { hits[size_t(i)]++; });
  for (const auto& h : hits) ASSERT_EQ(h.load(), 1);

  ThreadPool full(4);  // the default stack again
  EXPECT_EQ(full.size(), 4);
  EXPECT_TRUE(full.start_failure().empty());
}

TEST(FunctionRef, CallsTheCallableItRefersToWithoutCopyingIt) {
  struct Counter {
    int calls = 0;
    Counter() = default;
    Counter(const Counter&) = delete;
    int operator()(int x) { return x + ++calls; }
  } counter;
  const FunctionRef<int(int)> f = counter;
  EXPECT_EQ(f(10), 11);
  EXPECT_EQ(f(10), 12);
  EXPECT_EQ(counter.calls, 2);
  int captured = 0;
  const auto lambda = [&](int x) { return captured += x; };
  const FunctionRef<int(int)> g = lambda;
  g(3);
  EXPECT_EQ(g(4), 7);
}

// The schedule covers [0, n) in order with disjoint chunks, every one but the last at least a
// grain; on 2 threads a decode GEMV's 18 units are 2 large and 6 small chunks that split 9 + 9.
TEST(ParallelFor, ChunkScheduleCoversTheRangeWithLargeChunksFirst) {
  for (int threads : {1, 2, 3, 8}) {
    for (int64_t n : {1, 2, 7, 18, 30, 96, 1000, 1536}) {
      for (int64_t grain : {1, 3, 64}) {
        const ChunkSchedule s = chunk_schedule(n, grain, threads);
        int64_t next = 0;
        for (int64_t i = 0; i < s.chunks(); ++i) {
          const auto [b, e] = s.range(i);
          ASSERT_EQ(b, next) << n << " " << grain << " " << threads << " chunk " << i;
          ASSERT_TRUE(e > b && (e - b >= grain || e == n)) << n << " " << grain << " " << threads << " chunk " << i;
          next = e;
        }
        EXPECT_EQ(next, n);
      }
    }
  }
  const ChunkSchedule s = chunk_schedule(18, 1, 2);
  ASSERT_EQ(s.chunks(), 8);
  EXPECT_EQ(s.range(0), std::make_pair(int64_t(0), int64_t(6)));
  EXPECT_EQ(s.range(1), std::make_pair(int64_t(6), int64_t(12)));
  EXPECT_EQ(s.range(7), std::make_pair(int64_t(17), int64_t(18)));
  EXPECT_EQ(chunk_schedule(1536, 1, 2).chunks(), 6);
}

// More chunks than one job word holds (2^20 - 1) are several jobs, each index still once.
TEST(ThreadPool, RunsMoreChunksThanAJobWordHolds) {
  ThreadPool pool(3);
  const int64_t chunks = (int64_t(1) << 20) + 5;
  std::vector<uint8_t> hits(size_t(chunks), 0);
  pool.run(chunks, [&](int64_t i) { hits[size_t(i)]++; });
  int64_t once = 0;
  for (uint8_t h : hits) once += h == 1;
  EXPECT_EQ(once, chunks);
  EXPECT_EQ(pool.jobs(), 2u);
}

// Only jobs of more than one chunk on a pool with workers are handed off (and counted); each
// thread takes its chunks in increasing order, and every worker helps sooner or later.
TEST(ThreadPool, IdleWorkersPrefetchAHintEvenOfMemoryNoLongerMapped) {
  // The hint is taken by the workers between jobs, a piece at a time; prefetches never fault,
  // so a range unmapped before (or while) they reach it is harmless, and jobs run as before.
  ThreadPool pool(2);
  const size_t bytes = size_t(1) << 20;
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  std::vector<uint8_t> live(bytes, 1);
  for (void* range : {static_cast<void*>(live.data()), map}) {
    if (range == map) ASSERT_EQ(::munmap(map, bytes), 0);
    pool.hint(range, bytes);
    EXPECT_TRUE(pool.hint_pending());
    std::atomic<int64_t> sum{0};
    pool.run(4, [&](int64_t i) { sum += i; });  // wakes a sleeping worker, which then spins
    EXPECT_EQ(sum.load(), 6);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (pool.hint_pending() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    EXPECT_FALSE(pool.hint_pending()) << (range == map ? "unmapped" : "mapped") << " range";
  }
  std::atomic<int64_t> sum{0};
  pool.run(100, [&](int64_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPool, CountsHandOffsAndTakesChunksInOrder) {
  ThreadPool pool(4);
  pool.run(1, [](int64_t) {});
  EXPECT_EQ(pool.jobs(), 0u);
  for (int job = 0; job < 2000; ++job) {
    thread_local int seen_job = -1;  // the job and chunk this thread ran last
    thread_local int64_t last = -1;
    std::atomic<bool> in_order{true};
    pool.run(64, [&](int64_t i) {
      if (seen_job == job && i <= last) in_order = false;
      seen_job = job;
      last = i;
    });
    ASSERT_TRUE(in_order.load()) << "job " << job;
  }
  EXPECT_EQ(pool.jobs(), 2000u);
  // The workers take part: the first chunk a thread runs waits until a second thread has entered
  // one, so this job ends only if a worker runs a chunk (on a loaded machine the caller may well
  // run all 64 chunks of a job alone before any worker is scheduled).
  std::mutex m;
  std::set<std::thread::id> helpers;
  std::atomic<int> entered{0};
  pool.run(2, [&](int64_t) {
    ++entered;
    while (entered.load() < 2) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(m);
    helpers.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(helpers.size(), 2u);
  ThreadPool alone(1);
  alone.run(100, [](int64_t) {});
  EXPECT_EQ(alone.jobs(), 0u);
}

// The pinning order lists each CPU of the process's mask once.
TEST(ThreadPool, PinningOrderListsEveryCpuOfTheMaskOnce) {
  std::vector<int> order = pinning_order();
  const std::vector<int> mask = current_thread_cpus();
  ASSERT_FALSE(mask.empty()) << "the test thread's affinity mask could not be read";
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, mask);
}

// The CPUs the chunks of `pool` ran on, per thread other than the caller, once a worker took one.
std::vector<std::vector<int>> worker_cpus(ThreadPool& pool) {
  std::mutex m;
  std::vector<std::vector<int>> seen;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> entered{0};
  pool.run(2, [&](int64_t) {  // as in CountsHandOffsAndTakesChunksInOrder: a worker must take one
    ++entered;
    while (entered.load() < 2) std::this_thread::yield();
    if (std::this_thread::get_id() == caller) return;
    std::lock_guard<std::mutex> lock(m);
    seen.push_back(current_thread_cpus());
  });
  return seen;
}

TEST(ThreadPool, PinsEachWorkerToACpuOfItsOwnWhenTheMaskHasOneForEveryThread) {
  const std::vector<int> order = pinning_order();
  if (order.size() < 2) GTEST_SKIP() << "the process may run on " << order.size() << " CPU(s); pinning needs 2";
  ThreadPool pinned(2, true);
  EXPECT_EQ(pinned.pinned_workers(), 1);
  EXPECT_EQ(worker_cpus(pinned), (std::vector<std::vector<int>>{{order[1]}}));
  const std::vector<int> caller = current_thread_cpus();
  EXPECT_GE(caller.size(), 2u) << "the calling thread stays unpinned";

  ThreadPool unpinned(2, false);
  EXPECT_EQ(unpinned.pinned_workers(), 0);
  EXPECT_EQ(worker_cpus(unpinned), std::vector<std::vector<int>>{current_thread_cpus()});
}

TEST(ThreadPool, PinsNothingWithMoreThreadsThanCpus) {
  const std::vector<int> order = pinning_order();
  ASSERT_FALSE(order.empty());
  ThreadPool pool(int(order.size()) + 1, true);
  EXPECT_EQ(pool.pinned_workers(), 0);
  for (const std::vector<int>& cpus : worker_cpus(pool)) EXPECT_EQ(cpus, current_thread_cpus());
}

TEST(ParallelFor, ThreadCountsOutsideTheRangeAreErrors) {
  const int most = max_threads();
  EXPECT_GE(most, 64);
  EXPECT_LE(most, 1024);
  EXPECT_EQ(parse_thread_count("1", "FP8KIT_NUM_THREADS"), 1);
  EXPECT_EQ(parse_thread_count(std::to_string(most), "FP8KIT_NUM_THREADS"), most);
  for (const std::string& bad : std::vector<std::string>{"0", "-1", "abc", "", "2147483648", "1e6", "99999999999",
                                                          " 4", "4 ", "+4", "0x10", std::to_string(most + 1)}) {
    testing::expect_invalid([&] { parse_thread_count(bad, "FP8KIT_NUM_THREADS"); },
                            "FP8KIT_NUM_THREADS must be an integer from 1 to " + std::to_string(most) + ", got '" +
                                bad + "'");
  }
  testing::expect_invalid([] { parse_thread_count("1\n2", "X"); },
                          "X must be an integer from 1 to " + std::to_string(max_threads()) + ", got '1\\x0a2'");
}

}  // namespace
}  // namespace fp8kit
