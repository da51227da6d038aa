// Programmatic dependent launch (Hopper): a kernel launched with it may start while the kernel
// before it in the stream is still running, and waits for that kernel's results only where it
// needs them (griddepcontrol.wait, core/cuda/pdl.cuh). Chains of small decode kernels (the fused
// MoE at a few tokens) then overlap each kernel's launch and prologue with its predecessor's tail.
// FP8KIT_PDL=0 turns it off (every launch waits for the one before, as a plain launch).
#pragma once

namespace fp8kit::cuda {

// Whether launches on `device` use programmatic dependent launch: compute capability 9.0 or later
// and FP8KIT_PDL not "0" (read once; the device's capability once per device).
bool pdl_enabled(int device);

}  // namespace fp8kit::cuda
