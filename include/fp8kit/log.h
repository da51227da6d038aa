// Messages fp8kit gives its user that are not errors: the spec's warnings (KV-cache scales of 1.0,
// uncalibrated q/prob scales, unequal MoE input scales, weight-only fallback, ...). By default
// they go to stderr as "fp8kit: warning: <text>"; an engine installs its own sink.
#pragma once

#include <functional>
#include <string>

namespace fp8kit {

enum class LogLevel { kInfo, kWarning };

using LogSink = std::function<void(LogLevel level, const std::string& message)>;

// Replaces the sink; an empty function restores the default. Returns the previous sink.
LogSink set_log_sink(LogSink sink);
void log_message(LogLevel level, const std::string& message);
inline void log_warning(const std::string& message) { log_message(LogLevel::kWarning, message); }
inline void log_info(const std::string& message) { log_message(LogLevel::kInfo, message); }

}  // namespace fp8kit
