// Programmatic dependent launch (Hopper): a kernel launched with it may start while the kernel
// before it in the stream is still running, and waits for that kernel's results only where it
// needs them (griddepcontrol.wait, core/cuda/pdl.cuh). Chains of small decode kernels (the fused
// MoE at a few tokens) then overlap each kernel's launch and prologue with its predecessor's tail.
// FP8KIT_PDL=0 (process_overrides().pdl) turns it off (every launch waits for the one before, as a
// plain launch).
#pragma once

namespace fp8kit::cuda {

// Whether launches on `device` use programmatic dependent launch: compute capability 9.0 or later
// and process_overrides().pdl (the device's capability read once per device).
bool pdl_enabled(int device);

}  // namespace fp8kit::cuda
