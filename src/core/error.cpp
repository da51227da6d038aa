#include "fp8kit/error.h"

namespace fp8kit {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kCuda: return "CUDA error";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

}  // namespace fp8kit
