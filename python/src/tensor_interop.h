// Tensors across the Python boundary, zero copy both ways, through DLPack (nanobind's ndarray):
// an array of numpy, torch, cupy, jax... becomes an fp8kit::Tensor that borrows its memory and
// keeps the array alive; a result Tensor goes out as a DLPack-capable array that keeps the
// Tensor's storage alive. Used by every binding (bind_*.cpp); tests: tests/python/bindings.
#pragma once

#include <optional>
#include <string>

#include <nanobind/nanobind.h>

#include "fp8kit/dtype.h"
#include "fp8kit/tensor.h"

namespace fp8kit::python {

// The dtype of a DLPack code (kDLFloat 16, kDLFloat8_e4m3fn, ...); nullopt when fp8kit has none.
std::optional<DType> dtype_from_dlpack(uint8_t code, uint8_t bits);

// `array` (any object with __dlpack__ or the buffer protocol) as a Tensor on its device. `dtype`
// (an fp8kit dtype name) reinterprets an integer array of the same element size: the uint8 view
// of FP8 data that numpy (ml_dtypes) and cupy cannot export otherwise. `name` names the argument
// in errors; `writable` refuses read-only arrays (outputs, caches updated in place).
Tensor tensor_from_array(nanobind::handle array, const std::optional<std::string>& dtype, const char* name,
                         bool writable);

// The Tensor as an array that shares its memory (nanobind's DLPack array, with __dlpack__ and
// __dlpack_device__ and, on the CPU, the buffer protocol). `raw` exports the elements as unsigned
// integers of their size (FP8 as uint8, bf16 as uint16) for consumers whose DLPack import lacks
// those dtypes; the caller views them back.
nanobind::object tensor_to_array(const Tensor& tensor, bool raw);

void bind_tensor(nanobind::module_& m);

}  // namespace fp8kit::python
