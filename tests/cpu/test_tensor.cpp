// Tensor: shapes, strides, views, copies, errors.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <vector>

#include "fp8kit/device.h"
#include "fp8kit/platform.h"
#include "fp8kit/tensor.h"

namespace fp8kit {
namespace {

TEST(Tensor, EmptyHasContiguousStrides) {
  Tensor t = Tensor::empty({2, 3, 4}, DType::kBF16);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.description(), "bf16[2, 3, 4] on cpu");
}

TEST(Tensor, NarrowSelectTransposeShareStorage) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = float(i);
  Tensor t = Tensor::from_vector(v, {3, 4});
  Tensor n = t.narrow(1, 1, 2);
  EXPECT_EQ(n.shape(), (Shape{3, 2}));
  EXPECT_FALSE(n.is_contiguous());
  Tensor c = n.contiguous();
  const float* cp = c.data<float>();
  EXPECT_EQ(cp[0], 1.0f);
  EXPECT_EQ(cp[1], 2.0f);
  EXPECT_EQ(cp[2], 5.0f);
  EXPECT_EQ(cp[5], 10.0f);
  Tensor row = t.select(0, 2);
  EXPECT_EQ(row.data<float>()[3], 11.0f);
  Tensor tt = t.t().contiguous();
  EXPECT_EQ(tt.shape(), (Shape{4, 3}));
  EXPECT_EQ(tt.data<float>()[1], 4.0f);  // tt[0][1] = t[1][0]
  n.data<float>()[0] = 100.0f;           // writes through the view
  EXPECT_EQ(t.data<float>()[1], 100.0f);
}

TEST(Tensor, ViewInfersAndChecks) {
  Tensor t = Tensor::zeros({4, 6}, DType::kF32);
  EXPECT_EQ(t.view({-1, 3}).shape(), (Shape{8, 3}));
  EXPECT_THROW(t.view({5, 5}), Error);
  EXPECT_THROW(t.t().view({24}), Error);
}

TEST(Tensor, TypedAccessChecksDType) {
  Tensor t = Tensor::zeros({2}, DType::kBF16);
  EXPECT_NO_THROW(t.data<BFloat16>());
  try {
    t.data<float>();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "expected a f32 tensor, got bf16[2] on cpu");
  }
}

TEST(Tensor, OutOfRangeNarrowIsAnError) {
  Tensor t = Tensor::zeros({4, 6}, DType::kF32);
  EXPECT_THROW(t.narrow(0, 3, 2), Error);
  EXPECT_THROW(t.select(2, 0), Error);
}

TEST(Tensor, EmptyTensorsAreContiguous) {
  EXPECT_TRUE(Tensor::empty({3, 0}, DType::kF32).is_contiguous());
  EXPECT_TRUE(Tensor::empty({0, 5}, DType::kF32).t().is_contiguous());
  EXPECT_EQ(Tensor::empty({3, 0}, DType::kF32).clone().numel(), 0);
}

TEST(Tensor, LargeBuffersAreUsableAndFreed) {
  // Above the allocator's mapping threshold: written, read, freed (munmap) without error.
  for (int i = 0; i < 3; ++i) {
    Tensor t = Tensor::zeros({4 << 20}, DType::kU8);
    t.data<uint8_t>()[(4 << 20) - 1] = 7;
    EXPECT_EQ(t.data<uint8_t>()[0], 0);
    EXPECT_EQ(t.clone().data<uint8_t>()[(4 << 20) - 1], 7);
  }
}

// Whether [p, p + n) is still mapped (msync fails with ENOMEM on an unmapped range).
bool mapped(void* p, size_t n) { return ::msync(p, n, MS_ASYNC) == 0; }

TEST(AllocatorCpu, AFreedLargeBufferServesTheNextOfItsSize) {
  // The CPU allocator keeps a few freed mappings for the next allocation of the same size (a
  // forward pass frees and allocates activations of the same sizes every layer). A size no
  // other test uses, so that no mapping kept before this test matches it.
  Allocator* cpu = get_allocator(Device::cpu());
  const size_t n = (size_t(4) << 20) + 3 * 4096 + 64;
  void* first = cpu->allocate(n);
  static_cast<uint8_t*>(first)[n - 1] = 1;
  cpu->deallocate(first, n);
  void* again = cpu->allocate(n);
  EXPECT_EQ(again, first);
  static_cast<uint8_t*>(again)[0] = 2;
  cpu->deallocate(again, n);
}

TEST(AllocatorCpu, WhatItKeepsIsBounded) {
  // At most 64 MiB of freed mappings, none above 16 MiB: of six freed buffers of 15 MiB at most
  // four stay mapped, and a freed buffer of 32 MiB is unmapped at once.
  Allocator* cpu = get_allocator(Device::cpu());
  const size_t n = (size_t(15) << 20) + 5 * 4096;
  std::vector<void*> buffers;
  for (int i = 0; i < 6; ++i) {
    buffers.push_back(cpu->allocate(n));
    static_cast<uint8_t*>(buffers.back())[0] = 1;
  }
  for (void* p : buffers) cpu->deallocate(p, n);
  int still_mapped = 0;
  for (void* p : buffers) still_mapped += mapped(p, n) ? 1 : 0;
  EXPECT_LE(still_mapped, 4);
  const size_t big = size_t(32) << 20;
  void* b = cpu->allocate(big);
  static_cast<uint8_t*>(b)[big - 1] = 1;
  cpu->deallocate(b, big);
  EXPECT_FALSE(mapped(b, big));
}

TEST(Tensor, CudaWithoutADeviceIsAnError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  try {
    Tensor::empty({2}, DType::kF32, Device::cuda(0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    // A CPU-only build has no CUDA backend; a CUDA build on a machine without a GPU reports the
    // driver's error.
    EXPECT_EQ(e.code(), cuda_built() ? ErrorCode::kCuda : ErrorCode::kUnsupported) << e.what();
  }
}

TEST(Tensor, ScalarAndFromVector) {
  Tensor s = Tensor::scalar_f32(2.5f);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item_f32(), 2.5f);
  Tensor v = Tensor::from_vector(std::vector<float>{1.0f});
  EXPECT_EQ(v.shape(), (Shape{1}));
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), Error);
}

}  // namespace
}  // namespace fp8kit
