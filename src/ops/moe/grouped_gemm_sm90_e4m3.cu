// grouped_gemm_sm90_e4m3: the fused MoE's grouped FP8 GEMM (vLLM's Triton fused_moe_kernel, spec
// 1.10) on tensor cores: mma.sync m16n8k32 e4m3 x e4m3 -> f32, sm_89+ (built for sm_90a).
// Reference: expert_gemm_ref (fused_experts_gemm_ref.cpp), same K-block promotion and epilogue
// order; only the f32 accumulation order differs (the reference sums exactly in double).
// Tests: tests/gpu/test_fused_experts_cuda.cpp; bench: bench/bench_moe.cpp.
// Floor: touched-expert weight bytes / 4.3 TB/s at decode (e.g. Qwen3-30B-A3B M = 1: 8 experts x
// 2 x 1536 x 2048 B -> 5.9 us for GEMM1); 2 * slots * n * k FLOP over the mma.sync FP8 rate at
// prefill (~660 TFLOP/s dense on sm_90: ptxas lowers e4m3 mma.sync to f16 HMMA, see
// src/ops/gemm/sm90_e4m3_gemm_decode.cu). wgmma/TMA is the next step for prefill.
//
// CTA = 4 warps = BM sorted positions (one moe_align block, one expert) x 128 output columns.
// K goes through shared memory in 128-byte tiles, kStages deep, by cp.async (16 B, zero-filled
// past K, for padding rows and past N): A rows are gathered (row = slot / a_slots_per_row), B rows
// are the expert's weight rows. Shared rows are 144 B apart, so ldmatrix's 8 row addresses of a
// phase hit 8 distinct 4-bank groups. Warp tile WM x WN (BM 16: 16 x 32; BM 64: 32 x 64).
//
// Fragments of mma.sync.m16n8k32.row.col.f32.e4m3.e4m3.f32 (PTX ISA, 8-bit m16n8k32), g = lane / 4,
// t = lane % 4, each register four consecutive k (lowest k in the lowest byte):
//   A (16 x 32): a0 = (row g, k 4t..4t+3)  a1 = (row g+8, k 4t..)  a2 = (row g, k 16+4t..)  a3 = (row g+8, k 16+4t..)
//   B (32 x 8):  b0 = (k 4t..4t+3, col g)  b1 = (k 16+4t.., col g)
//   C (16 x 8):  c0 = (row g, col 2t)  c1 = (row g, col 2t+1)  c2 = (row g+8, col 2t)  c3 = (row g+8, col 2t+1)
// ldmatrix.x4 hands lane l word l % 4 of row l / 4 of each 8 x 16-byte matrix, i.e. exactly
// (row g, bytes 4t..4t+3): with A and B both K-major in shared memory, matrix i of an A load is
// (rows 8 (i % 2).., k 16 (i / 2)..) -> a_i, and of a B load (n-tile 2j + i / 2, k 16 (i % 2)..) ->
// b0, b1 of n-tiles 2j and 2j + 1.
//
// Epilogue (the reference's order, every step an explicit f32 rounding):
//   per-tensor: acc (f32 over all K); acc *= w[slot] if routed; acc = (acc * a_scale) * b_scale[e]
//   block:      acc = fma(partial_kb * a_s[row, kb], b_s[e, n / bn, kb], acc) per K block; acc *= w[slot]
// then rounded to the output dtype and stored at row `slot`. Expert -1 stores zeros.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/cuda/async_copy.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_attributes.h"
#include "fp8kit/half.h"
#include "ops/moe/grouped_gemm_cuda.h"

