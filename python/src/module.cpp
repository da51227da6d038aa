// fp8kit._fp8kit, the extension module under the `fp8kit` Python package (python/fp8kit/): the
// Tensor type that carries arrays in and out (tensor_interop.cpp), the ops (bind_ops.cpp), the
// checkpoint tools (bind_convert.cpp), the model runner (bind_model.cpp). fp8kit::Error becomes the Python exception its code names:
// kInvalidArgument -> ValueError, kUnsupported -> NotImplementedError, kIo -> OSError, other codes
// -> RuntimeError, with fp8kit's message. Tests: tests/python/bindings/.
#include <exception>

#include <nanobind/nanobind.h>

#include "fp8kit/error.h"
#include "fp8kit/platform.h"
#include "fp8kit/version.h"
#include "tensor_interop.h"

namespace nb = nanobind;

namespace fp8kit::python {
void bind_ops(nb::module_& m);
void bind_convert(nb::module_& m);
void bind_model(nb::module_& m);
}  // namespace fp8kit::python

NB_MODULE(_fp8kit, m) {
  m.doc() = "fp8kit's C++ library: FP8 quantization ops, GEMMs, MoE and KV-cache kernels, checkpoint tools, the model runner";
  m.attr("__version__") = FP8KIT_VERSION_STRING;
  m.def("library_version", [] { return fp8kit::version_string(); });
  m.def("cuda_built", &fp8kit::cuda_built);
  m.def("cuda_device_count", &fp8kit::cuda_device_count);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const fp8kit::Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (e.code()) {
        case fp8kit::ErrorCode::kInvalidArgument: type = PyExc_ValueError; break;
        case fp8kit::ErrorCode::kUnsupported: type = PyExc_NotImplementedError; break;
        case fp8kit::ErrorCode::kIo: type = PyExc_OSError; break;
        case fp8kit::ErrorCode::kCuda:
        case fp8kit::ErrorCode::kInternal: type = PyExc_RuntimeError; break;
      }
      PyErr_SetString(type, e.what());
    }
  });

  fp8kit::python::bind_tensor(m);
  fp8kit::python::bind_ops(m);
  fp8kit::python::bind_convert(m);
  fp8kit::python::bind_model(m);
}
