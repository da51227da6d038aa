// act_quant_kernel: the fused MoE layer's gated activation and FP8 requantization in one pass
// (moe_act_quant_cuda.h). Reference: act_and_mul (activation_math.cuh, the same device math) then
// scaled_fp8_quant / per_token_group_quant (quant_kernels.cuh, the same scale and code steps), so
// the result is the two ops' bits. Tests: tests/gpu/test_moe_act_quant_cuda.cpp.
// Floor: memory-bound. Static and group scales read 2d and write d bytes of codes per row
// (4d + d for bf16 instead of the two ops' 4d + 2d + 2d + d): rows = 40960, d = 2048, bf16:
// 419 MB -> 98 us at 4.3 TB/s. Dynamic per-tensor scales need the whole amax before the first
// code, so y goes through memory once (4d + 2d, then 2d + d).
//
// Each lane takes a run of 16 consecutive columns of one row (the gate's and the up half's 16
// elements in 16-byte loads); a group of 128 columns is 8 adjacent lanes of a warp (d / 16 is a
// multiple of 8, so a warp's lanes 8j .. 8j + 7 hold one group), which reduce its amax by
// shuffles. Runs are counted in 32-bit (the launcher checks) and walked by a grid-stride cursor.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/grid_barrier.cuh"
#include "ops/activation/activation_math.cuh"
#include "ops/moe/moe_act_quant_cuda.h"
#include "ops/quant/quant_launch.cuh"

