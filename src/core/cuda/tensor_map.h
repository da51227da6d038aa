// TMA tensor maps (CUtensorMap) for the sm_90 kernels, encoded through the driver's
// cuTensorMapEncodeTiled (found at run time with cudaGetDriverEntryPointByVersion, so fp8kit does
// not link libcuda). Internal header: the map is a kernel argument (__grid_constant__).
#pragma once

#include <cstdint>

#include <cuda.h>

namespace fp8kit::cuda {

// A map of the 3-D byte tensor [d2][d1][d0] at `base` (row stride `stride1` bytes, plane stride
// `stride2` bytes, both multiples of 16) read in boxes of box0 x box1 x 1 bytes with the 128-byte
// swizzle (box0 <= 128); out-of-bounds elements read as zero. Throws fp8kit::Error on failure.
CUtensorMap make_tensor_map_3d_u8_sw128(const void* base, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t stride1,
                                        uint64_t stride2, uint32_t box0, uint32_t box1);

// A map of the 2-D tensor [d1][d0] of `elem_bytes`-byte elements (2 or 4) at `base` (16-byte
// aligned, row stride `stride1` bytes, a multiple of 16), written (TMA stores) in boxes of box0 x
// box1 elements with the 128-byte swizzle (box0 * elem_bytes == 128). Throws fp8kit::Error on failure.
CUtensorMap make_tensor_map_2d_sw128(const void* base, uint32_t elem_bytes, uint64_t d0, uint64_t d1, uint64_t stride1,
                                     uint32_t box0, uint32_t box1);

}  // namespace fp8kit::cuda
