// CUDA tensors: allocation through the caching allocator, host/device and device/device copies
// of strided views, memset, platform queries, and CUDA errors surfacing as fp8kit::Error.
#include <gtest/gtest.h>

#include <numeric>

#include "fp8kit/platform.h"
#include "fp8kit/tensor.h"

namespace fp8kit {
namespace {

Tensor arange_f32(int64_t n, const Shape& shape) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::from_vector(v, shape);
}

TEST(TensorCuda, RoundTripThroughTheDevice) {
  const Tensor host = arange_f32(24, {4, 6});
  const Tensor dev = host.to(Device::cuda(0));
  EXPECT_TRUE(dev.device().is_cuda());
  const Tensor back = dev.to(Device::cpu());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(back.data<float>()[i], float(i));
}

TEST(TensorCuda, StridedViewsCopyOnEverySide) {
  const Tensor host = arange_f32(24, {4, 6});
  const Tensor dev = host.to(Device::cuda(0));
  // Device view -> host: a transposed, narrowed view.
  const Tensor view = dev.t().narrow(1, 1, 2);  // [6, 2]
  const Tensor got = view.to(Device::cpu());
  const Tensor want = host.t().narrow(1, 1, 2).contiguous();
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_EQ(got.data<float>()[i], want.data<float>()[i]) << i;
  // Host view -> device view.
  Tensor target = Tensor::zeros({6, 4}, DType::kF32, Device::cuda(0));
  target.t().copy_(host);
  const Tensor round = target.to(Device::cpu());
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(round.data<float>()[r * 4 + c], float(c * 6 + r));
  }
}

TEST(TensorCuda, FillBytesAndAllocatorReuse) {
  // Blocks of this size that earlier tests left cached would come back first.
  cuda_empty_cache(0);
  const CudaMemoryStats before = cuda_memory_stats(0);
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({1 << 20}, DType::kU8, Device::cuda(0));
    first = t.data_ptr();
    t.fill_bytes_(0xab);
    const Tensor h = t.to(Device::cpu());
    EXPECT_EQ(h.data<uint8_t>()[12345], 0xab);
  }
  EXPECT_GE(cuda_memory_stats(0).cached, size_t(1) << 20);
  Tensor again = Tensor::empty({1 << 20}, DType::kU8, Device::cuda(0));
  EXPECT_EQ(again.data_ptr(), first);  // the freed block came back
  EXPECT_GE(cuda_memory_stats(0).peak_allocated, before.allocated + (size_t(1) << 20));
}

TEST(TensorCuda, PlatformQueries) {
  ASSERT_TRUE(cuda_built());
  ASSERT_GT(cuda_device_count(), 0);
  const DeviceCapability cap = get_device_capability(0);
  EXPECT_GE(cap.as_int(), 70);
  EXPECT_TRUE(has_device_capability(cap.as_int()));
  EXPECT_TRUE(is_device_capability(cap.as_int()));
  EXPECT_FALSE(has_device_capability(cap.as_int() + 1));
  EXPECT_GT(get_cu_count(0), 0);
  EXPECT_FALSE(get_device_name(0).empty());
  EXPECT_EQ(fp8_dtype(), DType::kE4M3FN);
  EXPECT_THROW(get_device_capability(cuda_device_count()), Error);
}

// Expects a failing CUDA call: excluded from the sanitizer runs (they count API errors).
TEST(TensorCuda, HugeAllocationExpectsCudaError) {
  try {
    Tensor::empty({int64_t(1) << 50}, DType::kU8, Device::cuda(0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCuda);
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fp8kit
