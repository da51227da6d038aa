// paged_attention on 16-bit tensor cores (the plan's kMma; mma.sync m16n8k16, f32 accumulators,
// sm_80+), FlashAttention-2 style: an item's rows (16 per warp, packed (token, group head) rows of
// one KV head) against tiles of 64 keys gathered through the block table into shared memory as
// 16-bit values (an FP8 cache widened there to f16, exactly, against q rows scaled into f16's
// range; a 16-bit cache copied with cp.async),
// S = Q K^T and O += P V on tensor cores, the online softmax in f32 registers (base 2).
// Two shapes (attention_plan.h): prefill, 4 warps x 16 rows, each warp all 64 keys of a tile;
// decode, 1 x 16 rows, each of the 4 warps 16 keys of every tile with its own softmax state,
// merged through shared memory at the end (head size 256 only: smaller heads' 8- and 16-row items
// run the streaming decode kernel, attention_mma_decode.cuh). Split items write f32 partials
// (attention_common.cuh).
//
// Numerics against the reference (attention_ref.cpp, kDequantize): q and the raw cache values are
// exact in the 16-bit operands (a bf16 q row with an FP8 cache down to 2^-31 of its largest); the
// logit is f32(q . raw) * (scale * k_scale * log2 e), the output (P^ . raw_v) * v_scale / l where
// P^ = P rounded to the operands' 16-bit type (as P * 2^8 with an FP8 cache) and l sums
// the rounded P^ (so the rounding of P acts as a relative error of each weight, at most 2^-9 for
// bf16, 2^-12 for f16: the tests' bound adds u16 * sum_j p_j |v_jd - o_d|). Rows that do not
// see a key get a weight of exactly 0, so a NaN or inf stored in a key that another row of the
// tile sees reaches them as 0 * NaN (documented in docs/numerics.md); keys outside every row's
// range and slots past seq_len are never read.
// Floor: decode reads each visible key's K and V once per KV head: 2 * sum_r L_r * Hkv * D *
// (1 or 2) bytes over the bandwidth; prefill ~4 * sum_r q_len_r * L_r * H * D FLOP (half if
// causal) over the 16-bit tensor peak.
// Tests: tests/gpu/test_attention_cuda.cpp; benchmark: bench/bench_attention.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "core/cuda/kernel_attributes.h"
#include "ops/attention/attention_common.cuh"
#include "ops/attention/attention_launch.h"
#include "ops/attention/attention_mma_shape.h"
#include "ops/attention/fp8_widen.h"
#include "ops/cuda_launch.cuh"

namespace fp8kit::ops::attention_kernels::mma {

constexpr int kThreads = 128;
constexpr int kTileKeys = kAttentionMmaTileKeys;
constexpr float kLog2e = 1.44269504088896340736f;

struct Bf16 {
  static constexpr bool kIsBf16 = true;
  using Storage = BFloat16;
};
struct F16 {
  static constexpr bool kIsBf16 = false;
  using Storage = Float16;
};

// ---- tensor-core and copy primitives (sm_80+) ------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
#endif
}

// d += a b (row.col, f32 accumulators).
template <typename Tag>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (Tag::kIsBf16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// 16 bytes global -> shared, asynchronously; src_bytes 0 writes zeros (the source is not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
               : "memory");
#endif
}
// 8 bytes, through L1 (cp.async.cg takes 16 only).
__device__ __forceinline__ void cp_async8(void* dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
               : "memory");
#endif
}
// Waits until at most `kPending` of the thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Two f32 as one register of two 16-bit values (x in the low half), rounded to nearest even.
template <typename Tag>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (Tag::kIsBf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}
template <typename Tag>
__device__ __forceinline__ float2 unpack2(uint32_t w) {
  if constexpr (Tag::kIsBf16) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
  }
}

// Bytes 0, 1 of `pair` (FP8) as two 16-bit values of Tag in one register, exactly. sm_89+:
// cvt.rn.f16x2.{e4m3,e5m2}x2 (then through f32 for bf16); before: fp8_widen.h's integer form.
template <typename Tag>
__device__ __forceinline__ uint32_t widen_fp8x2(uint32_t pair, bool e5m2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h;
  const uint16_t in = uint16_t(pair);
  if (e5m2) {
    asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h) : "h"(in));
  } else {
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"(in));
  }
  if constexpr (Tag::kIsBf16) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    return pack2<Bf16>(f.x, f.y);  // exact: every FP8 value is a bf16 value
  } else {
    return h;
  }
