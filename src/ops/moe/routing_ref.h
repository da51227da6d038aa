// CPU reference of the MoE routing ops: the executable form of spec SEMANTICS.md 1.9 (fused_topk,
// grouped_topk, the EPLB step of select_experts) and 1.10 (moe_align_block_size), on the args
// structs of routing_args.h. Arguments are validated by moe_routing.cpp / moe_align.cpp; the
// references also reject bad ids in the data (kInvalidArgument), which the kernels cannot report.
// Tested by tests/cpu/test_moe_routing*.cpp; the CUDA kernels are tested identical against it.
#pragma once

#include "ops/moe/routing_args.h"

namespace fp8kit::ops {

void topk_ref(const TopkArgs& args);
void eplb_ref(const EplbArgs& args);
void moe_align_ref(const MoeAlignArgs& args);

}  // namespace fp8kit::ops
