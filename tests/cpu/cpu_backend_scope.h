// ScopedCpuBackend: the CPU ops of a test run on one backend (the process overrides'
// cpu_backend: reference or fast) until the scope ends, for tests of a property only one of them
// has (the reference's single rounding of an exact sum, say).
#pragma once

#include "fp8kit/runtime/overrides.h"

namespace fp8kit::testing {

class ScopedCpuBackend {
 public:
  explicit ScopedCpuBackend(CpuBackend backend) : saved_(process_overrides()) {
    Overrides o = saved_;
    o.cpu_backend = backend;
    set_process_overrides(o);
  }
  ~ScopedCpuBackend() { set_process_overrides(saved_); }
  ScopedCpuBackend(const ScopedCpuBackend&) = delete;
  ScopedCpuBackend& operator=(const ScopedCpuBackend&) = delete;

 private:
  Overrides saved_;
};

}  // namespace fp8kit::testing