#else
  uint32_t lo, hi;
  if constexpr (Tag::kIsBf16) {
    lo = e5m2 ? fp8_widen::e5m2_to_bf16(pair) : fp8_widen::e4m3_to_16<8>(pair);
    hi = e5m2 ? fp8_widen::e5m2_to_bf16(pair >> 8) : fp8_widen::e4m3_to_16<8>(pair >> 8);
  } else {
    lo = e5m2 ? fp8_widen::e5m2_to_f16(pair) : fp8_widen::e4m3_to_16<5>(pair);
    hi = e5m2 ? fp8_widen::e5m2_to_f16(pair >> 8) : fp8_widen::e4m3_to_16<5>(pair >> 8);
  }
  return lo | (hi << 16);
#endif
}

// Bytes 2, 3 of `word` as widen_fp8x2 widens bytes 0, 1: on sm_89+ the cvt reads the register's
// upper half itself (F2FP ... R.H1), where a shift would take an instruction more.
template <typename Tag>
__device__ __forceinline__ uint32_t widen_fp8x2_high(uint32_t word, bool e5m2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (!Tag::kIsBf16) {
    uint32_t h;
    if (e5m2) {
      asm("{.reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e5m2x2 %0, hi;}" : "=r"(h) : "r"(word));
    } else {
      asm("{.reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, hi;}" : "=r"(h) : "r"(word));
    }
    return h;
  }
#endif
  return widen_fp8x2<Tag>(word >> 16, e5m2);
}

// The NaN-propagating max as one FMNMX (max.NaN, sm_80+), where nan_max's compare-and-select takes
// three; the same value up to the sign of a zero maximum, which no exp2(s - m) can tell apart.
__device__ __forceinline__ float fmax_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return nan_max(a, b);
#endif
}

// 2^x on the SFU alone (ex2.approx.ftz: the same MUFU.EX2 that exp2f issues, without exp2f's
// three instructions that keep results below 2^-126 as subnormals: here such a weight is 0,
// against a row maximum's weight of 2^kPShift). 2^-inf = 0, NaN stays NaN.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The base-2 logit of a raw dot (s = capped(raw * scale * k_scale) * log2 e), -inf where the
// row does not see the key.
__device__ __forceinline__ float masked_logit(float raw, bool ok, float softcap, float logit_scale,
                                              float base2_scale) {
  float x;
  if (softcap > 0.0f) {
    x = __fmul_rn(capped(__fmul_rn(raw, logit_scale), softcap), kLog2e);
  } else {
    x = __fmul_rn(raw, base2_scale);
  }
  return ok ? x : kNegInf;
}

// One tile of the online softmax for a lane's two rows (g and g + 8 of its 16), s the tile's
// masked base-2 logits and tile_max this lane's maxima of them: the running max m and sum l
// (this lane's share) and the accumulators rescaled, and P^ = P * 2^kPShift rounded to 16 bits
// as the A operand of P V (l sums the rounded values, so the factor cancels in acc / l).
// lower_only (uniform in the warp): rows 8-15 are padding whose output is never written, and so
// their state is left as it is and their P is zero.
template <typename Tag, int kPShift = 0, int kNt, int kDt>
__device__ __forceinline__ void softmax_tile(const float (&s)[kNt][4], float (&tile_max)[2], float (&m)[2],
                                             float (&l)[2], float (&acc)[kDt][4], uint32_t (&pa)[kNt][2],
                                             bool lower_only = false) {
  float corr[2] = {1.0f, 1.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (h == 1 && lower_only) break;
    tile_max[h] = fmax_nan(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
    tile_max[h] = fmax_nan(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
    const float m_new = fmax_nan(m[h], tile_max[h]);
    corr[h] = m_new == kNegInf ? 1.0f : fast_exp2(m[h] - m_new);
    m[h] = m_new;
    l[h] = __fmul_rn(l[h], corr[h]);
  }
  // Once a row's maximum has settled its factor is 1 (no rescale: x * 1 is x, and NaN != 1 still
  // rescales), and the warp skips its accumulators' multiplies when every row's is.
  if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
    for (int n = 0; n < kDt; ++n) {
      acc[n][0] = __fmul_rn(acc[n][0], corr[0]), acc[n][1] = __fmul_rn(acc[n][1], corr[0]);
      if (!lower_only) acc[n][2] = __fmul_rn(acc[n][2], corr[1]), acc[n][3] = __fmul_rn(acc[n][3], corr[1]);
    }
  }
  // A row that has seen no key yet (m = -inf) subtracts 0, so that its masked logits give
  // 2^-inf = 0 without a test a logit (a NaN logit still gives NaN, and so does inf - inf).
  float m_shifted[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) m_shifted[h] = m[h] == kNegInf ? 0.0f : __fsub_rn(m[h], float(kPShift));
#pragma unroll
  for (int n = 0; n < kNt; ++n) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h == 1 && lower_only) {
        pa[n][1] = 0u;
        break;
      }
      const float p0 = fast_exp2(__fsub_rn(s[n][2 * h], m_shifted[h]));
      const float p1 = fast_exp2(__fsub_rn(s[n][2 * h + 1], m_shifted[h]));
      pa[n][h] = pack2<Tag>(p0, p1);
      const float2 r = unpack2<Tag>(pa[n][h]);
      l[h] = __fadd_rn(l[h], __fadd_rn(r.x, r.y));
    }
  }
}