namespace fp8kit::ops {
namespace {

template <int BM>
struct GroupedTraits {
  static constexpr int kBN = 128, kBK = 128, kWarps = 4, kThreads = 32 * kWarps;
  static constexpr int kWarpsM = BM >= 32 ? BM / 32 : 1;
  static constexpr int kWarpsN = kWarps / kWarpsM;
  static constexpr int kWM = BM / kWarpsM, kWN = kBN / kWarpsN;
  static constexpr int kMT = kWM / 16, kNT = kWN / 8;
  static constexpr int kStages = BM == 16 ? 4 : 3;
  static constexpr int kRowBytes = kBK + 16;
  static constexpr int kStageBytes = (BM + kBN) * kRowBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static_assert(kWarpsM * kWarpsN == kWarps && kWM % 16 == 0 && kNT % 2 == 0, "warp tiling");
  static_assert(BM * (kBK / 16) % kThreads == 0 && kBN * (kBK / 16) % kThreads == 0, "cp.async split");
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// 16 bytes global -> shared, L2 only; `valid` false writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Two adjacent outputs (columns n, n + 1 of row `row`; n even, ldc even: 4- or 8-byte aligned).
__device__ __forceinline__ void store_pair(const GroupedGemmArgs& g, int64_t row, int64_t n, float v0, float v1) {
  const int64_t i = row * g.ldc + n;
  switch (g.c_dtype) {
    case DType::kBF16: {
      const uint32_t bits = uint32_t(float_to_bf16(v0).bits) | (uint32_t(float_to_bf16(v1).bits) << 16);
      *reinterpret_cast<uint32_t*>(static_cast<BFloat16*>(g.c) + i) = bits;
      break;
    }
    case DType::kF16: {
      const uint32_t bits = uint32_t(float_to_f16(v0).bits) | (uint32_t(float_to_f16(v1).bits) << 16);
      *reinterpret_cast<uint32_t*>(static_cast<Float16*>(g.c) + i) = bits;
      break;
    }
    default: *reinterpret_cast<float2*>(static_cast<float*>(g.c) + i) = make_float2(v0, v1); break;
  }
}

template <int BM, bool kBlock>
__global__ void __launch_bounds__(GroupedTraits<BM>::kThreads)
    grouped_gemm_sm90_e4m3_kernel(const GroupedGemmArgs g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  using T = GroupedTraits<BM>;
  constexpr int kBN = T::kBN, kBK = T::kBK, kS = T::kStages, kMT = T::kMT, kNT = T::kNT, kRow = T::kRowBytes;
  extern __shared__ __align__(16) uint8_t smem[];  // [stage][BM + kBN][kRow]: A rows, then B rows
  __shared__ int64_t s_row[BM];   // A row of each position, -1 for padding
  __shared__ int64_t s_slot[BM];  // output row of each position, -1 for padding

  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32, lg = lane / 4, lt = lane % 4;
  const int64_t pos0 = int64_t(blockIdx.x) * BM;
  if (pos0 >= int64_t(*g.num_post_pad)) return;  // uniform over the CTA
  const int32_t expert = g.expert_ids[blockIdx.x];  // block_m == BM
  const int64_t n0 = int64_t(blockIdx.y) * kBN;
  for (int r = tid; r < BM; r += T::kThreads) {
    const int64_t slot = g.sorted_ids[pos0 + r];
    const bool valid = slot >= 0 && slot < g.num_slots;
    s_slot[r] = valid ? slot : -1;
    s_row[r] = valid ? slot / g.a_slots_per_row : -1;
  }
  __syncthreads();
  if (expert < 0) {  // an expert of another rank: zero rows
    for (int i = tid; i < BM * kBN; i += T::kThreads) {
      const int r = i / kBN;
      const int64_t n = n0 + i % kBN;
      if (s_slot[r] >= 0 && n < g.n) {
        switch (g.c_dtype) {
          case DType::kBF16: static_cast<BFloat16*>(g.c)[s_slot[r] * g.ldc + n] = BFloat16{0}; break;
          case DType::kF16: static_cast<Float16*>(g.c)[s_slot[r] * g.ldc + n] = Float16{0}; break;
          default: static_cast<float*>(g.c)[s_slot[r] * g.ldc + n] = 0.0f; break;
        }
      }
    }
    return;
  }

  const uint8_t* a_base = static_cast<const uint8_t*>(g.a);
  const uint8_t* b_base = static_cast<const uint8_t*>(g.b) + int64_t(expert) * g.b_expert_stride;
  const int num_k_tiles = int((g.k + kBK - 1) / kBK);

  auto load_stage = [&](int kt, int stage) {
    uint8_t* sa = smem + stage * T::kStageBytes;
    uint8_t* sb = sa + BM * kRow;
    const int64_t k0 = int64_t(kt) * kBK;
#pragma unroll
    for (int i = tid; i < BM * (kBK / 16); i += T::kThreads) {
      const int r = i / (kBK / 16), p = i % (kBK / 16);
      const int64_t kk = k0 + 16 * p;
      const bool valid = s_row[r] >= 0 && kk < g.k;  // k % 16 == 0: a piece is all in or all out
      cp_async16(sa + r * kRow + 16 * p, valid ? a_base + s_row[r] * g.lda + kk : a_base, valid);
    }
#pragma unroll
    for (int i = tid; i < kBN * (kBK / 16); i += T::kThreads) {
      const int r = i / (kBK / 16), p = i % (kBK / 16);
      const int64_t n = n0 + r, kk = k0 + 16 * p;
      const bool valid = n < g.n && kk < g.k;
      cp_async16(sb + r * kRow + 16 * p, valid ? b_base + n * g.ldb + kk : b_base, valid);
    }
  };

  const int wm0 = (warp / T::kWarpsN) * T::kWM, wn0 = (warp % T::kWarpsN) * T::kWN;
  float acc[kMT][kNT][4];
  float part[kBlock ? kMT : 1][kBlock ? kNT : 1][4];  // the current K block's sum (block scales)
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
    }
  }
  if constexpr (kBlock) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) part[mt][nt][i] = 0.0f;
      }
    }
  }
  const int64_t kb_count = kBlock ? (g.k + g.block_k - 1) / g.block_k : 1;
  const int64_t nb_count = kBlock ? (g.n + g.block_n - 1) / g.block_n : 1;
  const int tiles_per_kb = kBlock ? int(g.block_k / kBK) : 1;  // block_k % 128 == 0 (host check)

