// torch's printed names of fp8kit dtypes ("torch.bfloat16"), for error texts that the spec
// writes with torch dtypes (vLLM config.py's quantization dtype gate). Spec 1.1, 4.
// Tested through verify_quantization_support in tests/cpu/test_quantization_config.cpp.
#pragma once

#include <string>
#include <vector>

#include "fp8kit/dtype.h"

namespace fp8kit {

// str(torch.dtype): "torch.float32", "torch.float16", "torch.float8_e4m3fn", ...
const char* torch_dtype_name(DType dtype);

// str(list_of_torch_dtypes): "[torch.bfloat16, torch.float16]".
std::string torch_dtype_list(const std::vector<DType>& dtypes);

}  // namespace fp8kit
