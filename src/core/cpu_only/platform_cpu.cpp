// The platform queries of include/fp8kit/platform.h in a build without CUDA: no devices.
#include "core/check.h"
#include "fp8kit/platform.h"

namespace fp8kit {
namespace {

[[noreturn]] void no_cuda(const char* what) { fail(ErrorCode::kUnsupported, "{}: fp8kit was built without CUDA", what); }

}  // namespace

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
DeviceCapability get_device_capability(int) { no_cuda("get_device_capability"); }
bool has_device_capability(int, int) { return false; }
bool is_device_capability(int, int) { return false; }
std::string get_device_name(int) { no_cuda("get_device_name"); }
int get_cu_count(int) { no_cuda("get_cu_count"); }
size_t get_l2_cache_bytes(int) { no_cuda("get_l2_cache_bytes"); }
DType fp8_dtype() { return DType::kE4M3FN; }
void device_synchronize(int) { no_cuda("device_synchronize"); }
void stream_synchronize(Stream stream) {
  if (stream.handle != nullptr) no_cuda("stream_synchronize");
}
CudaMemoryStats cuda_memory_stats(int) { no_cuda("cuda_memory_stats"); }
void cuda_empty_cache(int) { no_cuda("cuda_empty_cache"); }

}  // namespace fp8kit
