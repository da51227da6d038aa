// The CUDA launcher of paged_attention (include/fp8kit/ops/attention.h): takes the
// PagedAttentionArgs of the CPU reference (attention_ref.h) with device pointers, the plan
// (attention_plan.h) and its workspace scratch, and queues on `stream` the schedule kernel, the
// attention kernel the plan names and (split items) the combine kernel: no host synchronization,
// so a forward can be captured in a CUDA graph. The metadata is read on the device only; bad
// values are clamped or skipped there, never read out of bounds (attention_common.cuh).
// Kernels: attention_common.cuh, attention_simt.cu, attention_mma*.cu. Tests:
// tests/gpu/test_attention_cuda.cpp; benchmark: bench/bench_attention.
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/attention/attention_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA
// Expects args' device to be current (detail::route sets it) and args.device_scratch to hold
// args.plan.scratch_bytes.
void paged_attention_cuda(const PagedAttentionArgs& args, Stream stream);
// The fields of `desc` that describe the current device: SM count, compute capability, the
// shared memory a block may opt in to.
void describe_attention_device(PagedAttentionDesc& desc);
#else
inline constexpr std::nullptr_t paged_attention_cuda = nullptr;  // detail::route reports the missing backend
#endif

}  // namespace fp8kit::ops
