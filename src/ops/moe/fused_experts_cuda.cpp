// fused_experts on CUDA (fused_experts_cuda.h): the chunk loop of fused_experts_ref.cpp with the
// CUDA quantization ops, moe_align_block_size, the grouped GEMMs (grouped_gemm_cuda.h), the
// activation and moe_sum kernels, all queued on one stream. Host code only: every size it uses is
// known from the shapes (grids are sized by upper bounds, CTAs past num_tokens_post_padded leave).
// Tests: tests/gpu/test_fused_experts_cuda.cpp; bench: bench/bench_moe.cpp.
#if FP8KIT_WITH_CUDA

#include "ops/moe/fused_experts_cuda.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "core/check.h"
#include "core/checked_math.h"
#include "fp8kit/ops/moe_routing.h"
#include "fp8kit/ops/quant.h"
#include "fp8kit/platform.h"
#include "ops/activation/activation_cuda.h"
#include "ops/moe/fused_experts_operand.h"
#include "ops/moe/grouped_gemm_cuda.h"
#include "ops/moe/grouped_gemm_dispatch.h"
#include "ops/moe/grouped_gemm_sorted.h"
#include "ops/moe/moe_act_quant_cuda.h"
#include "ops/moe/moe_sum_cuda.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {
namespace {

const float* f32_ptr(const Tensor& t) { return t.defined() ? static_cast<const float*>(t.data_ptr()) : nullptr; }

struct Routing {
  MoeAlignResult align;
  int64_t block_m = 16, grid_m_blocks = 0, slots = 0;
  const float* weights = nullptr;  // [slots] routed weights of the chunk
};

GroupedGemmArgs gemm_args(const FusedExpertsArgs& a, const Routing& r, const ExpertOperand& x, const Tensor& w,
                          const Tensor& w_scale, const Tensor& out, int64_t a_slots_per_row, bool mul_routed_weight) {
  GroupedGemmArgs g;
  g.n = w.size(1);
  g.k = w.size(2);
  g.num_slots = r.slots;
  g.a_slots_per_row = a_slots_per_row;
  g.block_m = r.block_m;
  g.grid_m_blocks = r.grid_m_blocks;
  g.sorted_ids = static_cast<const int32_t*>(r.align.sorted_token_ids.data_ptr());
  g.expert_ids = static_cast<const int32_t*>(r.align.expert_ids.data_ptr());
  g.num_post_pad = static_cast<const int32_t*>(r.align.num_tokens_post_padded.data_ptr());
  g.a = x.values.data_ptr();
  g.a_dtype = x.values.dtype();
  g.lda = x.values.stride(0);
  g.b = w.data_ptr();
  g.b_dtype = w.dtype();
  g.b_expert_stride = w.stride(0);
  g.ldb = w.stride(1);
  g.num_experts = w.size(0);
  g.quant = a.quant;
  g.block = a.block;
  g.block_n = a.block_n;
  g.block_k = a.block_k;
  g.fast_accum = a.fast_accum;
  g.a_scale = f32_ptr(x.scale);
  g.b_scale = f32_ptr(w_scale);
  g.slot_weight = mul_routed_weight ? r.weights : nullptr;
  g.c = out.data_ptr();
  g.c_dtype = out.dtype();
  g.ldc = out.stride(0);
  return g;
}

// Steps 4 and 5 in one pass (moe_act_quant_cuda.h): C1 [rows, 2I] -> codes q [rows, I] and their
// scales; y [rows, I] of dtype holds the activation between the passes of a dynamic per-tensor
// scale. rows_in_use: the sorted path's bound, else null.
ActQuantArgs act_quant_args(const FusedExpertsArgs& a, const Tensor& c1, const Tensor& y, const Tensor& q,
                            const Tensor& scale, const int32_t* rows_in_use) {
  ActQuantArgs aq;
  aq.act = gated_activation_args(a, c1, y);
  aq.rows_in_use = rows_in_use;
  aq.scaling = a.block ? ActQuantScaling::kGroup128
                       : a.a2_scale.defined() ? ActQuantScaling::kStaticTensor : ActQuantScaling::kDynamicTensor;
  aq.q = static_cast<uint8_t*>(q.data_ptr());
  aq.ldq = q.stride(0);
  aq.q_dtype = q.dtype();
  aq.fp8_max = fp8_quant_max(q.dtype());
  aq.eps = PerTokenGroupQuantOptions{}.eps;  // quantize_expert_input's per_token_group_quant
  aq.static_scale = f32_ptr(a.a2_scale);
  aq.scale = static_cast<float*>(scale.data_ptr());
  return aq;
}

}  // namespace