#pragma unroll
  for (int s = 0; s < kS - 1; ++s) {
    if (s < num_k_tiles) load_stage(s, s);
    cuda::cp_async_commit();
  }
  for (int kt = 0; kt < num_k_tiles; ++kt) {
    cuda::cp_async_wait_group<kS - 2>();
    __syncthreads();  // tile kt landed for every thread; every warp is done with tile kt - 1's slot
    if (kt + kS - 1 < num_k_tiles) load_stage(kt + kS - 1, (kt + kS - 1) % kS);
    cuda::cp_async_commit();

    // Block scales of this tile's K block, fetched before the math when the block ends here.
    const bool promote = kBlock && ((kt + 1) % tiles_per_kb == 0 || kt + 1 == num_k_tiles);
    float sa[kBlock ? kMT : 1][2], sb[kBlock ? kNT : 1][2];
    if constexpr (kBlock) {
      if (promote) {
        const int64_t kb = kt / tiles_per_kb;
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t row = s_row[wm0 + mt * 16 + lg + 8 * h];
            sa[mt][h] = row >= 0 ? __ldg(g.a_scale + row * kb_count + kb) : 0.0f;
          }
        }
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int64_t n = n0 + wn0 + nt * 8 + 2 * lt + j;
            sb[nt][j] = n < g.n ? __ldg(g.b_scale + (int64_t(expert) * nb_count + n / g.block_n) * kb_count + kb) : 0.0f;
          }
        }
      }
    }

    const uint8_t* sa_tile = smem + (kt % kS) * T::kStageBytes;
    const uint8_t* sb_tile = sa_tile + BM * kRow;
