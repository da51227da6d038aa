// Helpers of the GPU tests of the quantization kernels (test_quant_*_cuda.cpp): the run's seed
// (FP8KIT_TEST_SEED to repeat a run), random host tensors of every float dtype, device copies
// that keep a view's strides, poisoned outputs, and bit-exact comparisons whose failure names
// the case (op, shape, dtypes, seed), the number of mismatches and the first one.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/test_quant_util.h"
#include "fp8kit/platform.h"
#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::gpu_test {

using quant_test::to_bytes;
using quant_test::to_floats;

inline constexpr uint8_t kPoisonCodes = 0xA5;
inline constexpr uint8_t kPoisonScales = 0x7F;  // 0x7F7F7F7F: 3.4e38, a plausible-looking wrong scale

// The run's base seed, printed once; every case takes its own seed from it.
inline uint32_t base_seed() {
  static const uint32_t seed = [] {
    const char* env = std::getenv("FP8KIT_TEST_SEED");
    const uint32_t s = env != nullptr ? uint32_t(std::strtoul(env, nullptr, 10)) : std::random_device{}();
    std::printf("fp8kit_gpu_tests: FP8KIT_TEST_SEED=%u\n", s);
    return s;
  }();
  return seed;
}
inline uint32_t next_seed() {
  static std::atomic<uint32_t> counter{0};
  return base_seed() + 7919u * counter++;
}

// What a failure message names.
struct Case {
  std::string op;
  Shape shape;
  DType in = DType::kF32, out = DType::kE4M3FN;
  uint32_t seed = 0;
  std::string detail;
  std::string str() const {
    std::ostringstream s;
    s << op << " " << shape_to_string(shape) << " " << dtype_name(in) << " -> " << dtype_name(out) << " seed " << seed;
    if (!detail.empty()) s << " (" << detail << ")";
    return s.str();
  }
};

inline void store_float(Tensor& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::kF32:
      t.data<float>()[i] = v;
      break;
    case DType::kF16:
      t.data<Float16>()[i] = float_to_f16(v);
      break;
    case DType::kBF16:
      t.data<BFloat16>()[i] = float_to_bf16(v);
      break;
    default:
      ADD_FAILURE() << "store_float: " << dtype_name(t.dtype());
  }
}

// Values of a few magnitudes (normal, 1/16 outliers x40, 1/16 small x1e-3) scaled by `sigma`, and
// 1/16 exact e4m3 rounding midpoints (ties for a scale of 1), into a contiguous CPU tensor.
inline void fill_random(Tensor& t, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::uniform_int_distribution<int> pick(0, 15);
  std::uniform_int_distribution<int> code(0, 0x7d);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    float x = normal(rng);
    const int p = pick(rng);
    if (p == 0) x *= 40.0f;
    if (p == 1) x *= 1e-3f;
    if (p == 2) {  // halfway between two e4m3fn codes (exact in bf16 and f16 as well)
      const int c = code(rng);
      x = 0.5f * (e4m3fn_bits_to_float(uint8_t(c)) + e4m3fn_bits_to_float(uint8_t(c + 1)));
      if (pick(rng) < 8) x = -x;
    }
    store_float(t, i, x);
  }
}

inline Tensor random_tensor(const Shape& shape, DType dtype, uint32_t seed, float sigma = 1.0f) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_random(t, seed, sigma);
  return t;
}

inline Tensor to_host(const Tensor& t) { return t.to(Device::cpu()); }

// A CUDA copy of the view `v` of the contiguous CPU tensor `base`, with the same strides and offset.
inline Tensor device_view(const Tensor& base, const Tensor& v) {
  const Tensor dev = base.to(Device::cuda(0));
  return Tensor::from_storage(dev.storage(), v.shape(), v.strides(), v.storage_offset(), v.dtype());
}

inline Tensor poisoned(const Shape& shape, DType dtype, Device device, uint8_t byte) {
  Tensor t = Tensor::empty(shape, dtype, device);
  t.fill_bytes_(byte);
  return t;
}

