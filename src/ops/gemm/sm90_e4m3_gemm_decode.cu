// sm90_e4m3_gemm_decode: scaled_mm for M <= 64 (decode) as one stream over the weights, every
// scaling of ScaledMmArgs; sm_89+, tuned for sm_90. Reference: gemm_ref.cpp (same K-block promotion
// and epilogue order). Tests: tests/gpu/test_gemm_decode_cuda.cpp; bench: bench_gemm --m 1,16,64.
// Floor: weight bytes / 4.28 TB/s (copy ceiling), e.g. 6144 x 4096: 5.9 us; 57344 x 8192: 110 us;
// activations, scales and output add under 1% at M <= 16.
//
// Why tensor cores: at M = 16 every weight byte meets 16 tokens. On CUDA cores that is >= 16 FFMA
// plus half a conversion per byte, while an H200 issues 132 SMs x 128 lanes x 1.98 GHz = 33e12
// lane instructions/s, 7.8 per byte at 4.28 TB/s: 2x short. Here a warp spends about 80 warp
// instructions (1.3 lane instructions per byte) on a 2 KB chunk of weights at M = 16.
//
// Why f16 mma and not the e4m3 mma.sync: on sm_90 ptxas lowers mma.sync.m16n8k32.e4m3 to
// F2FP.F16.E4M3.UNPACK_B on both operands plus two HMMA.16816.F32 (only sm_89 has QMMA). This file
// does the same arithmetic with fewer instructions: each weight byte is unpacked once (cvt
// e4m3x2 -> f16x2), the activations once per CTA into shared memory. e4m3 -> f16 is exact, the
// products are exact and accumulate in f32.
//
// Layout. CTA = 4 warps = a 64-row tile of b (N) over a K range of whole 128-wide chunks (grid.y
// splits K). Warp w owns rows [16w, 16w + 16) of the tile; tokens are the mma's n = 8 side, G
// groups of 8. Per chunk, lane (g = lane / 4, t = lane % 4) loads 16 contiguous weight bytes at
// k = 16t and k = 64 + 16t of rows g and g + 8 (ld.global.nc, 16 B, 4 lanes cover 64 contiguous
// bytes of a row per instruction) into a register ring of kStages chunks. The activations come
// through shared memory in slabs: raw bytes by cp.async (zero-filled past M and K), then unpacked
// to f16 in the order the B fragments read them. Block scales are applied per chunk (= K-block);
// per-tensor/per-row scales, bias and the output dtype in the epilogue. With one split the main
// kernel writes y; otherwise it writes f32 partials [split, M, N] that sm90_e4m3_gemm_decode_reduce
// sums in split order (deterministic, no atomics).
//
// Fragments of mma.sync.m16n8k16.row.col.f32.f16.f16.f32 (PTX ISA; CUTLASS SM80_16x8x16 traits),
// each register two f16 of consecutive k:
//   A (16 x 16): a0 = (row g, k 2t..2t+1)  a1 = (row g+8, k 2t..)  a2 = (row g, k 8+2t..)  a3 = (row g+8, k 8+2t..)
//   B (16 x 8):  b0 = (k 2t..2t+1, col g)  b1 = (k 8+2t.., col g)
//   C (16 x 8):  c0 = (row g, col 2t)  c1 = (row g, col 2t+1)  c2 = (row g+8, col 2t)  c3 = (row g+8, col 2t+1)
// A dot product does not change when one permutation of k is applied to both operands, so the
// 128 k of a chunk are dealt out as the loads fall. unpack() turns 16 bytes into 8 words, word i
// from bytes 2i, 2i+1; piece p of lane t is the 16 bytes at 64p + 16t. For mma step j = 4p + q
// (q = 0..3) the lane passes
//   a0 = word 2q of row g's piece p      a2 = word 2q+1 of row g's piece p
//   a1 = word 2q of row g+8's piece p    a3 = word 2q+1 of row g+8's piece p
//   b0 = word 2q of token g's piece p    b1 = word 2q+1 of token g's piece p   (same unpack())
// so mma k 2t+h is chunk k 64p + 16t + 4q + h and mma k 8+2t+h is 64p + 16t + 4q + 2 + h on both
// sides (h = 0, 1, whichever half unpack() puts a byte in, it does the same on both sides); over
// t, q, p and h these are the 128 k of the chunk, each once.
#include "ops/gemm/sm90_e4m3_gemm_decode.h"

#include <algorithm>

