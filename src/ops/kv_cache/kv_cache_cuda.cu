// reshape_and_cache_flash on CUDA: the kernel and its launcher (kv_cache_cuda.h). Reference:
// kv_cache_ref.cpp on the same ReshapeAndCacheArgs, bit for bit (the byte is
// encode_satfinite(f32(x) / s), an IEEE division; auto: a bit copy). One thread moves 16 elements
// of one (token, K or V, head) row with 16-byte loads and stores where the rows and the cache
// allow it, else one element. Padding slots (< 0) and slots past the cache write nothing.
// Floor: memory-bound, num_tokens * 2 * Hkv * D * (sizeof(src) + sizeof(cache elem)) bytes over the
// copy bandwidth, e.g. 8192 tokens x 8 heads x 128 of bf16 into fp8: 50 MB -> 11.8 us at 4.27 TB/s.
// Tests: tests/gpu/test_kv_cache_cuda.cpp; benchmark: bench/bench_attention (kv store rows).
#include "core/cuda/pdl.cuh"
#include "ops/cuda_elements.cuh"
#include "ops/cuda_launch.cuh"
#include "ops/kv_cache/kv_cache_codec.cuh"
#include "ops/kv_cache/kv_cache_cuda.h"

namespace fp8kit::ops {
namespace {

using namespace cuda_launch;
using elements::widen;

enum class Store { kCopy, kE4M3, kE5M2 };

constexpr int kThreads = 256;
constexpr int kVec = 16;  // elements per thread on the vector path


// The kernel's view of the args: device pointers and the two cache layouts' strides.
struct StoreParams {
  int64_t num_tokens, num_kv_heads, head_size, block_size, num_slots;
  const void* src[2];  // key, value
  int64_t token_stride[2], head_stride[2];
  void* cache[2];
  int64_t block_stride[2], page_stride[2], cache_head_stride[2];
  const int64_t* slot_mapping;
  const float* scale[2];  // k_scale, v_scale (fp8 only)
  int64_t scale_stride;
};

template <typename T, Store kStore, bool kVector>
__global__ void __launch_bounds__(kThreads) reshape_and_cache_flash_kernel(const StoreParams p) {
  cuda::pdl_wait();
  cuda::pdl_allow_dependents();
  constexpr int kE = kVector ? kVec : 1;
  const int64_t per_row = p.head_size / kE;
  const int64_t total = p.num_tokens * 2 * p.num_kv_heads * per_row;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    int64_t u = i;
    const int64_t c = u % per_row;
    u /= per_row;
    const int64_t h = u % p.num_kv_heads;
    u /= p.num_kv_heads;
    const int kv = int(u % 2);
    const int64_t t = u / 2;
    const int64_t slot = __ldg(p.slot_mapping + t);
    if (slot < 0 || slot >= p.num_slots) continue;  // padding; past the cache: skipped (no way to report)
    const int64_t block = slot / p.block_size, page = slot % p.block_size;
    const T* src = static_cast<const T*>(p.src[kv]) + t * p.token_stride[kv] + h * p.head_stride[kv] + c * kE;
    const int64_t dst =
        block * p.block_stride[kv] + page * p.page_stride[kv] + h * p.cache_head_stride[kv] + c * kE;
    if constexpr (kStore == Store::kCopy) {
      T* out = static_cast<T*>(p.cache[kv]) + dst;
      if constexpr (kVector) {
        constexpr int kWords = kE * int(sizeof(T)) / 16;
#pragma unroll
        for (int w = 0; w < kWords; ++w) reinterpret_cast<uint4*>(out)[w] = __ldg(reinterpret_cast<const uint4*>(src) + w);
      } else {
        *out = *src;
      }
    } else {
      constexpr bool kE5M2 = kStore == Store::kE5M2;
      const float s = __ldg(p.scale[kv] + h * p.scale_stride);
      uint8_t* out = static_cast<uint8_t*>(p.cache[kv]) + dst;
      if constexpr (kVector) {
        // 16 source elements: 32 (16-bit) or 64 (f32) bytes, read as 16-byte vectors.
        constexpr int kWords = kE * int(sizeof(T)) / 16;
        union {
          uint4 v[kWords];
          T e[kE];
        } in;
#pragma unroll
        for (int w = 0; w < kWords; ++w) in.v[w] = __ldg(reinterpret_cast<const uint4*>(src) + w);
        uint32_t code[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          code[q] = kv_codec::encode4<kE5M2>(widen(in.e[4 * q]), widen(in.e[4 * q + 1]), widen(in.e[4 * q + 2]),
                                             widen(in.e[4 * q + 3]), s);
        }
        *reinterpret_cast<uint4*>(out) = make_uint4(code[0], code[1], code[2], code[3]);
      } else {
        *out = uint8_t(kv_codec::encode_pair<kE5M2>(__fdiv_rn(widen(*src), s), 0.0f));
      }
    }
  }
}

template <typename T, Store kStore>
void launch(const StoreParams& p, bool vector, cudaStream_t stream) {
  const int64_t per_row = vector ? p.head_size / kVec : p.head_size;
  const unsigned grid = grid_for(p.num_tokens * 2 * p.num_kv_heads * per_row, kThreads);
  if (vector) {
    cuda::launch_pdl(reshape_and_cache_flash_kernel<T, kStore, true>, grid, kThreads, 0, stream, p);
  } else {
    cuda::launch_pdl(reshape_and_cache_flash_kernel<T, kStore, false>, grid, kThreads, 0, stream, p);
  }
  FP8KIT_CHECK_LAUNCH(stream, "reshape_and_cache_flash_kernel");
}

}  // namespace