// Writes element d of output row `row` (t * H + h) from its merged state (m, l, unnormalized acc
// a): the f32 partials of split blockIdx.z, or the normalized output.
template <typename T, int kD>
__device__ __forceinline__ void emit_output(const AttnParams& p, int64_t row, int d, float m_r, float l_r, float a,
                                            float v_scale) {
  const int64_t all_rows = p.num_tokens * p.num_heads;
  if (p.splits > 1) {
    p.partial_acc[(int64_t(blockIdx.z) * all_rows + row) * kD + d] = __fmul_rn(a, v_scale);
    if (d == 0) {
      p.partial_ml[(int64_t(blockIdx.z) * all_rows + row) * 2] = m_r;
      p.partial_ml[(int64_t(blockIdx.z) * all_rows + row) * 2 + 1] = l_r;
    }
  } else {
    const float o = l_r == 0.0f ? 0.0f : __fdiv_rn(__fmul_rn(a, v_scale), l_r);
    static_cast<T*>(p.out)[row * kD + d] = elements::narrow<T>(o);
  }
}

// The merge of 4 warps' softmax states of row r (merge_ml: [warp][16][m, l]): the merged max and
// sum, and each warp's factor for its accumulators (seen: the warp saw a key of the row).
struct MergedRow {
  float m, l, f[4];
  bool seen[4];
};
__device__ __forceinline__ MergedRow merge_four_warps(const float* merge_ml, int r) {
  MergedRow out{kNegInf, 0.0f, {0.0f, 0.0f, 0.0f, 0.0f}, {false, false, false, false}};
#pragma unroll
  for (int w = 0; w < 4; ++w) out.m = nan_max(out.m, merge_ml[(w * 16 + r) * 2]);
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const float mw = merge_ml[(w * 16 + r) * 2];
    if (mw == kNegInf) continue;
    out.seen[w] = true;
    out.f[w] = exp2f(mw - out.m);
    out.l = __fadd_rn(out.l, __fmul_rn(merge_ml[(w * 16 + r) * 2 + 1], out.f[w]));
  }
  return out;
}

// A bf16 row of q goes into f16 operands (FP8 caches) as q * 2^e, e (the row's exponent) placing
// its largest finite |q| in [2^14, 2^15): every bf16 value of the row at least 2^-31 of that
// largest is then exact in f16. Within [-100, 100], so the logit scales times 2^-e stay normal
// floats.
__device__ __forceinline__ int q_row_exponent(uint32_t max_abs_bits) {
  if (max_abs_bits == 0) return 0;
  const int e = 14 - (int(max_abs_bits >> 23) - 127);
  return e < -100 ? -100 : (e > 100 ? 100 : e);
}
// x * 2^e for |e| <= 100, in two exact steps of normal factors.
__device__ __forceinline__ float times_pow2(float x, int e) {
  const int a = e / 2, b = e - e / 2;
  return __fmul_rn(__fmul_rn(x, __int_as_float((a + 127) << 23)), __int_as_float((b + 127) << 23));
}
// Eight bf16 values of a row, whose chunks of 8 lie on kLanes consecutive lanes of the warp (every
// lane calling), as f16 values times 2^e of the row's exponent; returns e. An inf or NaN stays
// one.
template <int kLanes>
__device__ __forceinline__ int bf16_chunk_to_f16_operands(uint16_t (&e)[8]) {
  uint32_t max_abs = 0;  // of the finite values
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t a = (uint32_t(e[k]) << 16) & 0x7fffffffu;
    if (a < 0x7f800000u && a > max_abs) max_abs = a;
  }