#include "core/cuda/async_copy.cuh"
#include "core/cuda/cuda_check.h"
#include "fp8kit/half.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {
namespace {

constexpr int kThreads = kDecodeWarps * 32;
constexpr int kChunkK = int(kDecodeChunkK);
static_assert(kDecodeTileN == 16 * kDecodeWarps && kChunkK == 128, "one 16-row slice per warp, 128-k chunks");

template <int G>
struct DecodeTraits {
  static constexpr int kRows = 8 * G;                     // token rows in shared memory (M padded)
  static constexpr int kSlabK = 8192 / kRows;             // activation slab: 8 KiB of e4m3
  static constexpr int kSlabChunks = kSlabK / kChunkK;    // 8, 4, 2, 1
  static constexpr int kRawStride = kSlabK + 64;          // rows 64 B apart in the banks: conflict-free unpack reads
  static constexpr int kStages = kDecodeStages;           // weight chunks in registers, 2 in flight
  static constexpr int kPieces = kSlabChunks * 2 * G;     // 1 KiB blocks of unpacked B fragments per slab
  static constexpr int kMinBlocks = decode_ctas_per_sm(G);
};

struct DecodeLaunch {
  int64_t chunks = 0, chunks_per_split = 0;
  int splits = 1;
  float* workspace = nullptr;  // [splits, M, N] when splits > 1
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// Weights are read once: keep them out of L1.
__device__ __forceinline__ uint4 ld_stream(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 16 (or 4) bytes global -> shared; `valid` false writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}

// 4 e4m3 -> 2 f16x2 words: bytes 0, 1 -> .x and bytes 2, 3 -> .y. Weights and activations both
// go through it, which is what ties their k order together (see the header).
__device__ __forceinline__ uint2 unpack4(uint32_t raw) {
  uint2 out;
  asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %2;\n\tcvt.rn.f16x2.e4m3x2 %0, lo;\n\tcvt.rn.f16x2.e4m3x2 %1, hi;\n\t}\n"
      : "=r"(out.x), "=r"(out.y)
      : "r"(raw));
  return out;
}

__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float load_bias(const ScaledMmArgs& a, int64_t j) {
  if (a.bias == nullptr) return 0.0f;
  switch (a.out_dtype) {
    case DType::kBF16: return bf16_to_float(static_cast<const BFloat16*>(a.bias)[j]);
    case DType::kF16: return f16_to_float(static_cast<const Float16*>(a.bias)[j]);
    default: return static_cast<const float*>(a.bias)[j];
  }
}

// y[i, j] from the f32 sum over K: the reference's epilogue, rounding step for rounding step.
__device__ __forceinline__ void finish(const ScaledMmArgs& a, int64_t i, int64_t j, float acc) {
  float y;
  if (a.scale_a_kind == ScaleKind::kBlock) {
    y = __fadd_rn(acc, load_bias(a, j));
  } else {
    const float sa = a.scale_a_kind == ScaleKind::kTensor ? a.scale_a[0] : a.scale_a[i];
    const float sb = a.scale_b_kind == ScaleKind::kTensor ? a.scale_b[0] : a.scale_b[j];
    y = __fmaf_rn(sa, __fmul_rn(sb, acc), load_bias(a, j));
  }
  switch (a.out_dtype) {
    case DType::kBF16: static_cast<BFloat16*>(a.out)[i * a.ldc + j] = float_to_bf16(y); break;
    case DType::kF16: static_cast<Float16*>(a.out)[i * a.ldc + j] = float_to_f16(y); break;
    default: static_cast<float*>(a.out)[i * a.ldc + j] = y; break;
  }
}

