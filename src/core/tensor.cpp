#include "fp8kit/tensor.h"

#include <cstring>

#include "core/check.h"
#include "core/device_hooks.h"

namespace fp8kit {
namespace {

int64_t wrap_dim(int64_t d, int64_t ndim, const char* what) {
  const int64_t w = d < 0 ? d + ndim : d;
  FP8KIT_CHECK_ARG(w >= 0 && w < ndim, "{}: dimension {} out of range for a {}-D tensor", what, d, ndim);
  return w;
}

// Copies a strided CPU tensor into another of the same dtype and shape, element by element
// (memcpy of whole rows when both are contiguous in the last dimension).
void copy_cpu(Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  if (n == 0) return;
  const size_t es = src.element_size();
  if (dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), n * es);
    return;
  }
  const int64_t ndim = src.dim();
  auto* d = static_cast<uint8_t*>(dst.data_ptr());
  const auto* s = static_cast<const uint8_t*>(src.data_ptr());
  // Innermost dimension as a run of elements.
  const int64_t inner = ndim == 0 ? 1 : src.size(-1);
  const int64_t ds = ndim == 0 ? 1 : dst.stride(-1), ss = ndim == 0 ? 1 : src.stride(-1);
  Shape index(ndim > 0 ? ndim - 1 : 0, 0);
  for (int64_t done = 0; done < n; done += inner) {
    int64_t doff = 0, soff = 0;
    for (size_t i = 0; i < index.size(); ++i) {
      doff += index[i] * dst.stride(static_cast<int64_t>(i));
      soff += index[i] * src.stride(static_cast<int64_t>(i));
    }
    if (ds == 1 && ss == 1) {
      std::memcpy(d + doff * es, s + soff * es, inner * es);
    } else {
      for (int64_t j = 0; j < inner; ++j) std::memcpy(d + (doff + j * ds) * es, s + (soff + j * ss) * es, es);
    }
    for (int64_t i = static_cast<int64_t>(index.size()) - 1; i >= 0; --i) {
      if (++index[i] < src.size(i)) break;
      index[i] = 0;
    }
  }
}

}  // namespace

const DeviceHooks* device_hooks(DeviceType type) {
#if FP8KIT_WITH_CUDA
  if (type == DeviceType::kCUDA) return cuda_device_hooks();
#endif
  return nullptr;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  // A zero dimension makes the product 0, but the others must still fit (strides use them).
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    empty = empty || d == 0;
    FP8KIT_CHECK_ARG(d == 0 || !__builtin_mul_overflow(nonzero, d, &nonzero),
                     "shape {} has more elements than a 64-bit integer holds", shape_to_string(shape));
  }
  return empty ? 0 : nonzero;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

// ---- Storage ----

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  Allocator* allocator = get_allocator(device);
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = allocator->allocate(nbytes);
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->allocator_ = allocator;
  return s;
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, Device device,
                                         std::shared_ptr<const void> owner) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->owner_ = std::move(owner);
  return s;
}

Storage::~Storage() {
  if (allocator_ != nullptr && data_ != nullptr) allocator_->deallocate(data_, nbytes_);
}