namespace fp8kit::ops {
namespace {

using namespace kernels;

constexpr int kRun = 16;  // columns per lane step

struct ActQuantParams {
  const void* x;  // [rows, 2d]: gate [0, d), up [d, 2d)
  uint32_t ldx;
  void* y;  // [rows, d] of T (dynamic per-tensor only)
  uint32_t ldy;
  uint8_t* q;
  uint32_t ldq;
  const float* static_scale;  // Pass::kStatic
  float* scale;               // written, or read back by Pass::kFromY
  const int32_t* rows_in_use;
  uint32_t rows, runs_per_row;
  float fp8_max, eps;
  uint32_t* grid_counter;  // Pass::kGrid: blocks past the atomic max, zeroed before
};

enum class Pass : uint8_t {
  kStatic,   // y -> codes with the given scale
  kAmax,     // y -> memory, amax -> scale[0] (atomicMax of fl(amax / fp8_max), zeroed before)
  kFromY,    // y read back -> codes with scale[0]
  kGroup,    // y -> codes and one scale per 128 columns
  kSmall,    // one block: y kept in registers (at most kSmallRuns a thread), amax -> scale[0], codes
  kGrid,     // one wave of blocks: y in registers (kGridRuns a thread), the blocks' atomic max into
             // scale[0], a grid barrier, then the codes (scale[0] and the counter zeroed before)
};

// kSmall's runs a thread: dynamic per-tensor layers of up to 2 * kThreads runs (8,192 elements,
// a decode step's intermediate) take one launch instead of a memset and two.
constexpr int kSmallRuns = 2;
// kGrid's runs a thread: up to one block a multiprocessor (so that every block is resident while
// the others wait at the barrier), i.e. 540,672 elements on 132. One: Qwen3-30B-A3B's M = 16
// took 15.1 us in 6 blocks of four runs a thread, 5.9 us in 24 of one (H200).
constexpr int kGridRuns = 1;

// Rows in use and this thread's first run (row, run within the row) with the grid's step.
struct Cursor {
  uint32_t row, run, step_rows, step_runs, runs_per_row;
  __device__ __forceinline__ Cursor(const ActQuantParams& p) : runs_per_row(p.runs_per_row) {
    const uint32_t first = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
    row = first / runs_per_row;
    run = first % runs_per_row;
    step_rows = step / runs_per_row;
    step_runs = step % runs_per_row;
  }
  __device__ __forceinline__ void next() {
    row += step_rows;
    run += step_runs;
    if (run >= runs_per_row) {
      run -= runs_per_row;
      ++row;
    }
  }
};

__device__ __forceinline__ uint32_t rows_in_use(const ActQuantParams& p) {
  if (p.rows_in_use == nullptr) return p.rows;
  const int32_t used = *p.rows_in_use;
  return used <= 0 ? 0u : min(uint32_t(used), p.rows);
}

template <typename T, bool kSilu>
__device__ __forceinline__ Elems<T, kRun> activation_run(const ActQuantParams& p, uint32_t row, uint32_t col) {
  const T* gate_ptr = static_cast<const T*>(p.x) + (uint64_t(row) * p.ldx + col);
  Elems<T, kRun> gate, up, y;
  gate.load_vectors(gate_ptr);
  up.load_vectors(gate_ptr + p.runs_per_row * kRun);
#pragma unroll
  for (int i = 0; i < Elems<T, kRun>::kWords; ++i) y.w[i] = act_and_mul_x2<T, kSilu>(gate.w[i], up.w[i]);
  return y;
}

template <typename T, typename F, Pass kPass, bool kSilu>
__global__ void __launch_bounds__(kThreads) act_quant_kernel(const ActQuantParams p) {
  cuda::pdl_wait();  // launched by launch_pdl (core/cuda/pdl.cuh)
  cuda::pdl_allow_dependents();
  const uint32_t rows = rows_in_use(p);
  const Fp8Max fp8_max = make_fp8_max<F>(p.fp8_max);
  Cursor c(p);

  if constexpr (kPass == Pass::kGroup) {
    // The warp's first lane decides whether the warp goes on, so that every lane takes part in
    // the shuffles; whole groups lie past the end (rows * runs_per_row is a multiple of 8).
    while (__shfl_sync(0xffffffffu, c.row, 0) < rows) {
      const bool valid = c.row < rows;
      const uint32_t col = c.run * kRun;
      Elems<T, kRun> y;
      if (valid) {
        y = activation_run<T, kSilu>(p, c.row, col);
      } else {
        y.load_elements(static_cast<const T*>(p.x), 0, 0);  // zeros
      }
      const float m = lanes_max_abs<8>(y.absmax());
      if (valid) {
        const float s = divide_by_fp8_max(fmaxf(m, p.eps), fp8_max);  // per_token_group_quant's scale
        if (c.run % 8 == 0) p.scale[uint64_t(c.row) * (p.runs_per_row / 8) + c.run / 8] = s;
        Codes<kRun> q;
        if (s == 0.0f) {
          q.zero();
        } else {
          q = quantize_div<F>(y, make_divisor(s, m), fp8_max);
        }
        q.store_vector(p.q + (uint64_t(c.row) * p.ldq + col));
      }
      c.next();
    }
  } else if constexpr (kPass == Pass::kSmall || kPass == Pass::kGrid) {
    // kAmax then kFromY with y kept in registers instead of going through memory (act.out is not
    // touched). kSmall: one block, whose max is the max over all. kGrid: one launch of at most one
    // block a multiprocessor, launched cooperatively, the blocks' maxima met across a grid barrier
    // (core/cuda/grid_barrier.cuh); the next kernel's blocks start only after all of this grid's
    // pdl_allow_dependents above.
    constexpr int kRuns = kPass == Pass::kSmall ? kSmallRuns : kGridRuns;
    __shared__ uint32_t reduce_buffer[kWarps];
    __shared__ float grid_scale;
    Elems<T, kRun> y[kRuns];
    uint32_t row[kRuns], col[kRuns], m = 0;
#pragma unroll
    for (int j = 0; j < kRuns; ++j, c.next()) {
      row[j] = c.row, col[j] = c.run * kRun;
      if (c.row < rows) {
        y[j] = activation_run<T, kSilu>(p, c.row, col[j]);
        m = max(m, __float_as_uint(y[j].absmax()));
      }
    }
    m = block_max(m, reduce_buffer);
    float s = __fdiv_rn(__uint_as_float(m), p.fp8_max);
    if constexpr (kPass == Pass::kSmall) {
      if (threadIdx.x == 0) *p.scale = s;
    } else {
      if (threadIdx.x == 0) {
        atomicMax(reinterpret_cast<int*>(p.scale), __float_as_int(s));
        cuda::grid_arrive_and_wait(p.grid_counter);
        grid_scale = __uint_as_float(cuda::load_acquire(reinterpret_cast<const uint32_t*>(p.scale)));
      }
      __syncthreads();
      s = grid_scale;
    }
    const float inv = __fdiv_rn(1.0f, s);
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      if (row[j] >= rows) continue;
      Codes<kRun> q;
      if (s == 0.0f) {
        q.zero();
      } else {
        q = quantize_mul<F>(y[j], inv, fp8_max);
      }
      q.store_vector(p.q + (uint64_t(row[j]) * p.ldq + col[j]));
    }
  } else if constexpr (kPass == Pass::kAmax) {
    __shared__ uint32_t reduce_buffer[kWarps];
    uint32_t m = 0;
    for (; c.row < rows; c.next()) {
      const Elems<T, kRun> y = activation_run<T, kSilu>(p, c.row, c.run * kRun);
      y.store(static_cast<T*>(p.y) + (uint64_t(c.row) * p.ldy + c.run * kRun), kRun, true);
      m = max(m, __float_as_uint(y.absmax()));
    }
    m = block_max(m, reduce_buffer);
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(p.scale), __float_as_int(__fdiv_rn(__uint_as_float(m), p.fp8_max)));
  } else {
    // scaled_fp8_quant's per-tensor step: q = cvt(clamp(y * (1 / s))), zero codes for s == 0.
    const float s = kPass == Pass::kStatic ? __ldg(p.static_scale) : *p.scale;
    const float inv = __fdiv_rn(1.0f, s);
    for (; c.row < rows; c.next()) {
      const uint32_t col = c.run * kRun;
      Elems<T, kRun> y;
      if constexpr (kPass == Pass::kFromY) {
        y.load_vectors(static_cast<const T*>(p.y) + (uint64_t(c.row) * p.ldy + col));
      } else {
        y = activation_run<T, kSilu>(p, c.row, col);
      }
      Codes<kRun> q;
      if (s == 0.0f) {
        q.zero();
      } else {
        q = quantize_mul<F>(y, inv, fp8_max);
      }
      q.store_vector(p.q + (uint64_t(c.row) * p.ldq + col));
    }
  }
}

