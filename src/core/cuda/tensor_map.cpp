// cuTensorMapEncodeTiled through the runtime's driver entry point (tensor_map.h).
#if FP8KIT_WITH_CUDA

#include "core/cuda/tensor_map.h"

#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include "core/check.h"

namespace fp8kit::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status);
    FP8KIT_CHECK(err == cudaSuccess && status == cudaDriverEntryPointSuccess && p != nullptr, ErrorCode::kUnsupported,
                 "the CUDA driver has no cuTensorMapEncodeTiled (needs a CUDA 12+ driver)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

CUtensorMap make_tensor_map_3d_u8_sw128(const void* base, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t stride1,
                                        uint64_t stride2, uint32_t box0, uint32_t box1) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {d0, d1, d2};
  const cuuint64_t strides[2] = {stride1, stride2};
  const cuuint32_t box[3] = {box0, box1, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r = encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(base), dims, strides, box,
                                 element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  FP8KIT_CHECK(r == CUDA_SUCCESS, ErrorCode::kCuda,
               "cuTensorMapEncodeTiled failed (error {}) for a [{}, {}, {}] byte tensor, strides {} / {}, box {} x {}",
               int(r), d2, d1, d0, stride1, stride2, box1, box0);
  return map;
}

CUtensorMap make_tensor_map_2d_sw128(const void* base, uint32_t elem_bytes, uint64_t d0, uint64_t d1, uint64_t stride1,
                                     uint32_t box0, uint32_t box1) {
  FP8KIT_CHECK(elem_bytes == 2 || elem_bytes == 4, ErrorCode::kInternal, "make_tensor_map_2d_sw128: {}-byte elements",
               elem_bytes);
  CUtensorMap map;
  const cuuint64_t dims[2] = {d0, d1};
  const cuuint64_t strides[1] = {stride1};
  const cuuint32_t box[2] = {box0, box1};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUtensorMapDataType type = elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  const CUresult r = encode_fn()(&map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  FP8KIT_CHECK(r == CUDA_SUCCESS, ErrorCode::kCuda,
               "cuTensorMapEncodeTiled failed (error {}) for a [{}, {}] tensor of {}-byte elements, stride {}, box {} x {}",
               int(r), d1, d0, elem_bytes, stride1, box1, box0);
  return map;
}

}  // namespace fp8kit::cuda

#endif  // FP8KIT_WITH_CUDA
