// ForwardContext: device, overrides and workspace as given; thread count bounded by the pool.
#include <gtest/gtest.h>

#include "core/parallel.h"
#include "fp8kit/runtime/forward_context.h"

namespace fp8kit {
namespace {

TEST(ForwardContext, HoldsWhatItWasGiven) {
  Overrides o;
  o.gemm_backend = GemmBackendOverride::kFallback;
  ForwardContext ctx(Device::cpu(), o);
  EXPECT_TRUE(ctx.device().is_cpu());
  EXPECT_EQ(ctx.stream().handle, nullptr);
  EXPECT_EQ(ctx.overrides().gemm_backend, GemmBackendOverride::kFallback);
  EXPECT_TRUE(ctx.workspace().device().is_cpu());
  ctx.workspace().take({4}, DType::kF32);
  EXPECT_EQ(ctx.workspace().stats().in_use, 256u);
}

TEST(ForwardContext, ThreadCountIsTheOverrideBoundedByThePool) {
  ForwardContext all;
  EXPECT_GE(all.num_threads(), 1);
  Overrides one;
  one.num_threads = 1;
  EXPECT_EQ(ForwardContext(Device::cpu(), one).num_threads(), 1);
  Overrides many;
  many.num_threads = max_threads();
  EXPECT_EQ(ForwardContext(Device::cpu(), many).num_threads(), all.num_threads());
}

TEST(ForwardContext, MovesKeepTheWorkspace) {
  ForwardContext a;
  Workspace* ws = &a.workspace();
  ForwardContext b = std::move(a);
  EXPECT_EQ(&b.workspace(), ws);
}

}  // namespace
}  // namespace fp8kit
