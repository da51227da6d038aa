// fp8kit command-line tool: quantize, dequantize, inspect, demo, tokenize, generate, eval. Library
// errors arrive as fp8kit::Error and leave as one line on stderr with exit code 1; a bad command
// line (and a bad FP8KIT_* value or --threads) exits 2.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "commands.h"
#include "core/names.h"
#include "core/parallel.h"
#include "interrupt.h"
#include "fp8kit/error.h"
#include "fp8kit/runtime/overrides.h"
#include "fp8kit/version.h"
#include "fp8kit/version.h"

int main(int argc, char** argv) {
  fp8kit::cli::handle_interrupts();
  CLI::App app{"fp8kit: FP8 checkpoints and kernels, vLLM-compatible, without Python"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fp8kit " FP8KIT_VERSION_STRING);
  std::string threads;
  app.add_option("--threads", threads, "CPU threads to use (default: all; also FP8KIT_NUM_THREADS)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            try {
              fp8kit::parse_thread_count(value, "the thread count");
              return "";
            } catch (const fp8kit::Error& e) {
              return e.what();
            }
          },
          "1.." + std::to_string(fp8kit::max_threads()), "thread count"));
  std::function<int()> run;
  fp8kit::cli::add_quantize(app, run);
  fp8kit::cli::add_dequantize(app, run);
  fp8kit::cli::add_inspect(app, run);
  fp8kit::cli::add_demo(app, run);
  fp8kit::cli::add_tokenize(app, run);
  fp8kit::cli::add_generate(app, run);
  fp8kit::cli::add_eval(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : fp8kit::cli::kExitUsage;
  }
  // Every FP8KIT_* knob is parsed once, here; a bad value is a usage error naming the variable.
  try {
    // --threads (validated above) stands in for FP8KIT_NUM_THREADS.
    fp8kit::set_process_overrides(fp8kit::Overrides::parse([&](const char* name) -> const char* {
      if (!threads.empty() && std::string_view(name) == "FP8KIT_NUM_THREADS") return threads.c_str();
      return std::getenv(name);
    }));
  } catch (const fp8kit::Error& e) {
    std::fprintf(stderr, "fp8kit: error: %s\n", fp8kit::one_line(e.what()).c_str());
    return fp8kit::cli::kExitUsage;
  }
  try {
    return run();
  } catch (const fp8kit::Error& e) {
    std::fprintf(stderr, "fp8kit: error: %s\n", fp8kit::one_line(e.what()).c_str());
    return fp8kit::cli::kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8kit: internal error: %s\n", fp8kit::one_line(e.what()).c_str());
    return fp8kit::cli::kExitError;
  }
}
