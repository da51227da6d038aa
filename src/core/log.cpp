#include "fp8kit/log.h"

#include <cstdio>
#include <mutex>

namespace fp8kit {
namespace {

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}

LogSink& current_sink() {
  static LogSink sink;
  return sink;
}

}  // namespace

LogSink set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  LogSink previous = std::move(current_sink());
  current_sink() = std::move(sink);
  return previous;
}

void log_message(LogLevel level, const std::string& message) {
  LogSink sink;
  {
    std::lock_guard<std::mutex> lock(sink_mutex());
    sink = current_sink();
  }
  if (sink) {
    sink(level, message);
    return;
  }
  std::fprintf(stderr, "fp8kit: %s: %s\n", level == LogLevel::kWarning ? "warning" : "info", message.c_str());
}

}  // namespace fp8kit
