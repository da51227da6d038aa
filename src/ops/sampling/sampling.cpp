// Public entry of sample (include/fp8kit/ops/sampling.h): validates the logits (on the host:
// no NaN, no +inf, not all -inf) and every row's parameters once, allocates the results, fills
// SamplingArgs with workspace scratch and routes by device (CPU: the reference; CUDA: greedy rows,
// sampling_cuda.h, whose faults come back to the host and raise the same errors). Tested by
// tests/cpu/test_sampling.cpp and tests/gpu/test_sampling_cuda.cpp.
#include "fp8kit/ops/sampling.h"

#include <cmath>

#include "fp8kit/half.h"
#include "ops/context_checks.h"
#include "ops/op_checks.h"
#include "ops/sampling/sampling_cuda.h"
#include "ops/sampling/sampling_ref.h"
#if FP8KIT_WITH_CUDA
#include "core/cuda/device_guard.h"
#endif

namespace fp8kit::ops {

using namespace detail;

namespace {

constexpr std::string_view kOp = "sampling";

void check_params(const SamplingParams& p, size_t r) {
  FP8KIT_CHECK_ARG(std::isfinite(p.temperature) && p.temperature >= 0.0f,
                   "{}: params[{}].temperature must be finite and >= 0, got {}", kOp, r, p.temperature);
  FP8KIT_CHECK_ARG(p.top_p > 0.0f && p.top_p <= 1.0f, "{}: params[{}].top_p must be in (0, 1], got {}", kOp, r,
                   p.top_p);
  FP8KIT_CHECK_ARG(p.min_p >= 0.0f && p.min_p <= 1.0f, "{}: params[{}].min_p must be in [0, 1], got {}", kOp, r,
                   p.min_p);
}

template <typename T>
void check_logits(const Tensor& logits) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = logits.data<T>() + r * logits.stride(0);
    bool any_finite = false;
    for (int64_t v = 0; v < vocab; ++v) {
      const float x = to_float(row[v]);
      FP8KIT_CHECK_ARG(!std::isnan(x), "{}: logits[{}, {}] is NaN", kOp, r, v);
      FP8KIT_CHECK_ARG(x != INFINITY, "{}: logits[{}, {}] is +inf", kOp, r, v);
      any_finite = any_finite || x != -INFINITY;
    }
    FP8KIT_CHECK_ARG(any_finite, "{}: every logit of row {} is -inf", kOp, r);
  }
}

// The host's check_logits on the faults the CUDA kernel found: the same first error.
void check_faults(const Tensor& faults) {
  const int64_t* f = faults.data<int64_t>();
  for (int64_t r = 0; r < faults.size(0); ++r) {
    const int64_t nan_id = f[3 * r], inf_id = f[3 * r + 1];
    if (nan_id >= 0 && (inf_id < 0 || nan_id < inf_id)) fail(ErrorCode::kInvalidArgument, "{}: logits[{}, {}] is NaN", kOp, r, nan_id);
    if (inf_id >= 0) fail(ErrorCode::kInvalidArgument, "{}: logits[{}, {}] is +inf", kOp, r, inf_id);
    FP8KIT_CHECK_ARG(f[3 * r + 2] == 0, "{}: every logit of row {} is -inf", kOp, r);
  }
}

// CUDA: every row greedy and no top logprobs (else kUnsupported); the results on the device. The
// faults are read back before it returns (the one wait), so bad logits raise here as on the host.
SamplingResult sample_cuda(const ForwardContext& ctx, const Tensor& logits, const std::vector<SamplingParams>& params,
                           const SamplingOptions& options) {
  for (size_t r = 0; r < params.size(); ++r) {
    FP8KIT_CHECK(params[r].temperature < kSamplingEps, ErrorCode::kUnsupported,
                 "{}: on CUDA only greedy rows are sampled (row {} has temperature {}); sample that row on the host",
                 kOp, r, params[r].temperature);
  }
  FP8KIT_CHECK(options.num_logprobs == 0, ErrorCode::kUnsupported,
               "{}: top logprobs on CUDA are not supported; ask for them on the host", kOp);
  require_backend(kOp, logits.device());  // after the checks of the arguments, as route() is
  const int64_t num_seqs = logits.size(0);
  const Device device = logits.device();
  SamplingResult res;
  res.token_ids = Tensor::empty({num_seqs}, DType::kI64, device);
  res.logprobs = Tensor::empty({num_seqs}, DType::kF32, device);
  res.ranks = Tensor::empty({num_seqs}, DType::kI64, device);
  res.top_ids = Tensor::empty({num_seqs, 0}, DType::kI64, device);
  res.top_logprobs = Tensor::empty({num_seqs, 0}, DType::kF32, device);
  if (num_seqs == 0) return res;
  Workspace::Scope scope(ctx.workspace());
  const Tensor faults = ctx.workspace().take({num_seqs, 3}, DType::kI64);
  GreedySampleArgs a;
  a.num_seqs = num_seqs;
  a.vocab = logits.size(1);
  a.logits = logits.data_ptr();
  a.row_stride = logits.stride(0);
  a.dtype = logits.dtype();
  a.token_ids = res.token_ids.data<int64_t>();
  a.logprobs = res.logprobs.data<float>();
  a.ranks = res.ranks.data<int64_t>();
  a.faults = faults.data<int64_t>();
#if FP8KIT_WITH_CUDA
  {
    cuda::DeviceGuard guard(device.index);
    greedy_sample_cuda(a, ctx.stream());
  }
#endif
  Tensor host = Tensor::empty(faults.shape(), DType::kI64);
  host.copy_(faults, ctx.stream());  // complete when it returns
  check_faults(host);
  return res;
}

}  // namespace

