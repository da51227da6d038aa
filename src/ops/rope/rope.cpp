// Public entry of rope_cos_sin and apply_rope (include/fp8kit/ops/rope.h): validates once,
// computes the frequencies on the host, fills RopeArgs (CPU: with workspace scratch) and routes
// by device (CPU: rope_cpu.h; CUDA: rope_cuda.h, which computes cos/sin on the device).
// Positions are checked on the host where they live there. Tested by tests/cpu/test_rope.cpp and
// tests/gpu/test_norm_rope_cuda.cpp.
#include "fp8kit/ops/rope.h"

#include "ops/context_checks.h"
#include "ops/op_checks.h"
#include "ops/rope/rope_cpu.h"
#include "ops/rope/rope_cuda.h"
#include "ops/rope/rope_freqs.h"

namespace fp8kit::ops {

using namespace detail;

namespace {

constexpr int64_t kMaxPosition = int64_t(1) << 24;  // positions above are not exact in f32

// positions: i64 [num_tokens], contiguous, values in [0, 2^24] (read on the host).
void check_positions(std::string_view op, const Tensor& positions, bool read_values) {
  require_defined(op, positions, "positions");
  require_dim(op, positions, "positions", 1);
  FP8KIT_CHECK_ARG(positions.dtype() == DType::kI64 && positions.is_contiguous(),
                   "{}: `positions` must be a contiguous i64 tensor, got {}", op, positions.description());
  if (!read_values) return;
  const auto* p = positions.data<int64_t>();
  for (int64_t t = 0; t < positions.size(0); ++t) {
    FP8KIT_CHECK_ARG(p[t] >= 0 && p[t] <= kMaxPosition, "{}: positions[{}] = {} is outside [0, 2^24]", op, t, p[t]);
  }
}

// The heads of q or k as [num_tokens, num_heads, head_dim] strides.
RopeHeads heads_of(std::string_view op, const Tensor& t, std::string_view name, int64_t num_tokens, int64_t head_dim) {
  FP8KIT_CHECK_ARG(t.dim() == 2 || t.dim() == 3,
                   "{}: `{}` must be [num_tokens, num_heads, head_dim] or [num_tokens, "
                   "num_heads * head_dim], got {}",
                   op, name, t.description());
  require_float_input(op, t, name);
  FP8KIT_CHECK_ARG(t.size(0) == num_tokens, "{}: `{}` has {} tokens but `positions` {}", op, name, t.size(0),
                   num_tokens);
  FP8KIT_CHECK_ARG(t.stride(-1) == 1 || t.size(-1) <= 1,
                   "{}: the last dimension of `{}` must be contiguous, got strides {}", op, name,
                   shape_to_string(t.strides()));
  RopeHeads h;
  if (t.dim() == 3) {
    FP8KIT_CHECK_ARG(t.size(2) == head_dim, "{}: `{}` has head size {} but the RoPE config {}", op, name, t.size(2),
                     head_dim);
    h.num_heads = t.size(1);
    h.in_head_stride = t.stride(1);
  } else {
    FP8KIT_CHECK_ARG(t.size(1) % head_dim == 0, "{}: the last dimension of `{}` ({}) is not a multiple of head_dim {}",
                     op, name, t.size(1), head_dim);
    h.num_heads = t.size(1) / head_dim;
    h.in_head_stride = head_dim;
  }
  h.in = t.data_ptr();
  h.in_token_stride = t.stride(0);
  h.out = t.data_ptr();  // in place unless an output is given
  h.out_token_stride = h.in_token_stride;
  h.out_head_stride = h.in_head_stride;
  return h;
}

// An out-of-place output: contiguous, the input's shape and dtype.
void use_output(std::string_view op, RopeHeads& h, const Tensor& in, const Tensor& out, std::string_view name,
                int64_t head_dim) {
  require_output(op, out, name, in.dtype(), in.shape(), in.device());
  h.out = out.data_ptr();
  h.out_token_stride = h.num_heads * head_dim;
  h.out_head_stride = head_dim;
}

}  // namespace

RopeCosSin rope_cos_sin(const ForwardContext& ctx, const RopeConfig& config, const Tensor& positions,
                        int64_t dynamic_seq_len) {
  constexpr std::string_view kOp = "rope_cos_sin";
  require_context_device(kOp, ctx, positions, "positions");
  check_positions(kOp, positions, false);
  require_reference_backend(kOp, ctx.device());
  check_positions(kOp, positions, true);
  const RopeFrequencies f = rope_frequencies(config, dynamic_seq_len);
  const int64_t n = positions.size(0), half = config.rotary_dim / 2;
  RopeCosSin cs{Tensor::empty({n, half}, DType::kF32), Tensor::empty({n, half}, DType::kF32)};
  const auto* p = positions.data<int64_t>();
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      rope_cos_sin_at(f.inv_freq[size_t(i)], p[t], f.attention_factor, cs.cos.data<float>() + t * half + i,
                      cs.sin.data<float>() + t * half + i);
    }
  }
  return cs;
}

