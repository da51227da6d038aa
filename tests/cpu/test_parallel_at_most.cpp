// parallel_for_at_most (src/core/parallel.h): every index exactly once, never more threads busy
// at once than asked, the whole pool for a limit of 0 or above its size, nested calls serial.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/parallel.h"

namespace fp8kit {
namespace {

TEST(ParallelForAtMost, EveryIndexOnceWithinTheThreadLimit) {
  for (int limit : {0, 1, 2, 3, 64}) {
    for (int64_t n : {1, 2, 7, 100, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> busy{0}, most{0};
      parallel_for_at_most(limit, n, 1, [&](int64_t begin, int64_t end) {
        const int now = ++busy;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        for (int64_t i = begin; i < end; ++i) hits[size_t(i)].fetch_add(1);
        --busy;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "limit " << limit << " n " << n << " i " << i;
      const int allowed = limit <= 0 ? num_threads() : std::min(limit, num_threads());
      EXPECT_LE(most.load(), allowed) << "limit " << limit << " n " << n;
    }
  }
}

TEST(ParallelForAtMost, NestedCallsRunSerially) {
  std::atomic<int64_t> total{0};
  parallel_for_at_most(2, 4, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      parallel_for_at_most(2, 10, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
    }
  });
  EXPECT_EQ(total.load(), 40);
}

}  // namespace
}  // namespace fp8kit