template <int G, bool kBlock>
__global__ void __launch_bounds__(kThreads, DecodeTraits<G>::kMinBlocks)
    sm90_e4m3_gemm_decode(const ScaledMmArgs args, const DecodeLaunch launch) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  using T = DecodeTraits<G>;
  constexpr int S = T::kStages;
  __shared__ __align__(16) uint8_t raw[T::kRows * T::kRawStride];  // [token][k] e4m3 of the next slab
  __shared__ uint4 act[T::kPieces * 64];  // [chunk][piece p][group][half][lane] 16 B of f16: B fragments
  // Block scales of the slab, copied in with it and moved to cur_* when it is unpacked.
  constexpr int kSa = kBlock ? T::kSlabChunks * T::kRows : 1, kSb = kBlock ? T::kSlabChunks * kDecodeTileN : 1;
  __shared__ __align__(16) float raw_sa[kSa], cur_sa[kSa];  // [chunk][token]
  __shared__ __align__(16) float raw_sb[kSb], cur_sb[kSb];  // [chunk][row of the tile]

  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int64_t m = args.m, n = args.n;
  const int m_rows = int(m), active_groups = (m_rows + 7) / 8;
  const int64_t chunk_begin = int64_t(blockIdx.y) * launch.chunks_per_split;
  const int num_chunks = int(min(launch.chunks_per_split, launch.chunks - chunk_begin));
  const int64_t k_begin = chunk_begin * kChunkK, k_end = min(args.k, (chunk_begin + num_chunks) * kChunkK);
  const int num_slabs = (num_chunks + T::kSlabChunks - 1) / T::kSlabChunks;
  const int64_t tile_row0 = int64_t(blockIdx.x) * kDecodeTileN;

  // Slab `slab` of a (and its block scales) -> raw, raw_sa; coalesced 16-byte pieces along K.
  auto issue_slab = [&](int slab) {
    const int64_t k0 = k_begin + int64_t(slab) * T::kSlabK;
    const int left = int(k_end - k0);  // > 0; a split spans < 2^31 bytes of K
    const uint8_t* a0 = args.a + k0;
    constexpr int kRowPieces = T::kSlabK / 16;
    static_assert(T::kRows * kRowPieces % kThreads == 0 && T::kSlabChunks * T::kRows <= kThreads);
#pragma unroll
    for (int i = 0; i < T::kRows * kRowPieces / kThreads; ++i) {
      const int e = tid + i * kThreads, r = e / kRowPieces, q = e % kRowPieces;
      const bool valid = r < m_rows && 16 * q < left;  // K % 16 == 0: a piece is all in or all out
      cp_async16(raw + r * T::kRawStride + 16 * q, valid ? a0 + r * args.lda + 16 * q : args.a, valid);
    }
    if constexpr (kBlock) {
      const int64_t kb0 = chunk_begin + int64_t(slab) * T::kSlabChunks;
      if (tid < kSa) {
        const int c = tid / T::kRows, r = tid % T::kRows;
        const int64_t kb = kb0 + c;
        const bool valid = r < m_rows && c < num_chunks - slab * T::kSlabChunks;
        cp_async4(raw_sa + tid, valid ? args.scale_a + r * args.sa_row_stride + kb * args.sa_group_stride : args.scale_a,
                  valid);
      }
#pragma unroll
      for (int i = 0; i < (kSb + kThreads - 1) / kThreads; ++i) {
        const int e = tid + i * kThreads;
        const int c = e / int(kDecodeTileN);
        const int64_t row = tile_row0 + e % int(kDecodeTileN), kb = kb0 + c;
        const bool valid = e < kSb && row < n && c < num_chunks - slab * T::kSlabChunks;
        const float* src = valid ? args.scale_b + (row / args.block_n) * args.sb_row_stride + kb * args.sb_group_stride
                                 : args.scale_b;
        if (e < kSb) cp_async4(raw_sb + e, src, valid);
      }
    }
    cuda::cp_async_commit();
  };

  // raw -> act: lane (g, t) of a warp unpacks exactly the piece that lane (g, t) reads as B.
  auto unpack_slab = [&]() {
    static_assert(T::kPieces % kDecodeWarps == 0);
#pragma unroll
    for (int i = 0; i < T::kPieces / kDecodeWarps; ++i) {
      const int blk = warp + i * kDecodeWarps;
      const int c = blk / (2 * G), p = (blk / G) % 2, nb = blk % G;
      const int r = 8 * nb + g, q = 8 * c + 4 * p + t;
      const uint4 v = *reinterpret_cast<const uint4*>(raw + r * T::kRawStride + 16 * q);
      const uint2 w0 = unpack4(v.x), w1 = unpack4(v.y), w2 = unpack4(v.z), w3 = unpack4(v.w);
      act[blk * 64 + lane] = make_uint4(w0.x, w0.y, w1.x, w1.y);
      act[blk * 64 + 32 + lane] = make_uint4(w2.x, w2.y, w3.x, w3.y);
    }
    if constexpr (kBlock) {
      if (tid < kSa) cur_sa[tid] = raw_sa[tid];
#pragma unroll
      for (int i = 0; i < (kSb + kThreads - 1) / kThreads; ++i) {
        if (tid + i * kThreads < kSb) cur_sb[tid + i * kThreads] = raw_sb[tid + i * kThreads];
      }
    }
  };

  // Rows past N read row N - 1 (never stored); warps wholly past N skip the stream but keep
  // to the CTA's barriers.
  const int64_t row0 = tile_row0 + 16 * warp;
  const bool warp_active = row0 < n;
  const int64_t r_lo = min(row0 + g, n - 1), r_hi = min(row0 + g + 8, n - 1);
  const uint8_t* w_lo = args.b + r_lo * args.ldb + k_begin + 16 * t;
  const uint8_t* w_hi = args.b + r_hi * args.ldb + k_begin + 16 * t;

  // Chunk c of rows g and g + 8: pieces {g p0, g p1, g+8 p0, g+8 p1}; zeros past K.
  auto load_chunk = [&](int c, uint4 (&w)[4]) {
    const int off = c * kChunkK, left = int(k_end - k_begin) - off;  // a split spans < 2^31 bytes of K
    const uint4 zero = make_uint4(0, 0, 0, 0);
    w[0] = 16 * t < left ? ld_stream(w_lo + off) : zero;
    w[1] = 64 + 16 * t < left ? ld_stream(w_lo + off + 64) : zero;
    w[2] = 16 * t < left ? ld_stream(w_hi + off) : zero;
    w[3] = 64 + 16 * t < left ? ld_stream(w_hi + off + 64) : zero;
  };

  float acc[G][4];
