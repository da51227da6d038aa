// ForwardContext: what every layer forward and quant-method apply receives: the device it runs
// on, the stream of its device work (CUDA; none on CPU), the scratch Workspace its ops take
// temporaries from, the CPU thread count, and the kernel Overrides (parsed once, at creation).
// One context serves one stream: forwards on two streams need two contexts. Nothing below it
// reads the environment.
#pragma once

#include <memory>

#include "fp8kit/device.h"
#include "fp8kit/runtime/overrides.h"
#include "fp8kit/runtime/workspace.h"
#include "fp8kit/stream.h"

namespace fp8kit {

class ForwardContext {
 public:
  // A context on `device` with `overrides` as given (default: nothing overridden) and its own
  // workspace on `stream`.
  explicit ForwardContext(Device device = Device::cpu(), Overrides overrides = {}, Stream stream = {});
  // The overrides of the process (process_overrides(): FP8KIT_* as parsed once), for engines and
  // the CLI.
  static ForwardContext from_environment(Device device = Device::cpu(), Stream stream = {});

  ForwardContext(ForwardContext&&) noexcept = default;
  ForwardContext& operator=(ForwardContext&&) noexcept = default;
  ForwardContext(const ForwardContext&) = delete;
  ForwardContext& operator=(const ForwardContext&) = delete;

  Device device() const { return device_; }
  Stream stream() const { return stream_; }
  const Overrides& overrides() const { return overrides_; }
  // Threads the CPU ops of this context use: overrides().num_threads, or every thread of the
  // process's pool when that is 0 (never more than the pool has).
  int num_threads() const;
  // The workspace is scratch state, not part of what a forward computes: ops take from it
  // through a const context.
  Workspace& workspace() const { return *workspace_; }

 private:
  Device device_;
  Stream stream_;
  Overrides overrides_;
  std::unique_ptr<Workspace> workspace_;
};

}  // namespace fp8kit