void fused_experts_cuda(const FusedExpertsArgs& a, Stream stream) {
  using detail::contiguous_on;
  const int64_t h = a.hidden_size, inter = a.intermediate_size, top_k = a.top_k;
  const DType dtype = a.hidden_states.dtype();
  const Device device = a.hidden_states.device();
  const cudaStream_t s = static_cast<cudaStream_t>(stream.handle);
  FP8KIT_CHECK(a.hidden_states.is_contiguous() && a.out.is_contiguous(), ErrorCode::kInternal, "fused_experts: rows must be contiguous");

  const Tensor ids = contiguous_on(a.topk_ids, stream);
  const Tensor weights = contiguous_on(a.topk_weights, stream);
  const Tensor w1_scale = a.w1_scale.defined() ? contiguous_on(a.w1_scale, stream) : Tensor();
  const Tensor w2_scale = a.w2_scale.defined() ? contiguous_on(a.w2_scale, stream) : Tensor();

  // Scratch for the largest chunk: C1 [rows, 2I] and C3 [rows, H] share one buffer (the
  // activation consumes C1 before GEMM2 writes C3, in stream order), C2 [rows, I]; rows = slots,
  // or on the sorted path (below) the sorted positions the chunk's blocks can hold.
  const Overrides& overrides = a.ctx->overrides();
  Workspace& workspace = a.ctx->workspace();
  Workspace::Scope call_scratch(workspace);
  const GroupedKernel kernel = preferred_grouped_kernel(a.quant, device.index, overrides);
  const int64_t max_slots = std::min(a.chunk_size, a.num_tokens) * top_k;
  const bool may_sort = kernel == GroupedKernel::kWgmma && grouped_block_m(max_slots, a.global_num_experts, kernel, overrides) >= 64;
  // Sorted rows of a chunk: at most ceil(slots / block) + (non-empty experts) blocks; the bound
  // for blocks of 128 covers blocks of 64 (and smaller chunks).
  const int64_t max_rows =
      may_sort ? (ceil_div(max_slots, 128) + std::min(max_slots, a.global_num_experts)) * 128 : max_slots;
  const Tensor c13 = workspace.take({max_rows * std::max(2 * inter, h)}, dtype);
  const Tensor c2_all = workspace.take({max_rows, inter}, dtype);

  for (int64_t t0 = 0; t0 < a.num_tokens; t0 += a.chunk_size) {
    const int64_t m = std::min(a.chunk_size, a.num_tokens - t0);
    Workspace::Scope chunk_scratch(workspace);  // the next chunk's kernels reuse it in stream order
    Routing r;
    r.slots = m * top_k;
    r.block_m = grouped_block_m(r.slots, a.global_num_experts, kernel, overrides);
    r.weights = static_cast<const float*>(weights.data_ptr()) + t0 * top_k;
    const bool w8a8 = a.quant == ExpertQuant::kFp8W8A8;
    // Fills that buffers start from are queued here, ahead of the chunk's kernels: a memset
    // between two kernels keeps the second from starting early (programmatic dependent launch,
    // core/cuda/pdl.h). Else they would sit between GEMM1 and the activation (C2's dynamic
    // per-tensor scale, an atomic max when the activation takes two passes) and before the
    // sorted path's gather (its slot -> row map, -1 for a slot in no position).
    const bool may_sort_chunk = may_sort && r.block_m >= 64;
    const int64_t rows_bound =
        may_sort_chunk ? (ceil_div(r.slots, r.block_m) + std::min(r.slots, a.global_num_experts)) * r.block_m : r.slots;
    // C2's dynamic scale and, after it, the counter of the one-launch form's grid barrier.
    Tensor a2_dynamic = w8a8 && !a.block && !a.a2_scale.defined() ? workspace.take({2}, DType::kF32) : Tensor();
    const bool a2_zeroed = a2_dynamic.defined() && act_and_quant_two_pass(rows_bound, inter);
    if (a2_zeroed) a2_dynamic.fill_bytes_(0, stream);
    Tensor row_of_slot = may_sort_chunk ? workspace.take({r.slots}, DType::kI32) : Tensor();
    if (may_sort_chunk) row_of_slot.fill_bytes_(0xff, stream);
    // (2) the chunk's slots grouped by expert (moved ahead of the quantization: independent).
    r.align = moe_align_block_size(*a.ctx, ids.narrow(0, t0, m), r.block_m, a.global_num_experts, a.expert_map, false);
    // Blocks in use <= sum over non-empty experts of ceil(count / BM) <= ceil(slots / BM) + non-empty experts.
    r.grid_m_blocks = std::min(r.align.expert_ids.size(0),
                               ceil_div(r.slots, r.block_m) + std::min(r.slots, a.global_num_experts));

    // (1) quantize A (copied out of hidden_states before the chunk's output rows are written).
    const ExpertOperand x1 = quantize_expert_input(a, a.hidden_states.narrow(0, t0, m), a.a1_scale);
    const Tensor c3 = c13.narrow(0, 0, r.slots * h).view({r.slots, h});

    // Steps 4 and 5 fused where act_and_quant serves the layer (W8A8, block scales only in groups
    // of 128): C2's codes and scales then come straight from C1.
    ExpertOperand fused_q2;  // C2's codes and scales when fused
    auto fused_act_quant = [&](int64_t rows, const int32_t* rows_in_use) {
      if (!w8a8 || (a.block && a.block_k != 128)) return std::optional<ActQuantArgs>();
      ExpertOperand q2{workspace.take({rows, inter}, a.w1.dtype()), Tensor()};
      q2.scale = a.block ? workspace.take({rows, inter / 128}, DType::kF32)
                         : a.a2_scale.defined() ? a.a2_scale : a2_dynamic.narrow(0, 0, 1);
      ActQuantArgs aq = act_quant_args(a, c13.narrow(0, 0, rows * 2 * inter).view({rows, 2 * inter}),
                                       c2_all.narrow(0, 0, rows), q2.values, q2.scale, rows_in_use);
      aq.scale_zeroed = a2_zeroed;
      if (a2_zeroed) aq.grid_counter = static_cast<uint32_t*>(a2_dynamic.data_ptr()) + 1;
      if (!act_and_quant_rejects(aq).empty()) return std::optional<ActQuantArgs>();
      fused_q2 = q2;
      return std::optional<ActQuantArgs>(aq);
    };

    // Prefill on sm_90 (blocks of 64 or 128): the rows go into sorted order once, so that both GEMMs
    // read their activations by TMA (grouped_gemm_sorted.h); C1 and C2 stay sorted, and only
    // the rows up to num_tokens_post_padded are touched (the fused step 4-5 keeps to them).
    GroupedGemmArgs probe1 = gemm_args(a, r, x1, a.w1, w1_scale, c3, top_k, false);
    GroupedGemmArgs probe2 = gemm_args(a, r, x1, a.w2, w2_scale, c3, 1, false);
    probe2.lda = inter;  // GEMM2 reads C2's quantized rows, [rows, I] contiguous
    const int32_t* num_post_pad = static_cast<const int32_t*>(r.align.num_tokens_post_padded.data_ptr());
    std::optional<ActQuantArgs> act_quant;
    bool sorted = may_sort && r.block_m >= 64 && grouped_gemm_sm90_sorted_rejects(probe1, device.index).empty() &&
                  grouped_gemm_sm90_sorted_rejects(probe2, device.index).empty();
    if (sorted) {
      act_quant = fused_act_quant(r.grid_m_blocks * r.block_m, num_post_pad);
      sorted = act_quant.has_value();
    }
    if (!sorted) act_quant = fused_act_quant(r.slots, nullptr);
    const int64_t rows = sorted ? r.grid_m_blocks * r.block_m : r.slots;
    const Tensor c1 = c13.narrow(0, 0, rows * 2 * inter).view({rows, 2 * inter});
    const Tensor c2 = c2_all.narrow(0, 0, rows);
    // Sorted: GEMM2's rows stay in sorted order, and moe_sum reads slot s at row row_of_slot[s]
    // (written by the gather; -1, read as zeros, for a slot in no position).
    const Tensor c3_sorted = sorted ? c13.narrow(0, 0, rows * h).view({rows, h}) : Tensor();

    // (3) GEMM1 -> C1, routed weight here when apply_router_weight_on_input.
    if (sorted) {
      ExpertOperand x1s{workspace.take({rows, h}, x1.values.dtype()), Tensor()};
      SortedGather gather;
      gather.rows = rows;
      gather.k = h;
      gather.num_slots = r.slots;
      gather.slots_per_row = top_k;
      gather.sorted_ids = static_cast<const int32_t*>(r.align.sorted_token_ids.data_ptr());
      gather.num_post_pad = static_cast<const int32_t*>(r.align.num_tokens_post_padded.data_ptr());
      gather.x = static_cast<const uint8_t*>(x1.values.data_ptr());
      gather.ldx = x1.values.stride(0);
      gather.out = static_cast<uint8_t*>(x1s.values.data_ptr());
      gather.ldo = h;
      gather.row_of_slot = static_cast<int32_t*>(row_of_slot.data_ptr());
      if (a.block) {
        gather.groups = x1.scale.size(1);
        x1s.scale = workspace.take({rows, gather.groups}, DType::kF32);
        gather.scale = f32_ptr(x1.scale);
        gather.scale_out = static_cast<float*>(x1s.scale.data_ptr());
      } else {
        x1s.scale = x1.scale;
      }
      gather_sorted_rows(gather, s);
      grouped_gemm_sm90_sorted(gemm_args(a, r, x1s, a.w1, w1_scale, c1, top_k, a.apply_router_weight_on_input), s);
    } else {
      run_grouped_gemm(gemm_args(a, r, x1, a.w1, w1_scale, c1, top_k, a.apply_router_weight_on_input), kernel, device.index, s);
    }

    // (4) activation -> C2 [rows, I]; (5) quantize C2 over the whole chunk (sorted: the zero rows
    // of padding leave a dynamic scale as it is); fused into one pass where act_quant is set.
    ExpertOperand x2;
    if (act_quant) {
      act_and_quant_cuda(*act_quant, stream);
      x2 = fused_q2;
    } else {
      act_and_mul_cuda(gated_activation_args(a, c1, c2), stream);
      x2 = quantize_expert_input(a, c2, a.a2_scale);
    }

    // (6) GEMM2 -> C3, one A row per slot. Decode on the wgmma kernel may split K where the grid
    // is too small to keep the weights streaming (choose_grouped_k_splits); moe_sum then adds the
    // splits' f32 partial sums.
    GroupedGemmArgs g2 = gemm_args(a, r, x2, a.w2, w2_scale, sorted ? c3_sorted : c3, 1, !a.apply_router_weight_on_input);
    Tensor partials;
    if (sorted) {
      grouped_gemm_sm90_sorted(g2, s);
    } else {
      if (kernel == GroupedKernel::kWgmma && r.block_m == 16) {
        const int64_t ctas = r.grid_m_blocks * ceil_div(h, 64);
        g2.k_splits = choose_grouped_k_splits(ctas, ceil_div(inter, 128), get_cu_count(device.index), a.block,
                                              overrides.moe_k_splits);
        if (g2.k_splits > 1) {
          partials = workspace.take({g2.k_splits, r.slots, h}, DType::kF32);
          g2.partials = static_cast<float*>(partials.data_ptr());
          if (!grouped_gemm_sm90_wgmma_rejects(g2, device.index).empty()) g2.k_splits = 1;
        }
      }
      run_grouped_gemm(g2, kernel, device.index, s);
    }

    // (7) out[chunk] = sum over top_k (weight-only: the Marlin path's torch.sum, f32).
    MoeSumArgs sum;
    sum.m = m;
    sum.top_k = top_k;
    sum.d = h;
    sum.input = sorted ? c3_sorted.data_ptr() : c3.data_ptr();
    if (sorted) sum.row_of_slot = static_cast<const int32_t*>(row_of_slot.data_ptr());
    sum.out = a.out.narrow(0, t0, m).data_ptr();
    sum.dtype = dtype;
    sum.accumulate_in_scalar = a.quant != ExpertQuant::kWeightOnly && moe_sum_accumulates_in_scalar(top_k);
    if (g2.k_splits > 1) {
      sum.partials = g2.partials;
      sum.splits = g2.k_splits;
    }
    moe_sum_cuda(sum, stream);
  }
}

}  // namespace fp8kit::ops

#endif  // FP8KIT_WITH_CUDA
