// The library's version (include/fp8kit/version.h, generated from the CMake project version).
#include "fp8kit/version.h"

namespace fp8kit {

const char* version_string() { return FP8KIT_VERSION_STRING; }

}  // namespace fp8kit
