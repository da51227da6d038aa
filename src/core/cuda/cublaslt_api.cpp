// cuBLASLt loaded on first use (cublaslt_api.h): dlopen of the library the headers belong to,
// found by the loader's search (LD_LIBRARY_PATH, ld.so.cache) or else in the toolkit's library
// folder of the build machine.
#include "core/cuda/cublaslt_api.h"

#include <dlfcn.h>

#include <string>

#include "core/check.h"

#ifndef FP8KIT_CUDA_LIBRARY_DIR
#define FP8KIT_CUDA_LIBRARY_DIR ""
#endif

namespace fp8kit::cuda {
namespace {

const std::string kLibrary = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);

void* open_library() {
  void* handle = dlopen(kLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) return handle;
  const std::string first_error = dlerror();
  const std::string fallback = std::string(FP8KIT_CUDA_LIBRARY_DIR) + "/" + kLibrary;
  if (*FP8KIT_CUDA_LIBRARY_DIR != '\0') handle = dlopen(fallback.c_str(), RTLD_NOW | RTLD_LOCAL);
  FP8KIT_CHECK(handle != nullptr, ErrorCode::kCuda, "cannot load cuBLASLt ({}): {}", kLibrary, first_error);
  return handle;
}

template <typename Fn>
void resolve(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  FP8KIT_CHECK(fn != nullptr, ErrorCode::kCuda, "{} has no {}", kLibrary, name);
}

// Every member of CublasLtApi is resolved below.
static_assert(sizeof(CublasLtApi) == 14 * sizeof(void*), "resolve every entry point of CublasLtApi in load()");

CublasLtApi load() {
  void* handle = open_library();  // kept open for the life of the process
  CublasLtApi api{};
#define FP8KIT_RESOLVE(name) resolve(handle, #name, api.name)
  FP8KIT_RESOLVE(cublasLtCreate);
  FP8KIT_RESOLVE(cublasLtDestroy);
  FP8KIT_RESOLVE(cublasLtGetStatusName);
  FP8KIT_RESOLVE(cublasLtGetStatusString);
  FP8KIT_RESOLVE(cublasLtMatmul);
  FP8KIT_RESOLVE(cublasLtMatmulDescCreate);
  FP8KIT_RESOLVE(cublasLtMatmulDescDestroy);
  FP8KIT_RESOLVE(cublasLtMatmulDescSetAttribute);
  FP8KIT_RESOLVE(cublasLtMatrixLayoutCreate);
  FP8KIT_RESOLVE(cublasLtMatrixLayoutDestroy);
  FP8KIT_RESOLVE(cublasLtMatmulPreferenceCreate);
  FP8KIT_RESOLVE(cublasLtMatmulPreferenceDestroy);
  FP8KIT_RESOLVE(cublasLtMatmulPreferenceSetAttribute);
  FP8KIT_RESOLVE(cublasLtMatmulAlgoGetHeuristic);
#undef FP8KIT_RESOLVE
  return api;
}

}  // namespace

const CublasLtApi& cublaslt() {
  static const CublasLtApi api = load();  // a failed load throws and is retried by the next call
  return api;
}

}  // namespace fp8kit::cuda