SamplingResult sample(const ForwardContext& ctx, const Tensor& logits, const std::vector<SamplingParams>& params,
                      const SamplingOptions& options) {
  require_defined(kOp, logits, "logits");
  require_context_device(kOp, ctx, logits, "logits");
  require_dim(kOp, logits, "logits", 2);
  require_float_input(kOp, logits, "logits");
  const int64_t num_seqs = logits.size(0), vocab = logits.size(1);
  FP8KIT_CHECK_ARG(vocab > 0 && vocab <= (int64_t(1) << 31) - 1, "{}: `logits` must have 1 to 2^31 - 1 columns, got {}",
                   kOp, logits.description());
  FP8KIT_CHECK_ARG(logits.stride(1) == 1 || vocab <= 1,
                   "{}: the last dimension of `logits` must be contiguous, got "
                   "strides {}",
                   kOp, shape_to_string(logits.strides()));
  FP8KIT_CHECK_ARG(int64_t(params.size()) == num_seqs, "{}: {} SamplingParams for {} rows of `logits`", kOp,
                   params.size(), num_seqs);
  for (size_t r = 0; r < params.size(); ++r) check_params(params[r], r);
  FP8KIT_CHECK_ARG(options.num_logprobs >= 0 && options.num_logprobs <= vocab,
                   "{}: `num_logprobs` must be in [0, vocab = {}], got {}", kOp, vocab, options.num_logprobs);
  if (ctx.device().is_cuda()) return sample_cuda(ctx, logits, params, options);
  require_reference_backend(kOp, ctx.device());
  switch (logits.dtype()) {
    case DType::kBF16: check_logits<BFloat16>(logits); break;
    case DType::kF16: check_logits<Float16>(logits); break;
    default: check_logits<float>(logits); break;
  }

  SamplingResult res;
  res.token_ids = Tensor::empty({num_seqs}, DType::kI64);
  res.logprobs = Tensor::empty({num_seqs}, DType::kF32);
  res.ranks = Tensor::empty({num_seqs}, DType::kI64);
  res.top_ids = Tensor::empty({num_seqs, options.num_logprobs}, DType::kI64);
  res.top_logprobs = Tensor::empty({num_seqs, options.num_logprobs}, DType::kF32);
  SamplingArgs args;
  args.num_seqs = num_seqs;
  args.vocab = vocab;
  args.logits = logits.data_ptr();
  args.row_stride = logits.stride(0);
  args.dtype = logits.dtype();
  args.params = params.data();
  args.num_logprobs = options.num_logprobs;
  args.token_ids = res.token_ids.data<int64_t>();
  args.logprobs = res.logprobs.data<float>();
  args.ranks = res.ranks.data<int64_t>();
  args.top_ids = res.top_ids.data<int64_t>();
  args.top_logprobs = res.top_logprobs.data<float>();
  args.num_parts = int(std::min<int64_t>(work_parts(ctx), std::max<int64_t>(num_seqs, 1)));
  Workspace::Scope scope(ctx.workspace());
  args.scratch = ctx.workspace().take({args.num_parts, 2 * vocab}, DType::kF32).data<float>();
  args.scratch_ids = ctx.workspace().take({args.num_parts, vocab}, DType::kI32).data<int32_t>();
  sample_ref(args);
  return res;
}

}  // namespace fp8kit::ops
