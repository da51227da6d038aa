// CPU reference of paged_attention (include/fp8kit/ops/attention.h): for every (query row, head)
// a loop over the visible keys in order, read through the block table, with the online softmax
// in f32 (kDequantize) or the FlashAttention-3 FP8 emulation (kFp8Compute). The cache must
// already hold the new tokens (attention.cpp writes them first). Tested by
// tests/cpu/test_paged_attention*.cpp.
#pragma once

#include "ops/attention/attention_args.h"

namespace fp8kit::ops {

void paged_attention_ref(const PagedAttentionArgs& args);

}  // namespace fp8kit::ops