#pragma unroll
  for (int nb = 0; nb < G; ++nb) acc[nb][0] = acc[nb][1] = acc[nb][2] = acc[nb][3] = 0.0f;

  // One chunk (slab chunk cs) into f32 partials, then promoted into acc as the reference orders it.
  auto compute_chunk = [&](const uint4 (&w)[4], int cs) {
    float part[G][4];
#pragma unroll
    for (int nb = 0; nb < G; ++nb) part[nb][0] = part[nb][1] = part[nb][2] = part[nb][3] = 0.0f;
    // Every weight word is unpacked once. With few groups the B fragments of all groups stay in
    // registers and the weights are unpacked one word (two mma steps' worth) at a time; with
    // many, a whole piece is unpacked and the groups' B fragments come one after another.
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const uint32_t w_g[4] = {w[p].x, w[p].y, w[p].z, w[p].w}, w_g8[4] = {w[2 + p].x, w[2 + p].y, w[2 + p].z, w[2 + p].w};
      if constexpr (G <= 2) {
        uint4 b[G][2];
#pragma unroll
        for (int nb = 0; nb < G; ++nb) {
          if (nb < active_groups) {
            const uint4* blk = act + ((cs * 2 + p) * G + nb) * 64;
            b[nb][0] = blk[lane];
            b[nb][1] = blk[32 + lane];
          }
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const uint2 lo = unpack4(w_g[q]), hi = unpack4(w_g8[q]);  // words 2q, 2q + 1 of the pieces
#pragma unroll
          for (int nb = 0; nb < G; ++nb) {
            if (nb < active_groups) {
              const uint4& bq = b[nb][q / 2];
              mma_16816(part[nb], lo.x, hi.x, lo.y, hi.y, q % 2 == 0 ? bq.x : bq.z, q % 2 == 0 ? bq.y : bq.w);
            }
          }
        }
      } else {
        uint2 lo[4], hi[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          lo[q] = unpack4(w_g[q]);
          hi[q] = unpack4(w_g8[q]);
        }
#pragma unroll
        for (int nb = 0; nb < G; ++nb) {
          if (nb < active_groups) {
            const uint4* blk = act + ((cs * 2 + p) * G + nb) * 64;
            const uint4 v0 = blk[lane], v1 = blk[32 + lane];
            mma_16816(part[nb], lo[0].x, hi[0].x, lo[0].y, hi[0].y, v0.x, v0.y);
            mma_16816(part[nb], lo[1].x, hi[1].x, lo[1].y, hi[1].y, v0.z, v0.w);
            mma_16816(part[nb], lo[2].x, hi[2].x, lo[2].y, hi[2].y, v1.x, v1.y);
            mma_16816(part[nb], lo[3].x, hi[3].x, lo[3].y, hi[3].y, v1.z, v1.w);
          }
        }
      }
    }