void reshape_and_cache_flash_cuda(const ReshapeAndCacheArgs& a, Stream stream) {
  if (a.num_tokens == 0 || a.key_layout.num_kv_heads == 0 || a.key_layout.head_size == 0) return;
  StoreParams p{};
  p.num_tokens = a.num_tokens;
  p.num_kv_heads = a.key_layout.num_kv_heads;
  p.head_size = a.key_layout.head_size;
  p.block_size = a.key_layout.block_size;
  p.num_slots = a.key_layout.num_blocks * a.key_layout.block_size;
  p.src[0] = a.key, p.src[1] = a.value;
  p.token_stride[0] = a.key_token_stride, p.token_stride[1] = a.value_token_stride;
  p.head_stride[0] = a.key_head_stride, p.head_stride[1] = a.value_head_stride;
  p.cache[0] = a.key_cache, p.cache[1] = a.value_cache;
  const PagedCacheLayout* layouts[2] = {&a.key_layout, &a.value_layout};
  for (int kv = 0; kv < 2; ++kv) {
    p.block_stride[kv] = layouts[kv]->block_stride;
    p.page_stride[kv] = layouts[kv]->page_stride;
    p.cache_head_stride[kv] = layouts[kv]->head_stride;
  }
  p.slot_mapping = a.slot_mapping;
  p.scale[0] = a.k_scale, p.scale[1] = a.v_scale;
  p.scale_stride = a.kv_scale_stride;

  const size_t src_size = dtype_size(a.src_dtype);
  const size_t cache_size = a.cache_dtype == KvCacheDtype::kAuto ? src_size : 1;
  bool vector = p.head_size % kVec == 0;
  for (int kv = 0; kv < 2 && vector; ++kv) {
    vector = aligned16(p.src[kv]) && aligned16(p.cache[kv]) &&
             strides_aligned16({p.token_stride[kv], p.head_stride[kv]}, src_size) &&
             strides_aligned16({p.block_stride[kv], p.page_stride[kv], p.cache_head_stride[kv]}, cache_size);
  }
  const cudaStream_t s = to_cuda(stream);
  dispatch_float(a.src_dtype, [&](auto t) {
    using T = decltype(t);
    switch (a.cache_dtype) {
      case KvCacheDtype::kAuto: return launch<T, Store::kCopy>(p, vector, s);
      case KvCacheDtype::kFp8E4M3: return launch<T, Store::kE4M3>(p, vector, s);
      case KvCacheDtype::kFp8E5M2: return launch<T, Store::kE5M2>(p, vector, s);
    }
  });
}

}  // namespace fp8kit::ops
