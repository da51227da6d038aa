// A one-line progress bar on stderr, drawn only when stderr is a terminal and at most ten times
// a second: "  quantize [#########           ]  45%  1.20/2.65 GB  0.95 GB/s".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "fp8kit/convert.h"

namespace fp8kit::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label, bool enabled = true);
  ~ProgressBar();  // ends the line
  void update(const ConversionProgress& progress);
  // A count of work units: "  eval [###     ]  30%  6/18 windows  0.25 windows/s".
  void update_count(int64_t done, int64_t total, const char* unit);
  ProgressCallback callback();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace fp8kit::cli
