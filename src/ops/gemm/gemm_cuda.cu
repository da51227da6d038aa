// The CUDA entry of scaled_mm: GemmDesc -> GemmConfig (gemm_config.h), then the chosen backend
// (the decode kernel of sm90_e4m3_gemm_decode.cu, the wgmma kernel of sm90_e4m3_gemm_wgmma.cu,
// cuBLASLt or the generic kernel).
// With per-row or block activation scales and fewer than 16 rows, cuBLASLt (CUDA 13.0, H200)
// either finds no algorithm or picks one 20x slower than at 16 rows (measured at M = 1: 250 us
// against 20 us for a 6144 x 4096 weight): such problems run padded to 16 rows of zeros. A
// per-tensor scale next to a per-row one (which cuBLASLt cannot mix) becomes a vector. Only what
// cuBLASLt cannot run at all goes to the generic kernel.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/cuda/cuda_check.h"
#include "fp8kit/tensor.h"
#include "ops/gemm/gemm_config.h"
#include "ops/gemm/gemm_cublaslt.h"
#include "ops/gemm/gemm_cuda.h"
#include "ops/gemm/gemm_fallback.h"
#include "ops/gemm/sm90_e4m3_gemm_decode.h"
#include "ops/gemm/sm90_e4m3_gemm_wgmma.h"

namespace fp8kit::ops {
namespace {

int current_device() {
  int device = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

int current_arch() {
  int major = 0, minor = 0;
  const int device = current_device();
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

int sm_count() {
  int count = 0;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, current_device()));
  return count;
}

size_t out_bytes(DType d) { return d == DType::kF32 ? 4 : 2; }

__global__ void broadcast_scalar_kernel(const float* scalar, float* out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = *scalar;
  }
}

// A [n] vector holding the device scalar `scalar` in every element.
Tensor broadcast_scalar(const float* scalar, int64_t n, cudaStream_t s) {
  Tensor v = Tensor::empty({n}, DType::kF32, Device::cuda(current_device()));
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((n + threads - 1) / threads, 1024));
  broadcast_scalar_kernel<<<blocks, threads, 0, s>>>(scalar, static_cast<float*>(v.data_ptr()), n);
  FP8KIT_CHECK_LAUNCH(s, "broadcast_scalar_kernel");
  return v;
}

// Runs `args` (m < kPadRows) on cuBLASLt as a kPadRows-row problem: a and the per-row or block
// activation scales are copied into zero-filled buffers, the output lands in a scratch buffer
// whose first m rows are copied out. The copies are a few kilobytes each.
constexpr int64_t kPadRows = 16;

bool scaled_mm_cublaslt_padded(const ScaledMmArgs& args, cudaStream_t s) {
  const Device dev = Device::cuda(current_device());
  ScaledMmArgs p = args;
  p.m = kPadRows;
  Tensor a = Tensor::empty({kPadRows, args.k}, DType::kE4M3FN, dev);
  FP8KIT_CUDA_CHECK(cudaMemsetAsync(a.data_ptr(), 0, a.nbytes(), s));
  FP8KIT_CUDA_CHECK(cudaMemcpy2DAsync(a.data_ptr(), size_t(args.k), args.a, size_t(args.lda), size_t(args.k),
                                      size_t(args.m), cudaMemcpyDeviceToDevice, s));
  p.a = static_cast<const uint8_t*>(a.data_ptr());
  p.lda = args.k;
  Tensor scales;
  if (args.scale_a_kind == ScaleKind::kRow) {
    scales = Tensor::zeros({kPadRows}, DType::kF32, dev);
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(scales.data_ptr(), args.scale_a, size_t(args.m) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, s));
    p.scale_a = static_cast<const float*>(scales.data_ptr());
  } else if (args.scale_a_kind == ScaleKind::kBlock) {
    const int64_t groups = args.k / args.block_k;
    scales = Tensor::empty({groups, kPadRows}, DType::kF32, dev);
    FP8KIT_CUDA_CHECK(cudaMemsetAsync(scales.data_ptr(), 0, scales.nbytes(), s));
    FP8KIT_CUDA_CHECK(cudaMemcpy2DAsync(scales.data_ptr(), size_t(kPadRows) * sizeof(float), args.scale_a,
                                        size_t(args.sa_group_stride) * sizeof(float), size_t(args.m) * sizeof(float),
                                        size_t(groups), cudaMemcpyDeviceToDevice, s));
    p.scale_a = static_cast<const float*>(scales.data_ptr());
    p.sa_row_stride = 1;
    p.sa_group_stride = kPadRows;
  }
  Tensor out = Tensor::empty({kPadRows, args.n}, args.out_dtype, dev);
  p.out = out.data_ptr();
  p.ldc = args.n;
  if (!scaled_mm_cublaslt(p, s)) return false;
  const size_t row = size_t(args.n) * out_bytes(args.out_dtype);
  FP8KIT_CUDA_CHECK(cudaMemcpy2DAsync(args.out, size_t(args.ldc) * out_bytes(args.out_dtype), out.data_ptr(), row, row,
                                      size_t(args.m), cudaMemcpyDeviceToDevice, s));
  return true;
}

}  // namespace