#pragma unroll
  for (int x = 1; x < kLanes; x *= 2) max_abs = max(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, x));
  const int q_exp = q_row_exponent(max_abs);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const __half h = __float2half_rn(times_pow2(__uint_as_float(uint32_t(e[k]) << 16), q_exp));
    e[k] = *reinterpret_cast<const uint16_t*>(&h);
  }
  return q_exp;
}

// ---- the kernel ----------------------------------------------------------------------------------

template <int kD>
constexpr int kStages = attention_mma_stages(kD);
template <int kD>
constexpr int kRowElems = kD + 8;  // the padding keeps ldmatrix free of bank conflicts

template <typename Tag, int kD, bool kFp8, int kWarpsM>
__global__ void __launch_bounds__(kThreads, kAttentionMmaCtasPerSm) paged_attention_mma_kernel(const AttnParams p, bool e5m2, bool q_vector) {
  using T = typename Tag::Storage;
  // The tensor cores' operand type: f16 for an FP8 cache (every e4m3 and e5m2 value is an f16
  // value, and one cvt widens two; a bf16 q row is scaled into f16's range, as in the decode
  // kernel), the query's type for a 16-bit cache. P is then rounded as P * 2^8, so that f16 keeps
  // 11 bits of every weight down to 2^-22 (l and the accumulators carry the factor, which the
  // division cancels).
  using MmaTag = std::conditional_t<kFp8, F16, Tag>;
  constexpr int kPShift = kFp8 ? 8 : 0;
  constexpr int kWarpsN = 4 / kWarpsM;
  constexpr int kRows = 16 * kWarpsM;             // rows of the item
  constexpr int kWarpKeys = kTileKeys / kWarpsN;  // keys of a tile one warp takes: 64 or 16
  constexpr int kNt = kWarpKeys / 8;              // S n-tiles per warp
  constexpr int kDt = kD / 8;                     // O n-tiles per warp
  constexpr int kRowE = kRowElems<kD>;
  constexpr int kSt = kStages<kD>;
  cuda::pdl_wait();
  cuda::pdl_allow_dependents();
  if (int(blockIdx.x) >= *p.item_count) return;

  extern __shared__ uint4 smem_raw[];
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem_raw);              // [kRows][kRowE]
  int* flags_s = reinterpret_cast<int*>(q_s + kRows * kRowE);         // [kSt][64]: key readable
  int* q_exp_s = flags_s + kSt * kTileKeys;                            // [kRows]: the rows' q exponents
  uint16_t* tiles = reinterpret_cast<uint16_t*>(q_exp_s + kRows);      // [kSt][2][64][kRowE]
  auto tile = [&](int stage, int which) { return tiles + (stage * 2 + which) * kTileKeys * kRowE; };

  const Item it = resolve_item(p, p.items[blockIdx.x]);
  const int64_t kvh = blockIdx.y;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int g = lane / 4, c = lane % 4;

  // Q rows -> shared memory as 16-bit operands (zeros past the item's rows). A row's kD / 8 chunks
  // of 8 are on kD / 8 consecutive lanes (a whole number of passes of the block), which agree on
  // the row's exponent for an FP8 cache.
  static_assert(kRows * (kD / 8) % kThreads == 0 && kD / 8 <= 32, "a row's chunks on consecutive lanes of one warp");
  for (int i = tid; i < kRows * (kD / 8); i += kThreads) {
    const int r = i / (kD / 8), d0 = (i % (kD / 8)) * 8;
    uint16_t e[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (r < it.rows) {
      const int64_t packed = it.row0 + r;
      const int64_t t = it.q_start + packed / p.group, h = kvh * p.group + packed % p.group;
      const T* src = static_cast<const T*>(p.q) + t * p.q_token_stride + h * p.q_head_stride + d0;
      if (q_vector) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(src));
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) e[2 * k] = uint16_t(w[k]), e[2 * k + 1] = uint16_t(w[k] >> 16);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) e[k] = src[k].bits;
      }
    }
    int q_exp = 0;  // f16 queries (and a 16-bit cache's operands) are used as they are
    if constexpr (kFp8 && Tag::kIsBf16) q_exp = bf16_chunk_to_f16_operands<kD / 8>(e);
    if (i % (kD / 8) == 0) q_exp_s[r] = q_exp;
    *reinterpret_cast<uint4*>(q_s + r * kRowE + d0) =
        make_uint4(e[0] | (uint32_t(e[1]) << 16), e[2] | (uint32_t(e[3]) << 16), e[4] | (uint32_t(e[5]) << 16),
                   e[6] | (uint32_t(e[7]) << 16));
  }

  // This lane's two rows (g and g + 8 of the warp's 16) and the keys each sees.
  KeyRange seen[2];
  bool row_real[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = wm * 16 + g + 8 * h;
    row_real[h] = r < it.rows;
    seen[h] = row_real[h] ? visible_keys(p, it, row_position(p, it, r)) : KeyRange{0, -1};
  }
  const KeyRange keys = split_keys(item_keys(p, it), blockIdx.z, p.splits, kTileKeys);
  const float k_scale = kFp8 ? __ldg(p.kv_scale[0] + kvh * p.kv_scale_stride) : 1.0f;
  const float v_scale = kFp8 ? __ldg(p.kv_scale[1] + kvh * p.kv_scale_stride) : 1.0f;
  // s = capped(raw dot * scale * k_scale), the scales of the lane's rows times 2^-e for their q
  // exponents: raw * 2^e * (scale * 2^-e) rounds exactly as raw * scale.
  __syncthreads();  // q_exp_s
  float logit_scale[2], base2_scale[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float ls = __fmul_rn(p.scale, k_scale);
    const int q_exp = q_exp_s[wm * 16 + g + 8 * h];
    logit_scale[h] = times_pow2(ls, -q_exp);
    base2_scale[h] = times_pow2(__fmul_rn(ls, kLog2e), -q_exp);
  }

  // One tile's K and V: thread t takes key t / 2 and every other 16-byte chunk of its row (from
  // chunk t % 2), so that its block is looked up and its address computed once a tile, and two
  // neighbouring threads read 32 contiguous bytes (a whole sector). FP8 chunks are loaded into
  // registers (`raw`) and widened into the stage by store_fp8; 16-bit ones go by cp.async. Keys
  // past the range or in blocks outside the cache are zeros with flag 0, and `readable` says
  // whether every key of the thread's tile is readable (the barrier after it ANDs them).
  static_assert(kThreads == 2 * kTileKeys, "two threads a key");
  constexpr int kChunkElems = kFp8 ? 16 : 8;
  constexpr int kChunks = kD / kChunkElems / 2;  // per thread, per tensor
  const int my_key = tid / 2, my_half = tid % 2;
  uint4 raw[2][kFp8 ? kChunks : 1];
  bool readable = true;
  const BlockDivider div(p.block_size);
  auto issue_tile = [&](int64_t tile0, int stage) {
    const int64_t j = tile0 + my_key;
    int64_t block = -1;
    if (j <= keys.last) {
      block = __ldg(it.table + div.block(int(j)));
      if (block >= p.num_blocks) block = -1;
    }
    readable = block >= 0;
    const int64_t slot = div.slot(int(j));
    if (my_half == 0) flags_s[stage * kTileKeys + my_key] = readable;
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      // The row's first chunk; the others at constant offsets from it (an unreadable key's
      // addresses stay inside the cache, and nothing is read from them).
      const int64_t at = readable ? block * p.block_stride[which] + slot * p.page_stride[which] + kvh * p.head_stride[which] : 0;
      const int first = my_half * kChunkElems;
      if constexpr (kFp8) {
        const uint4* src = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.cache[which]) + at + first);
