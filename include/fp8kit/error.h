// fp8kit::Error: the one exception type of the library.
// Library code never exits; cli/main.cpp turns an Error into an exit code and a one-line message.
// Where the spec raises ValueError, the message text is the spec's, verbatim.
#pragma once

#include <stdexcept>
#include <string>

namespace fp8kit {

enum class ErrorCode {
  kInvalidArgument,  // bad argument or bad input data (the spec's ValueError)
  kUnsupported,      // valid request that this build or device cannot serve
  kCuda,             // a CUDA runtime or driver call failed
  kIo,               // file system or malformed file
  kInternal,         // a broken invariant inside fp8kit
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace fp8kit
