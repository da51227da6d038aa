// apply_rope on CUDA: the kernel and its launcher (rope_cuda.h). Reference: rope_ref.cpp on the
// same RopeArgs. A block per token (or per slice of a token's heads, for few tokens): its threads
// compute the token's cos/sin into shared memory,
// c = T(f32(cos(double(f32(pos) * inv_freq))) * attention_factor) and likewise s, the reference's
// steps, then rotate every pair of every head of q and k with the reference's roundings
// (x_a' = T(T(x_a c) - T(x_b s)), x_b' = T(T(x_b c) + T(x_a s)); explicit _rn operations, so no
// contraction into FMAs), and copy the dims past rotary_dim when out of place.
// Which roundings match: all of them; the one step that is not IEEE-exact is cos/sin in double
// (CUDA's cos/sin are within 2 ulp of double, glibc's within 1): the f32 values agree unless the
// exact cosine lies within ~2^-51 (relative) of an f32 rounding boundary, which
// tests/gpu/test_norm_rope_cuda.cpp detects and excludes.
// Floor: memory-bound, 2 * num_tokens * (Hq + Hk) * head_dim * sizeof(T) bytes (read + write).
#include <algorithm>

#include "core/cuda/pdl.cuh"
#include "ops/cuda_elements.cuh"
#include "ops/cuda_launch.cuh"
#include "ops/rope/rope_cuda.h"

namespace fp8kit::ops {
namespace {

using namespace cuda_launch;
using elements::narrow;
using elements::widen;

constexpr int kThreads = 128;

// The kernel's copy of the args: the frequencies by value (host memory in RopeArgs).
struct RopeParams {
  int64_t num_tokens, head_dim, rotary_dim;
  bool is_neox_style;
  float attention_factor;
  const int64_t* positions;
  RopeHeads heads[2];  // q, k (num_heads 0: none)
  float inv_freq[kRopeMaxFrequencies];
};

template <typename T>
__device__ __forceinline__ float rounded(float v) {
  return widen(narrow<T>(v));
}

// Block (x, y) rotates token x (and every gridDim.x-th after it) and slice y of its heads' pairs:
// with few tokens (decode) the heads of one token spread over gridDim.y blocks, each of which
// makes the token's cos/sin itself.
template <typename T>
__global__ void __launch_bounds__(kThreads) apply_rope_kernel(const RopeParams p) {
  cuda::pdl_wait();
  cuda::pdl_allow_dependents();
  __shared__ float cos_sin[2 * kRopeMaxFrequencies];
  const int64_t half = p.rotary_dim / 2;
  const int64_t first = int64_t(blockIdx.y) * kThreads + threadIdx.x, step = int64_t(gridDim.y) * kThreads;
  for (int64_t t = blockIdx.x; t < p.num_tokens; t += gridDim.x) {
    const float position = float(p.positions[t]);  // int64 -> f32, round to nearest (as the host cast)
    for (int64_t i = threadIdx.x; i < half; i += kThreads) {
      const float angle = __fmul_rn(position, p.inv_freq[i]);
      // The cos/sin cache in the model dtype (HF's .to(x.dtype), vLLM's cache).
      cos_sin[i] = rounded<T>(__fmul_rn(float(cos(double(angle))), p.attention_factor));
      cos_sin[kRopeMaxFrequencies + i] = rounded<T>(__fmul_rn(float(sin(double(angle))), p.attention_factor));
    }
    __syncthreads();
    for (int which = 0; which < 2; ++which) {
      const RopeHeads& h = p.heads[which];
      const int64_t pairs = h.num_heads * half;
      for (int64_t j = first; j < pairs; j += step) {
        const int64_t head = j / half, i = j % half;
        const T* in = static_cast<const T*>(h.in) + t * h.in_token_stride + head * h.in_head_stride;
        T* out = static_cast<T*>(h.out) + t * h.out_token_stride + head * h.out_head_stride;
        const int64_t ia = p.is_neox_style ? i : 2 * i;
        const int64_t ib = p.is_neox_style ? i + half : 2 * i + 1;
        const float c = cos_sin[i], s = cos_sin[kRopeMaxFrequencies + i];
        const float x = widen(in[ia]), y = widen(in[ib]);
        const float xa = __fsub_rn(rounded<T>(__fmul_rn(x, c)), rounded<T>(__fmul_rn(y, s)));
        const float xb = __fadd_rn(rounded<T>(__fmul_rn(y, c)), rounded<T>(__fmul_rn(x, s)));
        out[ia] = narrow<T>(xa);
        out[ib] = narrow<T>(xb);
      }
      if (h.out != h.in) {  // out of place: the dims that do not rotate pass through
        const int64_t rest = p.head_dim - p.rotary_dim;
        for (int64_t j = first; j < h.num_heads * rest; j += step) {
          const int64_t head = j / rest, d = p.rotary_dim + j % rest;
          static_cast<T*>(h.out)[t * h.out_token_stride + head * h.out_head_stride + d] =
              static_cast<const T*>(h.in)[t * h.in_token_stride + head * h.in_head_stride + d];
        }
      }
    }
    __syncthreads();  // cos_sin is rewritten for the next token
  }
}

}  // namespace

void apply_rope_cuda(const RopeArgs& a, Stream stream) {
  if (a.num_tokens == 0) return;
  const int64_t half = a.rotary_dim / 2;
  if (half > kRopeMaxFrequencies) {
    throw Error(ErrorCode::kUnsupported, "apply_rope: rotary_dim above the CUDA kernel's limit");
  }
  RopeParams p{};
  p.num_tokens = a.num_tokens;
  p.head_dim = a.head_dim;
  p.rotary_dim = a.rotary_dim;
  p.is_neox_style = a.is_neox_style;
  p.attention_factor = a.attention_factor;
  p.positions = a.positions;
  p.heads[0] = a.q;
  p.heads[1] = a.k;
  for (int64_t i = 0; i < half; ++i) p.inv_freq[i] = a.inv_freq[i];
  const cudaStream_t s = to_cuda(stream);
  // A block per token up to 32 a multiprocessor; fewer tokens than 4 blocks a multiprocessor
  // split their heads' pairs over more blocks (one token of 40 heads of 128: 14.7 us in one block
  // on the H200).
  const int64_t tokens = std::min<int64_t>(a.num_tokens, int64_t(sm_count()) * 32);
  const int64_t pairs = std::max(a.q.num_heads, a.k.num_heads) * half;
  const int64_t most = std::max<int64_t>(1, (pairs + kThreads - 1) / kThreads);
  const int64_t slices = std::clamp<int64_t>(int64_t(sm_count()) * 4 / tokens, 1, most);
  const unsigned grid_x = unsigned(tokens), grid_y = unsigned(slices);
  dispatch_float(a.dtype, [&](auto t) {
    cuda::launch_pdl(apply_rope_kernel<decltype(t)>, dim3(grid_x, grid_y), dim3(kThreads), 0, s, p);
    FP8KIT_CHECK_LAUNCH(s, "apply_rope_kernel");
  });
}

}  // namespace fp8kit::ops