#pragma unroll
        for (int i = 0; i < kChunks; ++i) raw[which][i] = readable ? __ldg(src + 2 * i) : make_uint4(0, 0, 0, 0);
      } else {
        const T* src = static_cast<const T*>(p.cache[which]) + at + first;
        uint16_t* dst = tile(stage, which) + my_key * kRowE + first;
#pragma unroll
        for (int i = 0; i < kChunks; ++i) cp_async16(dst + 2 * i * kChunkElems, src + 2 * i * kChunkElems, readable ? 16 : 0);
      }
    }
    if constexpr (!kFp8) cp_async_commit();
  };
  auto store_fp8 = [&](int stage) {
#pragma unroll
    for (int which = 0; which < 2; ++which) {
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        const int col = (my_half + 2 * i) * kChunkElems;
        const uint4 w = raw[which][i];
        const uint32_t words[4] = {w.x, w.y, w.z, w.w};
        uint32_t out[8];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          out[2 * k] = widen_fp8x2<MmaTag>(words[k], e5m2);
          out[2 * k + 1] = widen_fp8x2_high<MmaTag>(words[k], e5m2);
        }
        uint4* dst = reinterpret_cast<uint4*>(tile(stage, which) + my_key * kRowE + col);
        dst[0] = make_uint4(out[0], out[1], out[2], out[3]);
        dst[1] = make_uint4(out[4], out[5], out[6], out[7]);
      }
    }
  };

  float acc[kDt][4];
