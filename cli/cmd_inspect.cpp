// `fp8kit inspect DIR [--json] [--loading]`: what a checkpoint holds and what is wrong with it. Exits 3 when
// problems were found, so scripts can gate on it.
#include <cstdio>

#include "commands.h"
#include "fp8kit/convert.h"

namespace fp8kit::cli {

void add_inspect(CLI::App& app, std::function<int()>& run) {
  struct Args {
    std::string dir;
    bool json = false;
    bool loading = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a checkpoint's quantization, tensors, scales and problems");
  cmd->add_option("DIR", args->dir, "checkpoint directory")->required();
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->add_flag("--loading", args->loading, "also show how the model loader places each tensor (layer, shard, method)");
  cmd->callback([args, &run] {
    run = [args] {
      const InspectReport report = inspect_checkpoint(args->dir, args->loading);
      const std::string text = args->json ? report.to_json().dump(2) + "\n" : report.to_text();
      std::fwrite(text.data(), 1, text.size(), stdout);
      return report.problems.empty() ? 0 : kExitProblems;
    };
  });
}

}  // namespace fp8kit::cli
