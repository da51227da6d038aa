// The checkpoint tools (include/fp8kit/convert.h) for Python: quantize, dequantize and inspect a
// Hugging Face directory, without the GIL; reports come back as dicts (python/fp8kit/checkpoint.py
// gives the keyword arguments and defaults). A progress callable runs with the GIL, on the calling
// thread, between tensors; an exception it raises stops the run (nothing is left behind) and
// reaches the caller. Tests: tests/python/bindings/test_bindings_checkpoint.py.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "fp8kit/convert.h"
#include "fp8kit/error.h"

namespace nb = nanobind;

namespace fp8kit::python {

namespace {

nb::dict report_dict(const ConversionReport& r) {
  nb::dict d;
  d["tensors_quantized"] = r.tensors_quantized;
  d["tensors_copied"] = r.tensors_copied;
  d["input_tensor_bytes"] = r.input_tensor_bytes;
  d["output_tensor_bytes"] = r.output_tensor_bytes;
  d["seconds"] = r.seconds;
  d["ignored_layers"] = r.ignored_layers;
  d["notes"] = r.notes;
  return d;
}

// The Python callable as a ProgressCallback, called by the library with the GIL released. It is
// held through a shared_ptr, so that copies of the callback made without the GIL touch no Python
// reference count; the options that own the last copy die with the GIL held.
ProgressCallback progress_callback(nb::object progress) {
  if (progress.is_none()) return {};
  auto callable = std::make_shared<nb::object>(std::move(progress));
  return [callable](const ConversionProgress& p) {
    nb::gil_scoped_acquire gil;
    (*callable)(p.bytes_done, p.bytes_total, p.current_tensor);
  };
}

QuantScheme parse_scheme(const std::string& scheme) {
  if (scheme == "block") return QuantScheme::kBlock;
  if (scheme == "per-tensor" || scheme == "per_tensor") return QuantScheme::kPerTensor;
  if (scheme == "per-channel" || scheme == "per_channel") return QuantScheme::kPerChannel;
  throw Error(ErrorCode::kInvalidArgument,
              "`scheme` must be 'block', 'per-tensor' or 'per-channel', got '" + scheme + "'");
}

nb::dict quantize(const std::string& input_dir, const std::string& output_dir, const std::string& scheme,
                  std::pair<int64_t, int64_t> block_size, bool ue8m0, const std::vector<std::string>& ignore,
                  bool quantize_lm_head, bool force, nb::object progress) {
  QuantizeOptions o;
  o.scheme = parse_scheme(scheme);
  o.block_n = block_size.first;
  o.block_k = block_size.second;
  o.ue8m0_scales = ue8m0;
  o.ignore = ignore;
  o.quantize_lm_head = quantize_lm_head;
  o.force = force;
  o.progress = progress_callback(std::move(progress));
  ConversionReport report;
  {
    nb::gil_scoped_release released;
    report = quantize_checkpoint(input_dir, output_dir, o);
  }
  return report_dict(report);
}

nb::dict dequantize(const std::string& input_dir, const std::string& output_dir, const std::optional<std::string>& dtype,
                    bool force, nb::object progress) {
  DequantizeOptions o;
  if (dtype) {
    const std::optional<DType> d = dtype_from_name(*dtype);
    if (!d || !(*d == DType::kBF16 || *d == DType::kF16 || *d == DType::kF32)) {
      throw Error(ErrorCode::kInvalidArgument, "`dtype` must be 'bf16', 'f16' or 'f32', got '" + *dtype + "'");
    }
    o.out_dtype = *d;
  }
  o.force = force;
  o.progress = progress_callback(std::move(progress));
  ConversionReport report;
  {
    nb::gil_scoped_release released;
    report = dequantize_checkpoint(input_dir, output_dir, o);
  }
  return report_dict(report);
}

// The report as JSON text (InspectReport::to_json, what `fp8kit inspect --json` prints); the
// package turns it into a dict.
std::string inspect_json(const std::string& dir, bool loading) {
  std::string text;
  {
    nb::gil_scoped_release released;
    text = inspect_checkpoint(dir, loading).to_json().dump();
  }
  return text;
}

}  // namespace

void bind_convert(nb::module_& m) {
  using nb::arg;
  m.def("quantize", &quantize, arg("input_dir"), arg("output_dir"), arg("scheme"), arg("block_size"), arg("ue8m0"),
        arg("ignore"), arg("quantize_lm_head"), arg("force"), arg("progress").none());
  m.def("dequantize", &dequantize, arg("input_dir"), arg("output_dir"), arg("dtype").none(), arg("force"),
        arg("progress").none());
  m.def("inspect_json", &inspect_json, arg("dir"), arg("loading"));
}

}  // namespace fp8kit::python