#pragma unroll
  for (int n = 0; n < kDt; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};  // l: this lane's share of the row sums

  const int64_t num_tiles = keys.last >= keys.first ? (keys.last - keys.first) / kTileKeys + 1 : 0;
  if (num_tiles > 0) {
    issue_tile(keys.first, 0);
    if constexpr (kFp8) store_fp8(0);
    if constexpr (!kFp8) cp_async_wait_all();
  }
  bool tile_readable = __syncthreads_and(readable);  // every key of the current tile
  for (int64_t ti = 0; ti < num_tiles; ++ti) {
    const int64_t tile0 = keys.first + ti * kTileKeys;
    const int stage = kSt == 2 ? int(ti % 2) : 0;
    const bool prefetch = kSt == 2 && ti + 1 < num_tiles;
    if (prefetch) issue_tile(tile0 + kTileKeys, 1 - stage);  // overlaps this tile's math

    // S = Q K^T for the warp's 16 rows and kWarpKeys keys.
    const uint16_t* k_s = tile(stage, 0);
    const uint16_t* v_s = tile(stage, 1);
    float s[kNt][4];
#pragma unroll
    for (int n = 0; n < kNt; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, smem_addr(q_s + (wm * 16 + lane % 16) * kRowE + ks * 16 + (lane / 16) * 8));
#pragma unroll
      for (int n = 0; n < kNt; n += 2) {
        uint32_t b[4];
        const int key = wn * kWarpKeys + n * 8 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(b, smem_addr(k_s + key * kRowE + ks * 16 + ((lane >> 3) & 1) * 8));
        mma16816<MmaTag>(s[n], a, b[0], b[1]);
        mma16816<MmaTag>(s[n + 1], a, b[2], b[3]);
      }
    }
    // Logits (base 2).
    if (p.softcap > 0.0f) {
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[n][e] = __fmul_rn(capped(__fmul_rn(s[n][e], logit_scale[e / 2]), p.softcap), kLog2e);
        }
      }
    } else {
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = __fmul_rn(s[n][e], base2_scale[e / 2]);
      }
    }
    // Masked where a row does not see a key: rows see [first, last] of readable keys. Most
    // tiles of a prefill are seen whole by every row of the warp (all but the diagonal's and
    // the window's edges): they skip the test (padding rows, whose output is never written,
    // count as seeing every key).
    bool sees_tile = true;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sees_tile = sees_tile && (!row_real[h] || (seen[h].first <= tile0 && tile0 + (kTileKeys - 1) <= seen[h].last));
    }
    if (!(tile_readable && __all_sync(0xffffffffu, sees_tile))) {
      int lo[2], hi[2];  // the row's keys of the tile, relative to its first
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        lo[h] = int(max(min(seen[h].first - tile0, int64_t(kTileKeys)), int64_t(-1)));
        hi[h] = int(max(min(seen[h].last - tile0, int64_t(kTileKeys)), int64_t(-1)));
      }
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2;
          const int key = wn * kWarpKeys + n * 8 + 2 * c + (e % 2);
          const bool ok = flags_s[stage * kTileKeys + key] != 0 && key >= lo[h] && key <= hi[h];
          if (!ok) s[n][e] = kNegInf;
        }
      }
    }
    float tile_max[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int n = 0; n < kNt; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmax_nan(tile_max[e / 2], s[n][e]);
    }
    uint32_t pa[kNt][2];
    softmax_tile<MmaTag, kPShift>(s, tile_max, m, l, acc, pa);
    // O += P^ V.
