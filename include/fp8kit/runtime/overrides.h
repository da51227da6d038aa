// Overrides: every FP8KIT_* knob of fp8kit's kernels, parsed once into one struct (at context
// creation, or by the CLI at start-up) and then passed down: no op reads the environment on a
// call. Tests and benchmarks set the fields directly. Each field names its variable; the README's
// environment table documents them. Defaults are fp8kit's own choices (cost models, vLLM's
// constants), so a default-constructed Overrides is "nothing overridden".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fp8kit {

// Which backend serves scaled_mm on CUDA (kAuto: the plan's cost model).
enum class GemmBackendOverride : uint8_t { kAuto, kDecode, kWgmma, kCublasLt, kFallback };
// weight_only_mm on CUDA: the CUDA-core kernels only, or the tiled tensor-core kernel at every M.
enum class WeightOnlyGemmOverride : uint8_t { kAuto, kCudaCore, kTiled };
// The grouped GEMM of fused_experts on CUDA: mma.sync or CUDA cores instead of the default.
enum class MoeGemmOverride : uint8_t { kAuto, kMma, kSimt };
// paged_attention on CUDA: the CUDA-core or the mma.sync kernel instead of the plan's choice.
enum class AttentionKernelOverride : uint8_t { kAuto, kSimt, kMma };
// Which CPU implementation serves the ops: the exact reference (the executable spec) or the fast
// vectorized backend (kAuto: the fast one where it serves the problem).
enum class CpuBackend : uint8_t { kAuto, kReference, kFast };

struct Overrides {
  // --- CPU ---------------------------------------------------------------------------------
  // FP8KIT_NUM_THREADS: CPU threads of the ops, 1 to max(64, 4 per hardware thread) but at most
  // 1024 (0: every hardware thread); the size of the process's thread pool.
  int num_threads = 0;
  // FP8KIT_PIN_THREADS=0: leave the pool's workers to the OS scheduler. By default each runs on
  // one CPU of the process's affinity mask when the mask has a CPU for every thread (several
  // processes that each use all CPUs at once run better unpinned).
  bool pin_threads = true;
  CpuBackend cpu_backend = CpuBackend::kAuto;  // FP8KIT_CPU_BACKEND=reference|fast

  // --- CUDA launches (process-wide: read from process_overrides() by the launch code) --------
  bool debug_sync = false;  // FP8KIT_DEBUG_SYNC=1: synchronize after every launch
  bool pdl = true;          // FP8KIT_PDL=0: no programmatic dependent launch

  // --- scaled_mm / weight_only_mm (CUDA) -------------------------------------------------------
  GemmBackendOverride gemm_backend = GemmBackendOverride::kAuto;  // FP8KIT_GEMM_BACKEND
  int decode_k_splits = 0;  // FP8KIT_DECODE_K_SPLITS: 1..64 (0: the decode kernel's cost model)
  WeightOnlyGemmOverride weight_only_gemm = WeightOnlyGemmOverride::kAuto;  // FP8KIT_WEIGHT_ONLY_GEMM
  // FP8KIT_FORCE_WEIGHT_ONLY=1: FP8 linear and MoE layers take the weight-only (W8A16) path, as GPUs
  // without FP8 tensor cores do (vLLM's VLLM_TEST_FORCE_FP8_MARLIN); read when a layer is created.
  bool force_weight_only = false;

  // --- fused_experts ----------------------------------------------------------------------------
  int64_t fused_moe_chunk_size = 32768;  // FP8KIT_FUSED_MOE_CHUNK_SIZE (vLLM's default)
  MoeGemmOverride moe_gemm = MoeGemmOverride::kAuto;  // FP8KIT_MOE_GEMM=mma|simt
  int moe_block_m = 0;           // FP8KIT_MOE_BLOCK_M: 16, 64 or 128 (0: from tokens per expert)
  bool moe_fast_accum = false;   // FP8KIT_MOE_FAST_ACCUM=1
  int moe_k_splits = 0;          // FP8KIT_MOE_K_SPLITS: 1..64 (0: the plan's choice)

  // --- paged_attention (CUDA) ------------------------------------------------------------------
  AttentionKernelOverride attention_kernel = AttentionKernelOverride::kAuto;  // FP8KIT_ATTENTION_KERNEL=simt|mma
  int attention_splits = 0;  // FP8KIT_ATTENTION_SPLITS: 1..64 key splits per item (0: the plan's choice)

  // --- attention scales (--calculate-kv-scales: scale = max|x| / constant) ----------------------
  int q_scale_constant = 200;  // FP8KIT_Q_SCALE_CONSTANT (vLLM's Q_SCALE_CONSTANT)
  int k_scale_constant = 200;  // FP8KIT_K_SCALE_CONSTANT
  int v_scale_constant = 100;  // FP8KIT_V_SCALE_CONSTANT

  // Parses every knob from `lookup(variable)` (nullptr or "": unset, the default stays). A bad
  // value is Error(kInvalidArgument) naming the variable, the value and what it accepts.
  static Overrides parse(const std::function<const char*(const char*)>& lookup);
  // parse() of the process environment.
  static Overrides from_environment();
};

// The overrides of the process: parsed from the environment on first use (an error there is
// thrown at that first use), or installed by set_process_overrides (the CLI does, after its
// flags). What code without a context reads: the thread pool's size, the CUDA launch checks.
const Overrides& process_overrides();
void set_process_overrides(const Overrides& overrides);

// The names of the variables parse() reads, for documentation checks and diagnostics.
const std::vector<std::string>& override_variable_names();

}  // namespace fp8kit
