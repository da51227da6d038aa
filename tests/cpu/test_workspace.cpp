// Workspace: alignment, scopes giving memory back in order, growth and its merge on reset, no
// allocation once warmed up, a frozen workspace refusing to grow.
#include <gtest/gtest.h>

#include <cstdint>

#include "expect_error.h"
#include "fp8kit/runtime/workspace.h"

namespace fp8kit {
namespace {

uintptr_t address(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }

TEST(Workspace, TakesAlignedContiguousTensors) {
  Workspace ws;
  Tensor a = ws.take({3}, DType::kBF16);
  Tensor b = ws.take({5, 7}, DType::kF32);
  EXPECT_EQ(a.shape(), (Shape{3}));
  EXPECT_EQ(b.shape(), (Shape{5, 7}));
  EXPECT_TRUE(b.is_contiguous());
  EXPECT_EQ(address(a) % 256, 0u);
  EXPECT_EQ(address(b) % 256, 0u);
  EXPECT_GE(address(b), address(a) + 256);  // no overlap
  b.data<float>()[34] = 1.5f;               // the whole tensor is writable
  EXPECT_EQ(ws.stats().in_use, 512u);
}

TEST(Workspace, ScopeGivesBackInOrder) {
  Workspace ws;
  Tensor outer = ws.take({16}, DType::kF32);
  uintptr_t inner_address = 0;
  {
    Workspace::Scope scope(ws);
    inner_address = address(ws.take({1000}, DType::kF32));
    {
      Workspace::Scope nested(ws);
      ws.take({10}, DType::kU8);
    }
    EXPECT_EQ(ws.stats().in_use, 256u + 4096u);
  }
  EXPECT_EQ(ws.stats().in_use, 256u);
  // The memory given back is taken again at the same address.
  EXPECT_EQ(address(ws.take({1000}, DType::kF32)), inner_address);
  EXPECT_NE(address(outer), inner_address);
}

TEST(Workspace, GrowsThenMergesIntoOneBufferAndStopsAllocating) {
  Workspace ws;
  auto forward = [&] {
    Workspace::Scope scope(ws);
    ws.take({1 << 18}, DType::kF32);  // 1 MiB: fills the first buffer
    ws.take({1 << 19}, DType::kF32);  // 2 MiB more: a second buffer, just as large
    ws.take({100}, DType::kF32);      // a third
  };
  forward();
  EXPECT_EQ(ws.stats().allocations, 3);
  const size_t high_water = ws.stats().high_water;
  EXPECT_GE(high_water, (size_t(3) << 20) + 512);
  ws.reset();
  EXPECT_EQ(ws.stats().allocations, 4);  // the merged buffer
  EXPECT_GE(ws.stats().capacity, high_water);
  for (int i = 0; i < 5; ++i) {
    forward();
    ws.reset();
  }
  EXPECT_EQ(ws.stats().allocations, 4);  // nothing on the hot path
  EXPECT_EQ(ws.stats().in_use, 0u);
}

TEST(Workspace, FrozenWorkspaceRefusesToGrowButServesWhatFits) {
  Workspace ws;
  ws.take({1024}, DType::kF32);
  ws.reset();
  ws.freeze(true);
  EXPECT_NO_THROW(ws.take({1024}, DType::kF32));
  testing::expect_error_containing([&] { ws.take({1 << 22}, DType::kF32); }, ErrorCode::kInvalidArgument,
                                   "the workspace is frozen");
  ws.freeze(false);
  EXPECT_NO_THROW(ws.take({1 << 22}, DType::kF32));
}

TEST(Workspace, EmptyAndBadShapes) {
  Workspace ws;
  EXPECT_EQ(ws.take({0, 4}, DType::kF32).numel(), 0);
  testing::expect_error_containing([&] { ws.take({-1}, DType::kF32); }, ErrorCode::kInvalidArgument,
                                   "negative dimension");
  testing::expect_error_containing([&] { ws.take({int64_t(1) << 40, int64_t(1) << 20}, DType::kF32); },
                                   ErrorCode::kInvalidArgument, "too many");
}

TEST(Workspace, TensorsKeptPastAScopeStayValidMemory) {
  Workspace ws;
  Tensor kept;
  {
    Workspace::Scope scope(ws);
    kept = ws.take({4}, DType::kF32);
  }
  ws.take({1 << 22}, DType::kF32);  // forces a new buffer
  ws.reset();                       // merges: the old buffer is dropped by the workspace
  kept.data<float>()[3] = 2.0f;     // still owned by the tensor: no use after free (ASan checks)
  EXPECT_EQ(kept.data<float>()[3], 2.0f);
}

}  // namespace
}  // namespace fp8kit
