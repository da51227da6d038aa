// torch dtype names for spec error texts (see torch_dtype.h). torch prints the canonical name
// (torch.float16, never its alias torch.half). Tested in tests/cpu/test_quantization_config.cpp.
#include "layers/torch_dtype.h"

namespace fp8kit {

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "torch.float32";
    case DType::kF16: return "torch.float16";
    case DType::kBF16: return "torch.bfloat16";
    case DType::kE4M3FN: return "torch.float8_e4m3fn";
    case DType::kE4M3FNUZ: return "torch.float8_e4m3fnuz";
    case DType::kE5M2: return "torch.float8_e5m2";
    case DType::kE5M2FNUZ: return "torch.float8_e5m2fnuz";
    case DType::kUE8M0: return "torch.float8_e8m0fnu";
    case DType::kI8: return "torch.int8";
    case DType::kU8: return "torch.uint8";
    case DType::kI16: return "torch.int16";
    case DType::kU16: return "torch.uint16";
    case DType::kI32: return "torch.int32";
    case DType::kU32: return "torch.uint32";
    case DType::kI64: return "torch.int64";
    case DType::kU64: return "torch.uint64";
    case DType::kF64: return "torch.float64";
    case DType::kBool: return "torch.bool";
  }
  return "torch.unknown";
}

std::string torch_dtype_list(const std::vector<DType>& dtypes) {
  std::string out = "[";
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (i > 0) out += ", ";
    out += torch_dtype_name(dtypes[i]);
  }
  out += "]";
  return out;
}

}  // namespace fp8kit
