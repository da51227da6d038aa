// Arrays in and out through DLPack, zero copy (tensor_interop.h). An imported array is borrowed:
// the Tensor's storage holds a nanobind ndarray handle, which keeps the producer's array alive
// (nanobind takes the GIL itself when the last handle goes, from whatever thread). An exported
// Tensor lends its storage to a nanobind array whose capsule owns a copy of the Tensor.
#include "tensor_interop.h"

#include <memory>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "fp8kit/error.h"
#include "fp8kit/platform.h"

namespace nb = nanobind;

namespace fp8kit::python {

namespace {

using Code = nb::dlpack::dtype_code;

std::string arg_error_prefix(const char* name) { return std::string("`") + name + "`: "; }

[[noreturn]] void invalid(const char* name, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, arg_error_prefix(name) + message);
}

nb::dlpack::dtype dlpack_dtype(DType dtype) {
  const uint8_t bits = static_cast<uint8_t>(dtype_size(dtype) * 8);
  auto make = [bits](Code code) { return nb::dlpack::dtype{static_cast<uint8_t>(code), bits, 1}; };
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kF64: return make(Code::Float);
    case DType::kBF16: return make(Code::Bfloat);
    case DType::kE4M3FN: return make(Code::Float8_E4M3FN);
    case DType::kE4M3FNUZ: return make(Code::Float8_E4M3FNUZ);
    case DType::kE5M2: return make(Code::Float8_E5M2);
    case DType::kE5M2FNUZ: return make(Code::Float8_E5M2FNUZ);
    case DType::kUE8M0: return make(Code::Float8_E8M0FNU);
    case DType::kI8:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64: return make(Code::Int);
    case DType::kU8:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64: return make(Code::UInt);
    case DType::kBool: return make(Code::Bool);
  }
  throw Error(ErrorCode::kInternal, "tensor_to_array: no DLPack code for dtype " + std::string(dtype_name(dtype)));
}

std::string dlpack_dtype_text(const nb::dlpack::dtype& dt) {
  if (const std::optional<DType> d = dtype_from_dlpack(dt.code, dt.bits)) return dtype_name(*d);
  return "DLPack code " + std::to_string(dt.code) + " of " + std::to_string(dt.bits) + " bits";
}

Device device_of(int device_type, int device_id, const char* name) {
  if (device_type == nb::device::cpu::value || device_type == nb::device::cuda_host::value) return Device::cpu();
  if (device_type == nb::device::cuda::value) {
    if (!cuda_built()) {
      throw Error(ErrorCode::kUnsupported, "`" + std::string(name) + "` is on cuda:" + std::to_string(device_id) +
                                               ", and this fp8kit was built without its CUDA backend");
    }
    return Device::cuda(device_id);
  }
  invalid(name, "arrays on DLPack device type " + std::to_string(device_type) + " are not supported (CPU and CUDA are)");
}

// The element type: the array's own, or `dtype` reinterpreting an integer array of its size.
DType element_type(const nb::dlpack::dtype& dt, const std::optional<std::string>& dtype, const char* name) {
  if (dt.lanes != 1) invalid(name, "vector dtypes (lanes = " + std::to_string(dt.lanes) + ") are not supported");
  const std::optional<DType> own = dtype_from_dlpack(dt.code, dt.bits);
  if (!dtype) {
    if (!own) invalid(name, "unsupported dtype (" + dlpack_dtype_text(dt) + ")");
    return *own;
  }
  const std::optional<DType> wanted = dtype_from_name(*dtype);
  if (!wanted) invalid(name, "unknown dtype '" + *dtype + "'");
  if (own == *wanted) return *wanted;
  const bool integer_view = dt.code == static_cast<uint8_t>(Code::UInt) || dt.code == static_cast<uint8_t>(Code::Int);
  if (!integer_view || dt.bits != dtype_size(*wanted) * 8) {
    invalid(name, "dtype=" + *dtype + " needs an array of " + dtype_name(*wanted) + " or its " +
                      std::to_string(dtype_size(*wanted) * 8) + "-bit unsigned integer view, got " +
                      dlpack_dtype_text(dt));
  }
  return *wanted;
}

template <typename Array>
Tensor borrow(const Array& array, const std::optional<std::string>& dtype, const char* name) {
  const DType element = element_type(array.dtype(), dtype, name);
  const Device device = device_of(array.device_type(), array.device_id(), name);
  Shape shape(array.ndim()), strides(array.ndim());
  int64_t extent = 1;  // elements spanned by the view
  for (size_t d = 0; d < array.ndim(); ++d) {
    shape[d] = static_cast<int64_t>(array.shape(d));
    strides[d] = array.stride(d);
    if (strides[d] < 0) invalid(name, "negative strides are not supported (copy the array first)");
  }
  if (shape_numel(shape) == 0) {
    extent = 0;
  } else {
    for (size_t d = 0; d < shape.size(); ++d) extent += (shape[d] - 1) * strides[d];
  }
  auto kept = std::make_shared<Array>(array);  // the producer's array lives as long as the storage
  void* data = const_cast<void*>(static_cast<const void*>(array.data()));
  auto storage = Storage::borrow(data, static_cast<size_t>(extent) * dtype_size(element), device, kept);
  return Tensor::from_storage(storage, shape, strides, 0, element);
}

}  // namespace

