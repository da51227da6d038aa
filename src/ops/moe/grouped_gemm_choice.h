// Which grouped GEMM kernel runs a fused MoE GEMM, with which moe_align block size. Pure host
// logic: the device's compute capability and the overrides (Overrides::moe_*) are arguments.
// Used by grouped_gemm_dispatch.cpp (CUDA builds); tests: tests/cpu/test_grouped_gemm_choice.cpp.
#pragma once

#include <cstdint>

#include "fp8kit/runtime/overrides.h"
#include "ops/moe/fused_experts_args.h"

namespace fp8kit::ops {

enum class GroupedKernel {
  kWgmma,  // grouped_gemm_sm90_wgmma.cu: sm_90
  kMma,    // grouped_gemm_sm90_e4m3.cu: FP8 mma.sync, sm_89+
  kSimt,   // grouped_gemm_simt.cu: CUDA cores, every ExpertQuant
  kW8A16,  // weight-only experts on 16-bit tensor cores (ops/gemm/weight_only_tiled.cu), sm_80+
};

// `sm` = 10 * major + minor of the device; `forced` = Overrides::moe_gemm (FP8KIT_MOE_GEMM). FP8 W8A8 takes wgmma on sm_90, mma.sync on other GPUs with FP8 tensor
// cores (sm_89+), CUDA cores below; weight-only experts the tiled 16-bit tensor-core kernel on
// sm_80+ ("simt" keeps CUDA cores); unquantized experts CUDA cores. A forced kernel the device
// lacks falls back the same way.
GroupedKernel choose_grouped_kernel(ExpertQuant quant, int sm, MoeGemmOverride forced);

// The token block for `slots` routed slots over `global_num_experts`; `forced` =
// Overrides::moe_block_m (16, 64 or 128; 0: chosen). On the wgmma kernels a block
// re-reads an expert's weights, and an expert's last block is partly padding; by the tokens an
// expert sees on average: <= 12: 16 (the gathering decode kernel), <= 384: 64, more: 128 (64 and
// 128 take the sorted prefill path where it serves; measured with bench_moe on the H200 for
// Mixtral-8x7B, Qwen3-30B-A3B and DeepSeek-V3 at M = 1..4096: 64 beat 16 from 16 tokens an expert
// and beat 128 up to 256, 128 won from 512). The mma.sync and CUDA-core kernels tile 16 (<= 32)
// or 64; weight-only experts take blocks of 16 (the streaming kernel, one pass over an expert's
// weights a block) up to 16 slots an expert on average, else 128 (the tiled kernel). A forced size
// the kernels cannot tile leaves the GEMMs to CUDA cores.
int64_t choose_grouped_block_m(int64_t slots, int64_t global_num_experts, GroupedKernel kernel, int forced);

// K splits of the wgmma kernel's decode GEMM2 (block_m 16): a grid of `ctas` (token blocks x
// weight tiles, the host's upper bound) that would leave the multiprocessors short of weight
// loads in flight is split in K until it has about 4 CTAs a multiprocessor (two are resident at
// once), each split keeping at least 8 of the `k_tiles` 128-wide K tiles; per-tensor scales
// (`block` false) keep one split (measured no faster). `forced` = Overrides::moe_k_splits (a count
// from 1 to 64, capped at k_tiles, for either scaling; 0: chosen). 1: no split.
int64_t choose_grouped_k_splits(int64_t ctas, int64_t k_tiles, int sms, bool block, int forced);

}  // namespace fp8kit::ops