#pragma unroll
    for (int kk = 0; kk < kWarpKeys / 16; ++kk) {
      const uint32_t a[4] = {pa[2 * kk][0], pa[2 * kk][1], pa[2 * kk + 1][0], pa[2 * kk + 1][1]};
#pragma unroll
      for (int n = 0; n < kDt; n += 2) {
        uint32_t b[4];
        const int key = wn * kWarpKeys + kk * 16 + (lane & 15);
        ldmatrix_x4_trans(b, smem_addr(v_s + key * kRowE + n * 8 + (lane >> 4) * 8));
        mma16816<MmaTag>(acc[n], a, b[0], b[1]);
        mma16816<MmaTag>(acc[n + 1], a, b[2], b[3]);
      }
    }
    if constexpr (kFp8) {
      if (prefetch) store_fp8(1 - stage);
    } else {
      if (prefetch) cp_async_wait_all();
    }
    tile_readable = __syncthreads_and(readable);  // the prefetched tile's (two stages)
    if (kSt == 1 && ti + 1 < num_tiles) {  // one stage: the next tile after this one's math
      issue_tile(tile0 + kTileKeys, 0);
      if constexpr (kFp8) store_fp8(0);
      if constexpr (!kFp8) cp_async_wait_all();
      tile_readable = __syncthreads_and(readable);
    }
  }

  // Row sums over the 4 lanes of a row.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = __fadd_rn(l[h], __shfl_xor_sync(0xffffffffu, l[h], 1));
    l[h] = __fadd_rn(l[h], __shfl_xor_sync(0xffffffffu, l[h], 2));
  }
  // Writes row r (of the item) element d from the merged state (m, l, unnormalized acc).
  auto emit = [&](int r, int d, float m_r, float l_r, float a) {
    if (r < it.rows) emit_output<T, kD>(p, out_row(p, it, r, kvh), d, m_r, l_r, a, v_scale);
  };
  if constexpr (kWarpsN == 1) {
#pragma unroll
    for (int n = 0; n < kDt; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        emit(wm * 16 + g + 8 * h, n * 8 + 2 * c + (e % 2), m[h], l[h], acc[n][e]);
      }
    }
  } else {
    // Merge the 4 warps' states of the same 16 rows (the tiles are free after the last barrier).
    float* merge_acc = reinterpret_cast<float*>(tiles);  // [4][16][kD]
    float* merge_ml = merge_acc + 4 * 16 * kD;            // [4][16][2]
#pragma unroll
    for (int n = 0; n < kDt; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        merge_acc[(warp * 16 + g + 8 * (e / 2)) * kD + n * 8 + 2 * c + (e % 2)] = acc[n][e];
      }
    }
    if (c == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        merge_ml[(warp * 16 + g + 8 * h) * 2] = m[h];
        merge_ml[(warp * 16 + g + 8 * h) * 2 + 1] = l[h];
      }
    }
    __syncthreads();
    for (int i = tid; i < 16 * kD; i += kThreads) {
      const int r = i / kD, d = i % kD;
      const MergedRow mg = merge_four_warps(merge_ml, r);
      float a = 0.0f;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        if (mg.seen[w]) a = __fadd_rn(a, __fmul_rn(merge_acc[(w * 16 + r) * kD + d], mg.f[w]));
      }
      emit(r, d, mg.m, mg.l, a);
    }
  }
}

template <typename Tag, int kD, bool kFp8, int kWarpsM>
void launch_instance(const AttnParams& p, const AttentionLaunch& l, cudaStream_t stream) {
  constexpr auto kernel = paged_attention_mma_kernel<Tag, kD, kFp8, kWarpsM>;
  constexpr size_t smem = attention_mma_tile_shared_bytes(kD, kWarpsM);
  cuda::allow_dynamic_smem<kernel>(int(smem));
  const dim3 grid(unsigned(l.items_bound), unsigned(p.num_kv_heads), unsigned(p.splits));
  cuda::launch_pdl(kernel, grid, kThreads, smem, stream, p, l.cache_dtype == KvCacheDtype::kFp8E5M2, l.q_vector);
  FP8KIT_CHECK_LAUNCH(stream, "paged_attention_mma_kernel");
}

}  // namespace fp8kit::ops::attention_kernels::mma