// The raw bytes of any tensor (device or host), row-major.
inline std::vector<uint8_t> raw_bytes(const Tensor& t) {
  const Tensor h = to_host(t).contiguous();
  std::vector<uint8_t> v(h.nbytes());
  if (!v.empty()) std::memcpy(v.data(), h.data_ptr(), v.size());
  return v;
}

// Element-wise bit equality of two byte images of `element_size`-byte elements.
inline void expect_same(const Case& c, const std::string& what, const std::vector<uint8_t>& got,
                        const std::vector<uint8_t>& want, size_t element_size) {
  ASSERT_EQ(got.size(), want.size()) << c.str() << ": " << what << " sizes differ";
  if (std::memcmp(got.data(), want.data(), got.size()) == 0) return;
  const size_t n = got.size() / element_size;
  size_t mismatches = 0, first = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i * element_size], &want[i * element_size], element_size) != 0) {
      if (mismatches++ == 0) first = i;
    }
  }
  auto show = [&](const std::vector<uint8_t>& v) {
    std::ostringstream s;
    uint64_t bits = 0;
    std::memcpy(&bits, &v[first * element_size], element_size);
    s << "0x" << std::hex << bits;
    if (element_size == 4) {
      float f;
      std::memcpy(&f, &bits, 4);
      s << " (" << std::dec << f << ")";
    }
    return s.str();
  };
  ADD_FAILURE() << c.str() << ": " << what << ": " << mismatches << " of " << n << " elements differ; first at "
                << first << ": got " << show(got) << ", want " << show(want);
}

inline void expect_same_tensor(const Case& c, const std::string& what, const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape()) << c.str() << ": " << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << c.str() << ": " << what;
  expect_same(c, what, raw_bytes(got), raw_bytes(want), got.element_size());
}

// Outputs that ops allocate themselves come from the caching allocator, which may hand back a
// block that already holds the right answer from an earlier call. This empties the cache and
// leaves `copies` poisoned blocks of each size in it, so the op's next allocations get poison.
inline void poison_next_allocations(const std::vector<size_t>& nbytes, uint8_t byte = kPoisonCodes, int copies = 2) {
  cuda_empty_cache(0);
  std::vector<Tensor> blocks;
  for (size_t n : nbytes) {
    for (int i = 0; i < copies; ++i) blocks.push_back(poisoned({int64_t(n)}, DType::kU8, Device::cuda(0), byte));
  }
  device_synchronize(0);
}

// The context of a tensor's device: the CPU, or cuda:0 on the legacy default stream; nothing
// overridden. (The CUDA one is never destroyed: its workspace must not outlive the CUDA runtime.)
inline const ForwardContext& cuda_ctx() {
  static const ForwardContext* cuda = new ForwardContext(Device::cuda(0));
  return *cuda;
}
inline const ForwardContext& ctx_of(const Tensor& t) {
  static const ForwardContext cpu;
  return t.device().is_cuda() ? cuda_ctx() : cpu;
}

// A cuda:0 context whose workspace holds `nbytes` of `byte` (0xFF: NaN codes) before an op runs,
// so that scratch an op reads before writing shows up in its result. Size it above what the op
// takes: more would come in a second, unpoisoned buffer.
inline ForwardContext poisoned_context(size_t nbytes, const Overrides& overrides = {}, uint8_t byte = kPoisonCodes) {
  ForwardContext ctx(Device::cuda(0), overrides);
  ctx.workspace().take({int64_t(nbytes)}, DType::kU8).fill_bytes_(byte);
  ctx.workspace().reset();
  device_synchronize(0);
  return ctx;
}

// Overrides from FP8KIT_* style name/value pairs (cases that name their knobs as strings).
inline Overrides overrides_of(const std::vector<std::pair<const char*, const char*>>& values) {
  return Overrides::parse([&](const char* name) -> const char* {
    for (const auto& [n, v] : values) {
      if (std::string(n) == name) return v;
    }
    return nullptr;
  });
}

}  // namespace fp8kit::gpu_test