// ---- Tensor ----

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) FP8KIT_CHECK_ARG(d >= 0, "negative dimension in shape {}", shape_to_string(shape));
  size_t nbytes = 0;
  FP8KIT_CHECK_ARG(!__builtin_mul_overflow(static_cast<size_t>(shape_numel(shape)), dtype_size(dtype), &nbytes),
                   "a {} tensor of shape {} needs more bytes than a 64-bit size holds", dtype_name(dtype),
                   shape_to_string(shape));
  return from_storage(Storage::allocate(nbytes, device), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_bytes_(0);
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device,
                         std::shared_ptr<const void> owner) {
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return from_storage(Storage::borrow(data, nbytes, device, std::move(owner)), shape, contiguous_strides(shape), 0,
                      dtype);
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, const Shape& strides,
                            int64_t storage_offset, DType dtype) {
  FP8KIT_CHECK_ARG(storage != nullptr, "from_storage: null storage");
  FP8KIT_CHECK_ARG(shape.size() == strides.size(), "from_storage: shape {} and strides {} differ in rank",
                   shape_to_string(shape), shape_to_string(strides));
  Tensor t;
  t.storage_ = std::move(storage);
  t.shape_ = shape;
  t.strides_ = strides;
  t.offset_ = storage_offset;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::scalar_f32(float value) { return from_vector(std::vector<float>{value}, Shape{}); }

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides_[wrap_dim(d, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to be out of place
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::string Tensor::description() const {
  if (!defined()) return "undefined tensor";
  return std::string(dtype_name(dtype_)) + shape_to_string(shape_) + " on " + device().str();
}

void* Tensor::data_ptr() const {
  if (!storage_) return nullptr;
  return static_cast<uint8_t*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

void Tensor::check_dtype(DType expected) const {
  FP8KIT_CHECK_ARG(defined(), "expected a {} tensor, got an undefined tensor", dtype_name(expected));
  FP8KIT_CHECK_ARG(dtype_ == expected, "expected a {} tensor, got {}", dtype_name(expected), description());
}

float Tensor::item_f32() const {
  FP8KIT_CHECK_ARG(defined() && numel() == 1, "item_f32: expected a one-element tensor, got {}", description());
  FP8KIT_CHECK_ARG(device().is_cpu(), "item_f32: tensor is on {}", device().str());
  // A tensor mapped from a file may sit at any byte offset: no aligned float load.
  float value;
  std::memcpy(&value, data<float>(), sizeof(value));
  return value;
}

Tensor Tensor::view(const Shape& shape) const {
  FP8KIT_CHECK_ARG(is_contiguous(), "view: {} is not contiguous", description());
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      FP8KIT_CHECK_ARG(infer < 0, "view: only one dimension can be -1 in {}", shape_to_string(shape));
      infer = static_cast<int64_t>(i);
    } else {
      FP8KIT_CHECK_ARG(s[i] >= 0, "view: invalid shape {}", shape_to_string(shape));
      known *= s[i];
    }
  }
  if (infer >= 0) {
    FP8KIT_CHECK_ARG(known > 0 && numel() % known == 0, "view: shape {} is invalid for {} elements",
                     shape_to_string(shape), numel());
    s[infer] = numel() / known;
  }
  FP8KIT_CHECK_ARG(shape_numel(s) == numel(), "view: shape {} is invalid for {} elements", shape_to_string(shape),
                   numel());
  return from_storage(storage_, s, contiguous_strides(s), offset_, dtype_);
}

Tensor Tensor::view_as(DType dtype) const {
  FP8KIT_CHECK_ARG(dtype_size(dtype) == element_size(), "view_as: {} and {} differ in element size",
                   dtype_name(dtype_), dtype_name(dtype));
  Tensor t = *this;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  const int64_t w = wrap_dim(d, dim(), "narrow");
  FP8KIT_CHECK_ARG(start >= 0 && length >= 0 && start + length <= shape_[w],
                   "narrow: [{}, {}) is out of range for dimension {} of size {}", start, start + length, d,
                   shape_[w]);
  Tensor t = *this;
  t.shape_[w] = length;
  t.offset_ += start * strides_[w];
  return t;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  const int64_t w = wrap_dim(d, dim(), "select");
  FP8KIT_CHECK_ARG(index >= 0 && index < shape_[w], "select: index {} is out of range for dimension {} of size {}",
                   index, d, shape_[w]);
  Tensor t = *this;
  t.offset_ += index * strides_[w];
  t.shape_.erase(t.shape_.begin() + w);
  t.strides_.erase(t.strides_.begin() + w);
  return t;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  const int64_t a = wrap_dim(d0, dim(), "transpose"), b = wrap_dim(d1, dim(), "transpose");
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::t() const {
  FP8KIT_CHECK_ARG(dim() == 2, "t: expected a 2-D tensor, got {}", description());
  return transpose(0, 1);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  FP8KIT_CHECK_ARG(defined(), "clone of an undefined tensor");
  Tensor out = empty(shape_, dtype_, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device device) const {
  FP8KIT_CHECK_ARG(defined(), "to({}) of an undefined tensor", device.str());
  if (device == this->device()) return *this;
  Tensor out = empty(shape_, dtype_, device);
  out.copy_(*this);
  return out;
}

void Tensor::copy_(const Tensor& src) { copy_(src, Stream{}); }

void Tensor::copy_(const Tensor& src, Stream stream) {
  FP8KIT_CHECK_ARG(defined() && src.defined(), "copy_: undefined tensor");
  FP8KIT_CHECK_ARG(dtype_ == src.dtype_ && shape_ == src.shape_, "copy_: cannot copy {} into {}", src.description(),
                   description());
  if (device().is_cpu() && src.device().is_cpu()) {
    copy_cpu(*this, src);
    return;
  }
  const DeviceHooks* hooks = device_hooks(DeviceType::kCUDA);
  FP8KIT_CHECK(hooks != nullptr, ErrorCode::kUnsupported, "copy_ from {} to {}: fp8kit was built without CUDA",
               src.device().str(), device().str());
  hooks->copy(*this, src, stream);
}

void Tensor::fill_bytes_(uint8_t byte) { fill_bytes_(byte, Stream{}); }

void Tensor::fill_bytes_(uint8_t byte, Stream stream) {
  FP8KIT_CHECK_ARG(defined(), "fill_bytes_: undefined tensor");
  FP8KIT_CHECK_ARG(is_contiguous(), "fill_bytes_: {} is not contiguous", description());
  if (nbytes() == 0) return;
  if (device().is_cpu()) {
    std::memset(data_ptr(), byte, nbytes());
    return;
  }
  const DeviceHooks* hooks = device_hooks(DeviceType::kCUDA);
  FP8KIT_CHECK(hooks != nullptr, ErrorCode::kUnsupported, "fill_bytes_ on {}: fp8kit was built without CUDA",
               device().str());
  hooks->memset(data_ptr(), byte, nbytes(), device(), stream);
}

}  // namespace fp8kit