void scaled_mm_cuda(const ScaledMmArgs& args, Stream stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  static const Overrides kDefaults;
  const Overrides& overrides = args.overrides != nullptr ? *args.overrides : kDefaults;
  const GemmConfig config = plan_scaled_mm(describe(args, current_arch()), overrides);
  if (config.backend == GemmBackend::kDecode) {
    sm90_e4m3_gemm_decode(args, plan_decode_gemm(args.m, args.n, args.k, sm_count(), overrides.decode_k_splits),
                          s);
    return;
  }
  if (config.backend == GemmBackend::kWgmma) {
    sm90_e4m3_gemm_wgmma(args, plan_wgmma_gemm(args.m, args.n, sm_count(), args.fast_accum), s);
    return;
  }
  if (config.backend == GemmBackend::kCublasLt) {
    ScaledMmArgs compact = args;
    Tensor compact_scales;
    if (args.scale_a_kind == ScaleKind::kBlock && args.sa_group_stride != args.m) {
      // TMA-aligned activation scales [K/bk, M_pad]: cuBLASLt reads [K/bk, M] without padding.
      const int64_t groups = args.k / args.block_k;
      compact_scales = Tensor::empty({groups, args.m}, DType::kF32, Device::cuda(current_device()));
      FP8KIT_CUDA_CHECK(cudaMemcpy2DAsync(compact_scales.data_ptr(), size_t(args.m) * sizeof(float), args.scale_a,
                                          size_t(args.sa_group_stride) * sizeof(float), size_t(args.m) * sizeof(float),
                                          size_t(groups), cudaMemcpyDeviceToDevice, s));
      compact.scale_a = static_cast<const float*>(compact_scales.data_ptr());
      compact.sa_group_stride = args.m;
    }
    // cuBLASLt scales both operands in one mode: a per-tensor scale next to per-row ones becomes
    // a vector of copies of it.
    Tensor expanded;
    if (args.scale_a_kind == ScaleKind::kTensor && args.scale_b_kind == ScaleKind::kRow) {
      expanded = broadcast_scalar(args.scale_a, args.m, s);
      compact.scale_a = static_cast<const float*>(expanded.data_ptr());
      compact.scale_a_kind = ScaleKind::kRow;
    } else if (args.scale_a_kind == ScaleKind::kRow && args.scale_b_kind == ScaleKind::kTensor) {
      expanded = broadcast_scalar(args.scale_b, args.n, s);
      compact.scale_b = static_cast<const float*>(expanded.data_ptr());
      compact.scale_b_kind = ScaleKind::kRow;
    }
    const bool pad = args.m < kPadRows && compact.scale_a_kind != ScaleKind::kTensor;
    if (pad ? scaled_mm_cublaslt_padded(compact, s) : scaled_mm_cublaslt(compact, s)) return;
  }
  scaled_mm_fallback(args, s);
}

}  // namespace fp8kit::ops
