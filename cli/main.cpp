// fp8kit command-line tool: quantize, dequantize, inspect, demo, tokenize. Library errors arrive as
// fp8kit::Error and leave as one line on stderr with exit code 1; a bad command line exits 2.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "interrupt.h"
#include "fp8kit/error.h"
#include "fp8kit/runtime/overrides.h"
#include "fp8kit/version.h"

int main(int argc, char** argv) {
  fp8kit::cli::handle_interrupts();
  CLI::App app{"fp8kit: FP8 checkpoints and kernels, vLLM-compatible, without Python"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fp8kit " FP8KIT_VERSION_STRING);
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads to use (default: all; also FP8KIT_NUM_THREADS)")
      ->check(CLI::Range(1, fp8kit::kMaxThreads));
  std::function<int()> run;
  fp8kit::cli::add_quantize(app, run);
  fp8kit::cli::add_dequantize(app, run);
  fp8kit::cli::add_inspect(app, run);
  fp8kit::cli::add_demo(app, run);
  fp8kit::cli::add_tokenize(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : fp8kit::cli::kExitUsage;
  }
  // Every FP8KIT_* knob is parsed once, here; a bad value is a usage error naming the variable.
  try {
    fp8kit::Overrides overrides = fp8kit::Overrides::from_environment();
    if (threads > 0) overrides.num_threads = threads;
    fp8kit::set_process_overrides(overrides);
  } catch (const fp8kit::Error& e) {
    std::fprintf(stderr, "fp8kit: error: %s\n", e.what());
    return fp8kit::cli::kExitUsage;
  }
  if (threads > 0) setenv("FP8KIT_NUM_THREADS", std::to_string(threads).c_str(), 1);  // the thread pool reads it
  try {
    return run();
  } catch (const fp8kit::Error& e) {
    std::fprintf(stderr, "fp8kit: error: %s\n", e.what());
    return fp8kit::cli::kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8kit: internal error: %s\n", e.what());
    return fp8kit::cli::kExitError;
  }
}
