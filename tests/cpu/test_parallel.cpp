// parallel_for (src/core/parallel.h): every index runs exactly once across many back-to-back jobs
// of different chunk counts (a worker still finishing one job must not take part in the next
// before it is set up), exceptions reach the caller, nested calls run serially. The race the
// first test guards against needs more threads than CI's two cores give: with
// FP8KIT_NUM_THREADS=4 or 16 the pool before the fix hung in two of three runs of 500,000 jobs.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/parallel.h"

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

}  // namespace
}  // namespace fp8kit