#pragma unroll
    for (int nb = 0; nb < G; ++nb) {
      if (nb < active_groups) {
        if constexpr (kBlock) {
          // acc += (partial * sa[token, kb]) * sb[row / block_n, kb]
          const float2 sa = *reinterpret_cast<const float2*>(cur_sa + cs * T::kRows + 8 * nb + 2 * t);
          const float sb[2] = {cur_sb[cs * kDecodeTileN + 16 * warp + g], cur_sb[cs * kDecodeTileN + 16 * warp + g + 8]};
          acc[nb][0] = __fadd_rn(acc[nb][0], __fmul_rn(__fmul_rn(part[nb][0], sa.x), sb[0]));
          acc[nb][1] = __fadd_rn(acc[nb][1], __fmul_rn(__fmul_rn(part[nb][1], sa.y), sb[0]));
          acc[nb][2] = __fadd_rn(acc[nb][2], __fmul_rn(__fmul_rn(part[nb][2], sa.x), sb[1]));
          acc[nb][3] = __fadd_rn(acc[nb][3], __fmul_rn(__fmul_rn(part[nb][3], sa.y), sb[1]));
        } else {
          // Promoting every 128 k keeps the tensor cores' own accumulation short.
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[nb][i] = __fadd_rn(acc[nb][i], part[nb][i]);
        }
      }
    }
  };

  uint4 w[S][4];
  issue_slab(0);
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (warp_active && s < num_chunks) load_chunk(s, w[s]);
  }
  // Chunk c sits in ring slot c % S; c0 steps by S so that every slot index is a constant.
  for (int c0 = 0; c0 < num_chunks; c0 += S) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int c = c0 + s;
      if (c < num_chunks) {
        if (warp_active && c + S - 1 < num_chunks) load_chunk(c + S - 1, w[(s + S - 1) % S]);
        if (c % T::kSlabChunks == 0) {  // the same c in every thread: the barriers are uniform
          const int slab = c / T::kSlabChunks;
          cuda::cp_async_wait_group<0>();
          __syncthreads();  // slab landed everywhere; every warp is done with the previous act
          unpack_slab();
          __syncthreads();  // act ready; raw free again
          if (slab + 1 < num_slabs) issue_slab(slab + 1);
        }
        if (warp_active) compute_chunk(w[s], c % T::kSlabChunks);
      }
    }
  }
  if (!warp_active) return;

  // acc[nb][i] is (row g + 8 (i / 2), token 8 nb + 2t + i % 2).
#pragma unroll
  for (int nb = 0; nb < G; ++nb) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = row0 + g + 8 * (i / 2), token = 8 * nb + 2 * t + i % 2;
      if (nb < active_groups && row < n && token < m) {
        if (launch.splits == 1) {
          finish(args, token, row, acc[nb][i]);
        } else {
          launch.workspace[(int64_t(blockIdx.y) * m + token) * n + row] = acc[nb][i];
        }
      }
    }
  }
#else
  __trap();  // decode_rejects() keeps sm < 89 away
#endif
}

// y = epilogue(sum of the splits' partials in split order).
__global__ void sm90_e4m3_gemm_decode_reduce(const ScaledMmArgs args, const float* workspace, int splits) {
  const int64_t total = args.m * args.n;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    float acc = workspace[e];
    for (int s = 1; s < splits; ++s) acc = __fadd_rn(acc, workspace[s * total + e]);
    finish(args, e / args.n, e % args.n, acc);
  }
}

template <int G>
void launch_groups(const ScaledMmArgs& args, const DecodeGemmPlan& plan, const DecodeLaunch& launch, cudaStream_t s) {
  const dim3 grid(unsigned(plan.n_tiles), unsigned(plan.splits));
  if (args.scale_a_kind == ScaleKind::kBlock) {
    sm90_e4m3_gemm_decode<G, true><<<grid, kThreads, 0, s>>>(args, launch);
  } else {
    sm90_e4m3_gemm_decode<G, false><<<grid, kThreads, 0, s>>>(args, launch);
  }
}

}  // namespace

void sm90_e4m3_gemm_decode(const ScaledMmArgs& args, const DecodeGemmPlan& plan, cudaStream_t stream) {
  DecodeLaunch launch;
  launch.chunks = plan.chunks;
  launch.chunks_per_split = plan.chunks_per_split;
  launch.splits = int(plan.splits);
  Tensor workspace;
  if (plan.splits > 1) {
    int device = 0;
    FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
    workspace = Tensor::empty({plan.splits, args.m, args.n}, DType::kF32, Device::cuda(device));
    launch.workspace = static_cast<float*>(workspace.data_ptr());
  }
  switch (plan.token_groups) {
    case 1: launch_groups<1>(args, plan, launch, stream); break;
    case 2: launch_groups<2>(args, plan, launch, stream); break;
    case 4: launch_groups<4>(args, plan, launch, stream); break;
    default: launch_groups<8>(args, plan, launch, stream); break;
  }
  FP8KIT_CHECK_LAUNCH(stream, "sm90_e4m3_gemm_decode");
  if (plan.splits > 1) {
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((args.m * args.n + threads - 1) / threads, 4096);
    sm90_e4m3_gemm_decode_reduce<<<unsigned(blocks), threads, 0, stream>>>(args, launch.workspace, launch.splits);
    FP8KIT_CHECK_LAUNCH(stream, "sm90_e4m3_gemm_decode_reduce");
  }
}

}  // namespace fp8kit::ops