std::optional<DType> dtype_from_dlpack(uint8_t code, uint8_t bits) {
  switch (static_cast<Code>(code)) {
    case Code::Float:
      if (bits == 16) return DType::kF16;
      if (bits == 32) return DType::kF32;
      if (bits == 64) return DType::kF64;
      return std::nullopt;
    case Code::Bfloat: return bits == 16 ? std::optional(DType::kBF16) : std::nullopt;
    case Code::Int:
      if (bits == 8) return DType::kI8;
      if (bits == 16) return DType::kI16;
      if (bits == 32) return DType::kI32;
      if (bits == 64) return DType::kI64;
      return std::nullopt;
    case Code::UInt:
      if (bits == 8) return DType::kU8;
      if (bits == 16) return DType::kU16;
      if (bits == 32) return DType::kU32;
      if (bits == 64) return DType::kU64;
      return std::nullopt;
    case Code::Bool: return bits == 8 ? std::optional(DType::kBool) : std::nullopt;
    case Code::Float8_E4M3FN: return DType::kE4M3FN;
    case Code::Float8_E4M3FNUZ: return DType::kE4M3FNUZ;
    case Code::Float8_E5M2: return DType::kE5M2;
    case Code::Float8_E5M2FNUZ: return DType::kE5M2FNUZ;
    case Code::Float8_E8M0FNU: return DType::kUE8M0;
    default: return std::nullopt;
  }
}

Tensor tensor_from_array(nb::handle array, const std::optional<std::string>& dtype, const char* name, bool writable) {
  if (writable) {
    nb::ndarray<> view;
    if (!nb::try_cast(array, view, /*convert=*/false)) {
      invalid(name, "expected a writable array with __dlpack__ or the buffer protocol, got " +
                        std::string(nb::type_name(array.type()).c_str()) +
                        " (read-only, or an element type DLPack cannot carry: pass its uint8 view and dtype=)");
    }
    return borrow(view, dtype, name);
  }
  nb::ndarray<nb::ro> view;
  if (!nb::try_cast(array, view, /*convert=*/false)) {
    invalid(name, "expected an array with __dlpack__ or the buffer protocol, got " +
                      std::string(nb::type_name(array.type()).c_str()) +
                      " (for an element type DLPack cannot carry, pass its uint8 view and dtype=)");
  }
  return borrow(view, dtype, name);
}

nb::object tensor_to_array(const Tensor& tensor, bool raw) {
  if (!tensor.defined()) return nb::none();
  auto* kept = new Tensor(tensor);
  nb::capsule owner(kept, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(tensor.shape().begin(), tensor.shape().end());
  const Shape& strides = tensor.strides();
  nb::dlpack::dtype dt = dlpack_dtype(tensor.dtype());
  if (raw) dt.code = static_cast<uint8_t>(Code::UInt);
  const Device device = tensor.device();
  const int device_type = device.is_cuda() ? nb::device::cuda::value : nb::device::cpu::value;
  nb::ndarray<nb::array_api> array(tensor.data_ptr(), shape.size(), shape.data(), owner, strides.data(), dt, device_type,
                                   device.is_cuda() ? device.index : 0);
  return nb::cast(array, nb::rv_policy::reference);
}

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor>(m, "Tensor",
                     "An fp8kit tensor: a typed, strided view of memory on one device. Arrays convert to it "
                     "zero copy (Tensor.from_array) and back (Tensor.to_array).")
      .def_static(
          "from_array",
          [](nb::handle array, std::optional<std::string> dtype, const std::string& name, bool writable) {
            return tensor_from_array(array, dtype, name.c_str(), writable);
          },
          nb::arg("array"), nb::arg("dtype") = nb::none(), nb::arg("name") = "array", nb::arg("writable") = false)
      .def("to_array", &tensor_to_array, nb::arg("raw") = false)
      .def("t", &Tensor::t, "The transposed view of a 2-D tensor")
      .def("view", &Tensor::view, nb::arg("shape"), "A view of another shape (contiguous tensors)")
      .def_prop_ro("shape", [](const Tensor& t) { return t.shape(); })
      .def_prop_ro("strides", [](const Tensor& t) { return t.strides(); })
      .def_prop_ro("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_prop_ro("device", [](const Tensor& t) { return t.device().str(); })
      .def_prop_ro("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("__repr__", [](const Tensor& t) { return "fp8kit.Tensor(" + t.description() + ")"; });
}

}  // namespace fp8kit::python