// kGrid's blocks for rows x d, or 0 where they would be more than the multiprocessors.
int64_t grid_blocks(int64_t rows, int64_t d) {
  int device = 0, sms = 0;
  FP8KIT_CUDA_CHECK(cudaGetDevice(&device));
  FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t per_block = int64_t(kGridRuns) * kThreads, blocks = (rows * (d / kRun) + per_block - 1) / per_block;
  return blocks <= sms ? blocks : 0;
}

template <Pass kPass, typename T, typename F, bool kSilu>
void launch_pass(const ActQuantParams& p, cudaStream_t stream) {
  constexpr auto kernel = act_quant_kernel<T, F, kPass, kSilu>;
  const unsigned grid = launch::grid_for<kernel>(int64_t(p.rows) * p.runs_per_row);
  cuda::launch_pdl(kernel, grid, kThreads, 0, stream, p);
  FP8KIT_CHECK_LAUNCH(stream, "act_quant_kernel");
}

template <typename T, typename F, bool kSilu>
void launch_typed(const ActQuantArgs& a, const ActQuantParams& p, cudaStream_t stream) {
  switch (a.scaling) {
    case ActQuantScaling::kStaticTensor:
      return launch_pass<Pass::kStatic, T, F, kSilu>(p, stream);
    case ActQuantScaling::kGroup128:
      return launch_pass<Pass::kGroup, T, F, kSilu>(p, stream);
    case ActQuantScaling::kDynamicTensor:
      if (!act_and_quant_two_pass(p.rows, int64_t(p.runs_per_row) * kRun)) {
        cuda::launch_pdl(act_quant_kernel<T, F, Pass::kSmall, kSilu>, 1, kThreads, 0, stream, p);
        FP8KIT_CHECK_LAUNCH(stream, "act_quant_kernel");
        return;
      }
      if (const int64_t blocks = grid_blocks(p.rows, int64_t(p.runs_per_row) * kRun); a.scale_zeroed && a.grid_counter != nullptr && blocks > 0) {
        cuda::launch_cooperative(act_quant_kernel<T, F, Pass::kGrid, kSilu>, unsigned(blocks), kThreads, 0, stream, p);
        FP8KIT_CHECK_LAUNCH(stream, "act_quant_kernel");
        return;
      }
      if (!a.scale_zeroed) FP8KIT_CUDA_CHECK(cudaMemsetAsync(a.scale, 0, sizeof(float), stream));
      launch_pass<Pass::kAmax, T, F, kSilu>(p, stream);
      return launch_pass<Pass::kFromY, T, F, false>(p, stream);
  }
}

}  // namespace

