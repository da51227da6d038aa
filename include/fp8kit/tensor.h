// fp8kit::Tensor: a typed, shaped, strided view of a reference-counted buffer on one device.
// Copies of a Tensor share the buffer (like torch.Tensor); clone() and contiguous() copy data.
// Strides and offsets count elements, not bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fp8kit/device.h"
#include "fp8kit/dtype.h"
#include "fp8kit/error.h"
#include "fp8kit/stream.h"

namespace fp8kit {

using Shape = std::vector<int64_t>;

std::string shape_to_string(const Shape& shape);  // "[4096, 4096]"
int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

// A buffer on one device. Either owned (freed through its allocator) or borrowed from memory
// that `owner` keeps alive (an mmap'd file, a caller's array).
class Storage {
 public:
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, Device device, std::shared_ptr<const void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;  // null when borrowed
  std::shared_ptr<const void> owner_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: stands for "None" in optional arguments

  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  // A contiguous view of memory the caller owns; `owner` (may be null) is kept alive with it.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device = Device::cpu(),
                          std::shared_ptr<const void> owner = nullptr);
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, const Shape& strides,
                             int64_t storage_offset, DType dtype);
  // A CPU tensor holding a copy of `values`: 1-D, or shaped `shape` ({} gives a 0-dim tensor).
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{static_cast<int64_t>(values.size())});
  }
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  // A 0-dim f32 CPU tensor.
  static Tensor scalar_f32(float value);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const;
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;    // negative d counts from the end
  int64_t stride(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  int64_t storage_offset() const { return offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool is_contiguous() const;
  std::string description() const;  // "bf16[4096, 4096] on cpu"

  void* data_ptr() const;
  // Typed pointer; throws kInvalidArgument when T does not match dtype().
  template <typename T>
  T* data() const {
    check_dtype(DTypeOf<T>::value);
    return static_cast<T*>(data_ptr());
  }
  // Reads element 0 of a one-element CPU f32 tensor.
  float item_f32() const;

  // Views (share the buffer).
  Tensor view(const Shape& shape) const;  // needs a contiguous tensor; one -1 allowed
  Tensor view_as(DType dtype) const;      // same-size reinterpretation of the bits
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  Tensor select(int64_t d, int64_t index) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // 2-D transpose

  // Copies.
  Tensor contiguous() const;  // itself when already contiguous
  Tensor clone() const;
  Tensor to(Device device) const;
  // Copies src into this tensor (same dtype and shape; any strides; any devices a build supports).
  // Device work runs on `stream` (default: the legacy default stream); a copy from or to host
  // memory has completed when copy_ returns.
  void copy_(const Tensor& src);
  void copy_(const Tensor& src, Stream stream);
  // Sets every byte of this tensor's elements to `byte` (poisoning, zeroing); contiguous only.
  void fill_bytes_(uint8_t byte);
  void fill_bytes_(uint8_t byte, Stream stream);

 private:
  void check_dtype(DType expected) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::kF32;
};

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  if (shape_numel(shape) != static_cast<int64_t>(values.size())) {
    throw Error(ErrorCode::kInvalidArgument,
                "from_vector: " + std::to_string(values.size()) + " values do not fill shape " + shape_to_string(shape));
  }
  Tensor t = empty(shape, DTypeOf<T>::value);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  return t;
}

}  // namespace fp8kit
