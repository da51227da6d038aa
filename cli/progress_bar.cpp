#include "progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace fp8kit::cli {

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && ::isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fputc('\n', stderr);
}

void ProgressBar::update(const ConversionProgress& p) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool done = p.bytes_done >= p.bytes_total;
  if (drawn_ && !done && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  constexpr int kWidth = 28;
  const double fraction = p.bytes_total ? double(p.bytes_done) / double(p.bytes_total) : 1.0;
  const int filled = int(fraction * kWidth);
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double gbps = seconds > 0 ? p.bytes_done / seconds / 1e9 : 0.0;
  std::string bar(kWidth, ' ');
  for (int i = 0; i < filled; ++i) bar[i] = '#';
  std::fprintf(stderr, "\r  %s [%s] %3d%%  %.2f/%.2f GB  %.2f GB/s \x1b[K", label_.c_str(), bar.c_str(),
               int(fraction * 100), p.bytes_done / 1e9, p.bytes_total / 1e9, gbps);
  std::fflush(stderr);
}

void ProgressBar::update_count(int64_t done, int64_t total, const char* unit) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  drawn_ = true;
  last_ = now;
  constexpr int kWidth = 28;
  const double fraction = total > 0 ? double(done) / double(total) : 1.0;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::string bar(kWidth, ' ');
  for (int i = 0; i < int(fraction * kWidth); ++i) bar[i] = '#';
  std::fprintf(stderr, "\r  %s [%s] %3d%%  %lld/%lld %s  %.2f %s/s \x1b[K", label_.c_str(), bar.c_str(),
               int(fraction * 100), (long long)done, (long long)total, unit, seconds > 0 ? done / seconds : 0.0, unit);
  std::fflush(stderr);
}

ProgressCallback ProgressBar::callback() {
  return [this](const ConversionProgress& p) { update(p); };
}

}  // namespace fp8kit::cli
