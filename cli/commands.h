// The fp8kit subcommands. Each registers its options on the CLI11 app and returns the exit code
// of its run; errors are thrown as fp8kit::Error and turned into messages by main.cpp.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace fp8kit::cli {

// Exit codes: 0 success, 1 error, 2 bad command line, 3 inspect found problems.
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitProblems = 3;

// Each add_* registers a subcommand and sets `run` to its action when the subcommand is chosen.
void add_quantize(CLI::App& app, std::function<int()>& run);
void add_dequantize(CLI::App& app, std::function<int()>& run);
void add_inspect(CLI::App& app, std::function<int()>& run);
void add_demo(CLI::App& app, std::function<int()>& run);
void add_tokenize(CLI::App& app, std::function<int()>& run);
// The model runner: generate (generation) and eval (perplexity, KL divergence against a base model).
void add_generate(CLI::App& app, std::function<int()>& run);
void add_eval(CLI::App& app, std::function<int()>& run);

}  // namespace fp8kit::cli