#pragma unroll
    for (int ks = 0; ks < kBK / 32; ++ks) {
      uint32_t af[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const int r = wm0 + mt * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
        ldmatrix_x4(af[mt], sa_tile + r * kRow + ks * 32 + 16 * (lane / 16));
      }
      uint32_t bf[kNT][2];
#pragma unroll
      for (int jp = 0; jp < kNT / 2; ++jp) {
        uint32_t r4[4];
        const int r = wn0 + (2 * jp + lane / 16) * 8 + lane % 8;
        ldmatrix_x4(r4, sb_tile + r * kRow + ks * 32 + 16 * ((lane / 8) % 2));
        bf[2 * jp][0] = r4[0];
        bf[2 * jp][1] = r4[1];
        bf[2 * jp + 1][0] = r4[2];
        bf[2 * jp + 1][1] = r4[3];
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          if constexpr (kBlock) {
            mma_e4m3(part[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
          } else {
            mma_e4m3(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
          }
        }
      }
    }

    if constexpr (kBlock) {
      if (promote) {  // acc = fma(partial * a_s[row, kb], b_s[e, n / bn, kb], acc)
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              acc[mt][nt][i] = __fmaf_rn(__fmul_rn(part[mt][nt][i], sa[mt][i / 2]), sb[nt][i % 2], acc[mt][nt][i]);
              part[mt][nt][i] = 0.0f;
            }
          }
        }
      }
    }
  }
  cuda::cp_async_wait_group<0>();  // no copy outlives the CTA

  const float a_scale = kBlock ? 1.0f : g.a_scale[0];
  const float b_scale = kBlock ? 1.0f : g.b_scale[expert];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t slot = s_slot[wm0 + mt * 16 + lg + 8 * h];
      if (slot < 0) continue;
      const float w = g.slot_weight != nullptr ? g.slot_weight[slot] : 1.0f;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int64_t n = n0 + wn0 + nt * 8 + 2 * lt;  // even; n < N implies n + 1 < N (N even)
        if (n >= g.n) continue;
        float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
        if (g.slot_weight != nullptr) {  // before the scales (spec 1.10)
          v0 = __fmul_rn(v0, w);
          v1 = __fmul_rn(v1, w);
        }
        if constexpr (!kBlock) {
          v0 = __fmul_rn(__fmul_rn(v0, a_scale), b_scale);
          v1 = __fmul_rn(__fmul_rn(v1, a_scale), b_scale);
        }
        store_pair(g, slot, n, v0, v1);
      }
    }
  }
#else
  __trap();  // grouped_gemm_sm90_e4m3_rejects keeps sm < 89 away
#endif
}

template <int BM, bool kBlock>
void launch(const GroupedGemmArgs& g, cudaStream_t stream) {
  using T = GroupedTraits<BM>;
  constexpr auto kernel = grouped_gemm_sm90_e4m3_kernel<BM, kBlock>;
  cuda::allow_dynamic_smem<kernel>(T::kSmemBytes);
  const dim3 grid{unsigned(g.grid_m_blocks), unsigned((g.n + T::kBN - 1) / T::kBN)};
  kernel<<<grid, T::kThreads, T::kSmemBytes, stream>>>(g);
  FP8KIT_CHECK_LAUNCH(stream, "grouped_gemm_sm90_e4m3_kernel");
}

template <int BM>
void launch_scaling(const GroupedGemmArgs& g, cudaStream_t stream) {
  if (g.block) {
    launch<BM, true>(g, stream);
  } else {
    launch<BM, false>(g, stream);
  }
}

}  // namespace

std::string grouped_gemm_sm90_e4m3_rejects(const GroupedGemmArgs& g, int device) {
  int major = 0, minor = 0;
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (major * 10 + minor < 89) return "FP8 mma.sync needs sm_89 or newer";
  if (g.quant != ExpertQuant::kFp8W8A8) return "not an FP8 W8A8 GEMM";
  if (g.a_dtype != DType::kE4M3FN || g.b_dtype != DType::kE4M3FN) return "operands are not e4m3fn";
  if (g.block_m != 16 && g.block_m != 64) return "block_m is not 16 or 64";
  if (g.k % 16 != 0 || g.lda % 16 != 0 || g.ldb % 16 != 0 || g.b_expert_stride % 16 != 0) {
    return "K or a row stride is not a multiple of 16 bytes";
  }
  if (!aligned16(g.a) || !aligned16(g.b) || !aligned16(g.c)) return "an operand is not 16-byte aligned";
  if (g.n % 2 != 0 || g.ldc % 2 != 0) return "N or ldc is odd";
  if (g.block && (g.block_k % 128 != 0 || g.block_n <= 0)) return "block_k is not a multiple of 128";
  if ((g.n + 127) / 128 > 65535 || g.grid_m_blocks > 0x7fffffff) return "the grid is too large";
  return {};
}

void grouped_gemm_sm90_e4m3(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (args.grid_m_blocks <= 0 || args.n <= 0) return;
  if (args.block_m == 16) {
    launch_scaling<16>(args, stream);
  } else {
    launch_scaling<64>(args, stream);
  }
}

}  // namespace fp8kit::ops