void apply_rope(const ForwardContext& ctx, const RopeConfig& config, const Tensor& positions, const Tensor& q,
                const Tensor& k, const RopeOptions& options) {
  constexpr std::string_view kOp = "apply_rope";
  require_defined(kOp, q, "q");
  for (const auto& [t, name] : {std::pair{&positions, "positions"}, std::pair{&q, "q"}, std::pair{&k, "k"},
                                std::pair{&options.q_out, "q_out"}, std::pair{&options.k_out, "k_out"}}) {
    require_context_device(kOp, ctx, *t, name);
  }
  validate_rope_config(config);
  check_positions(kOp, positions, false);
  const int64_t num_tokens = positions.size(0);
  RopeArgs args;
  args.q = heads_of(kOp, q, "q", num_tokens, config.head_dim);
  if (k.defined()) {
    args.k = heads_of(kOp, k, "k", num_tokens, config.head_dim);
    FP8KIT_CHECK_ARG(k.dtype() == q.dtype(), "{}: `k` must have the dtype of `q` ({}), got {}", kOp,
                     dtype_name(q.dtype()), k.description());
  }
  if (options.q_out.defined()) use_output(kOp, args.q, q, options.q_out, "q_out", config.head_dim);
  if (options.k_out.defined()) {
    FP8KIT_CHECK_ARG(k.defined(), "{}: `k_out` is given without `k`", kOp);
    use_output(kOp, args.k, k, options.k_out, "k_out", config.head_dim);
  }
  require_backend(kOp, ctx.device());
  const bool on_cpu = ctx.device().is_cpu();
  if (on_cpu) check_positions(kOp, positions, true);  // device positions are not read on the host
  FP8KIT_CHECK(on_cpu || config.rotary_dim / 2 <= kRopeMaxFrequencies, ErrorCode::kUnsupported,
               "{}: rotary_dim {} is above the {} the CUDA kernel supports", kOp, config.rotary_dim,
               2 * kRopeMaxFrequencies);

  const RopeFrequencies f = rope_frequencies(config, options.dynamic_seq_len);
  args.num_tokens = num_tokens;
  args.head_dim = config.head_dim;
  args.rotary_dim = config.rotary_dim;
  args.is_neox_style = config.is_neox_style;
  args.inv_freq = f.inv_freq.data();
  args.attention_factor = f.attention_factor;
  args.positions = positions.data<int64_t>();
  args.dtype = q.dtype();
  Workspace::Scope scope(ctx.workspace());
  if (on_cpu) {
    // A token costs its cos/sin and a rotation of each head (~1 us for 12 heads of 64): parts of
    // at least 16 tokens.
    args.num_parts = work_parts(ctx, num_tokens, 16);
    args.scratch = ctx.workspace().take({args.num_parts, config.rotary_dim}, DType::kF32).data<float>();
  }
  route(kOp, ctx, ctx.device(), args, apply_rope_cpu, apply_rope_cuda);
}

}  // namespace fp8kit::ops
