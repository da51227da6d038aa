// The constants of the attention kernels' branch-free division of key positions by the block
// size (BlockDivider, attention_common.cuh): q = (umulhi(j, magic) + j) >> shift for
// 0 <= j < 2^31, with shift = ceil(log2 bs) and magic = floor(2^32 (2^shift - bs) / bs) + 1
// (Granlund and Montgomery's division by an invariant integer; both terms of the sum are below
// 2^31, so it cannot wrap). Host and device, so the CPU tests check it against j / bs
// (tests/cpu/test_attention_plan.cpp).
#pragma once

#include <cstdint>

#include "fp8kit/host_device.h"

namespace fp8kit::ops {

struct BlockDividerMagic {
  uint32_t magic, shift;
};

// bs in [1, 2^31).
FP8KIT_HOST_DEVICE constexpr BlockDividerMagic block_divider_magic(uint32_t bs) {
  uint32_t shift = 0;
  while (shift < 31 && (uint64_t(1) << shift) < bs) ++shift;
  const uint64_t magic = ((uint64_t(1) << 32) * ((uint64_t(1) << shift) - bs)) / bs + 1;
  return {uint32_t(magic), shift};
}

// The quotient as the kernels compute it (umulhi spelled out).
FP8KIT_HOST_DEVICE constexpr uint32_t block_divider_quotient(uint32_t j, BlockDividerMagic d) {
  const uint32_t hi = uint32_t((uint64_t(j) * d.magic) >> 32);
  return (hi + j) >> d.shift;
}

}  // namespace fp8kit::ops
