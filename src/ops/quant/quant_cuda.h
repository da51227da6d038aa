// CUDA launchers of the FP8 quantization ops: one per args struct of quant_args.h, bit-exact with
// the CPU reference of quant_ref.h that takes the same struct. They queue work on `stream` only
// (no host synchronization, CUDA-graph capturable) and expect the args' device to be current
// (detail::route sets it). Tested by tests/gpu/test_quant_*.cpp; benchmarked by bench/bench_quant.
#pragma once

#include <cstddef>

#include "fp8kit/stream.h"
#include "ops/quant/quant_args.h"

namespace fp8kit::ops {

#if FP8KIT_WITH_CUDA

// kStatic: one launch. kDynamicPerTensor: a memset of the scale, an absmax launch and a quantize
// launch. kDynamicPerToken: one launch (padding rows included).
void scaled_fp8_quant_cuda(const ScaledFp8QuantArgs& args, Stream stream);
// One launch.
void per_token_group_quant_cuda(const PerTokenGroupQuantArgs& args, Stream stream);
// kPerTensor: memset, absmax, quantize and a one-thread launch that stores the final scale.
// kPerChannel and kBlock: one launch.
void quantize_weight_cuda(const WeightQuantArgs& args, Stream stream);
void dequantize_cuda(const DequantArgs& args, Stream stream);
// One launch per 32 shards; the scales are read on the device, logical_widths on the host.
void requantize_with_max_scale_cuda(const RequantizeArgs& args, Stream stream);
void normalize_e4m3fn_to_e4m3fnuz_cuda(const FnuzNormalizeArgs& args, Stream stream);

#else

// A CPU-only build has no kernels; detail::route reports the missing backend before it would
// call one of these.
inline constexpr std::nullptr_t scaled_fp8_quant_cuda = nullptr;
inline constexpr std::nullptr_t per_token_group_quant_cuda = nullptr;
inline constexpr std::nullptr_t quantize_weight_cuda = nullptr;
inline constexpr std::nullptr_t dequantize_cuda = nullptr;
inline constexpr std::nullptr_t requantize_with_max_scale_cuda = nullptr;
inline constexpr std::nullptr_t normalize_e4m3fn_to_e4m3fnuz_cuda = nullptr;

#endif

}  // namespace fp8kit::ops
