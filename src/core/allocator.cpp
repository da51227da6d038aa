// Default allocators and the per-device allocator registry.
#include <sys/mman.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <new>

#include "core/check.h"
#include "core/device_hooks.h"
#include "core/thread_allocator.h"
#include "fp8kit/device.h"

namespace fp8kit {
namespace {

// 64-byte aligned host memory: one cache line, and enough for any vector load. Large buffers
// are mapped and unmapped directly, so the memory of a freed tensor goes back to the system
// (malloc keeps freed heap memory, and a stream of large tensors would pile it up) -- but for a
// few freed mappings kept for the next allocation of the same size: a forward pass allocates and
// frees activations of the same few sizes every layer, and a fresh mapping costs a page fault and
// a zeroed page per page of first touch (5% of a 512-token prefill of SmolLM2 on 2 threads went
// there). The kept mappings are bounded (kKeptMappings of at most kKeptBytes together, none
// larger than kKeptMaxMapping), so what the process holds beyond its live tensors stays small.
// Tests: every tensor test allocates through it; AllocatorCpu.* (tests/cpu/test_tensor.cpp); the
// quantize benchmark reports peak RSS.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kMapThreshold = size_t(1) << 20;
  static constexpr int kKeptMappings = 8;
  static constexpr size_t kKeptBytes = size_t(64) << 20;
  static constexpr size_t kKeptMaxMapping = size_t(16) << 20;

  Device device() const override { return Device::cpu(); }
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    void* p = nullptr;
    if (nbytes >= kMapThreshold) {
      p = take_kept(nbytes);
      if (p != nullptr) return p;
      p = ::mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        p = nullptr;
      } else {
        // Huge pages where the system offers them on request: a first touch then costs one fault
        // per 2 MiB rather than per 4 KiB (advice only).
        ::madvise(p, nbytes, MADV_HUGEPAGE);
      }
    } else {
      p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    }
    if (p == nullptr) fail(ErrorCode::kInvalidArgument, "out of host memory allocating {} bytes", nbytes);
    return p;
  }
  void deallocate(void* ptr, size_t nbytes) override {
    if (nbytes >= kMapThreshold) {
      if (!keep(ptr, nbytes)) ::munmap(ptr, nbytes);
    } else {
      std::free(ptr);
    }
  }

 private:
  struct Kept {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  std::mutex mutex_;
  std::array<Kept, kKeptMappings> kept_{};
  size_t kept_bytes_ = 0;

  void* take_kept(size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Kept& k : kept_) {
      if (k.ptr != nullptr && k.bytes == nbytes) {
        void* p = k.ptr;
        k = Kept{};
        kept_bytes_ -= nbytes;
        return p;
      }
    }
    return nullptr;
  }
  bool keep(void* ptr, size_t nbytes) {
    if (nbytes > kKeptMaxMapping) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_bytes_ + nbytes > kKeptBytes) return false;
    for (Kept& k : kept_) {
      if (k.ptr == nullptr) {
        k = Kept{ptr, nbytes};
        kept_bytes_ += nbytes;
        return true;
      }
    }
    return false;
  }
};

constexpr int kMaxCudaDevices = 64;

struct Registry {
  std::mutex mutex;
  Allocator* cpu_override = nullptr;
  std::array<Allocator*, kMaxCudaDevices> cuda_override{};
};

Registry& registry() {
  static Registry r;
  return r;
}

// set_thread_allocator's: the calling thread's allocator per CUDA device (the CPU has none).
thread_local std::array<Allocator*, kMaxCudaDevices> thread_cuda_allocators{};

void check_cuda_index(Device device) {
  FP8KIT_CHECK(device.index >= 0 && device.index < kMaxCudaDevices, ErrorCode::kInvalidArgument,
               "invalid device {}", device.str());
}

}  // namespace

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Allocator* get_allocator(Device device) {
  static CpuAllocator cpu;
  if (device.is_cuda()) {
    check_cuda_index(device);
    if (Allocator* own = thread_cuda_allocators[size_t(device.index)]) return own;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (device.is_cpu()) return r.cpu_override ? r.cpu_override : &cpu;
  if (r.cuda_override[device.index]) return r.cuda_override[device.index];
  const DeviceHooks* hooks = device_hooks(DeviceType::kCUDA);
  FP8KIT_CHECK(hooks != nullptr, ErrorCode::kUnsupported, "cannot allocate on {}: fp8kit was built without CUDA",
               device.str());
  return hooks->default_allocator(device.index);
}

void set_allocator(Device device, Allocator* allocator) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (device.is_cpu()) {
    r.cpu_override = allocator;
    return;
  }
  check_cuda_index(device);
  r.cuda_override[device.index] = allocator;
}

Allocator* set_thread_allocator(Device device, Allocator* allocator) {
  FP8KIT_CHECK(device.is_cuda(), ErrorCode::kInvalidArgument, "a thread allocator is for a CUDA device, not {}",
               device.str());
  check_cuda_index(device);
  Allocator* previous = thread_cuda_allocators[size_t(device.index)];
  thread_cuda_allocators[size_t(device.index)] = allocator;
  return previous;
}

}  // namespace fp8kit
