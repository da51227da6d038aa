// Where a tensor lives (CPU or a CUDA device) and the allocator interface that gives it memory.
#pragma once

#include <cstddef>
#include <string>

namespace fp8kit {

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device cpu() { return {DeviceType::kCPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const;  // "cpu", "cuda:0"
  friend bool operator==(const Device&, const Device&) = default;
};

// Memory for tensors on one device. A CUDA build registers a caching allocator per device;
// users may install their own (e.g. the engine's memory pool) with set_allocator.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};

// The allocator new tensors on `device` use. Throws kUnsupported for a device this build cannot
// serve (a CUDA device in a CPU-only build).
Allocator* get_allocator(Device device);
// Installs `allocator` for its device; nullptr restores the default. The allocator must outlive
// every tensor allocated from it.
void set_allocator(Device device, Allocator* allocator);

}  // namespace fp8kit