bool act_and_quant_two_pass(int64_t rows, int64_t d) {
  return rows * (d / kRun) > int64_t(kSmallRuns) * kThreads;
}

bool act_and_quant_one_wave(int64_t rows, int64_t d) { return grid_blocks(rows, d) > 0; }

std::string act_and_quant_rejects(const ActQuantArgs& a) {
  // The layer's usual types only: each (T, format) pair is 7 kernels of ~2,000 instructions.
  if (a.act.dtype != DType::kBF16 && a.act.dtype != DType::kF16) return "activations are not bf16 or f16";
  if (a.q_dtype != DType::kE4M3FN) return "codes are not e4m3fn";
  const int64_t width = a.scaling == ActQuantScaling::kGroup128 ? 128 : kRun;
  if (a.act.d % width != 0) return "d = " + std::to_string(a.act.d) + " is not a multiple of " + std::to_string(width);
  const int64_t elem = 2;
  const auto aligned = [](const void* ptr, int64_t stride_bytes) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && stride_bytes % 16 == 0;
  };
  if (!aligned(a.act.x, a.act.ldx * elem) || !aligned(a.q, a.ldq) ||
      (a.scaling == ActQuantScaling::kDynamicTensor && !aligned(a.act.out, a.act.ldo * elem))) {
    return "rows are not 16-byte aligned";
  }
  constexpr int64_t kU32 = int64_t(1) << 31;
  const int64_t runs = a.act.rows * (a.act.d / kRun);
  if (runs + int64_t(8) * kThreads * 1024 >= kU32 || a.act.ldx >= kU32 || a.act.ldo >= kU32 || a.ldq >= kU32) {
    return "too large for 32-bit run counters";
  }
  return {};
}

void act_and_quant_cuda(const ActQuantArgs& a, Stream stream) {
  if (a.act.rows <= 0 || a.act.d <= 0) return;
  const cudaStream_t s = launch::to_cuda(stream);
  ActQuantParams p{};
  p.x = a.act.x;
  p.ldx = uint32_t(a.act.ldx);
  p.y = a.act.out;
  p.ldy = uint32_t(a.act.ldo);
  p.q = a.q;
  p.ldq = uint32_t(a.ldq);
  p.static_scale = a.static_scale;
  p.scale = a.scale;
  p.rows_in_use = a.rows_in_use;
  p.rows = uint32_t(a.act.rows);
  p.runs_per_row = uint32_t(a.act.d / kRun);
  p.fp8_max = a.fp8_max;
  p.eps = a.eps;
  p.grid_counter = a.grid_counter;
  auto launch_for = [&](auto t) {
    using T = decltype(t);
    if (a.act.activation == GatedActivation::kSilu) {
      launch_typed<T, E4M3FNFormat, true>(a, p, s);
    } else {
      launch_typed<T, E4M3FNFormat, false>(a, p, s);
    }
  };
  if (a.act.dtype == DType::kBF16) {
    launch_for(BFloat16{});
  } else {
    launch_for(Float16{});
  }
}

}  // namespace fp8kit::ops
