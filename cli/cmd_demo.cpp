// `fp8kit demo`: the embedded default. Writes a small deterministic BF16 model (Qwen3-MoE names:
// one dense layer, one MoE layer) to a temporary directory, quantizes it with every scheme,
// inspects each result, and prints per scheme the size on disk, the time, and the measured error
// of W and of W.x against BF16; then runs each scheme on the model runner against BF16
// (demo_runner.cpp). No network, no input needed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "commands.h"
#include "convert/quantization_error.h"
#include "convert/synthetic_checkpoint.h"
#include "core/check.h"
#include "demo_runner.h"
#include "fp8kit/convert.h"

namespace fp8kit::cli {
namespace fs = std::filesystem;
namespace {

uint64_t directory_bytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

std::string weight_group(const std::string& name) {
  if (name.find(".self_attn.") != std::string::npos) return "attention q/k/v/o";
  if (name.find(".experts.") != std::string::npos) return "MoE experts";
  if (name.find(".mlp.") != std::string::npos) return "dense MLP";
  return "other";
}

struct Stats {
  int count = 0;
  double w_sum = 0, w_max = 0, y_sum = 0, y_max = 0, row_max = 0;
  void add(const convert::WeightError& e) {
    ++count;
    w_sum += e.weight_rel_error;
    y_sum += e.product_rel_error;
    w_max = std::max(w_max, e.weight_rel_error);
    y_max = std::max(y_max, e.product_rel_error);
    row_max = std::max(row_max, e.worst_row_rel_error);
  }
};

void print_stats_header() {
  std::printf("  %-20s %5s   %-19s   %-19s   %s\n", "weights", "count", "|W-Wq|/|W| mean max", "|Wx-Wqx|/|Wx| mean max",
              "worst row");
}

void print_stats_row(const std::string& label, const Stats& s) {
  std::printf("  %-20s %5d   %8.2e %8.2e     %8.2e %8.2e     %8.2e\n", label.c_str(), s.count, s.w_sum / s.count,
              s.w_max, s.y_sum / s.count, s.y_max, s.row_max);
}

struct SchemeRun {
  std::string label;
  QuantizeOptions options;
};

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "fp8kit-demo-XXXXXX").string();
    FP8KIT_CHECK(::mkdtemp(pattern.data()) != nullptr, ErrorCode::kIo, "cannot create a temporary directory");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int run_demo(const std::string& keep_dir) {
  TempDir temp;
  const std::string root = keep_dir.empty() ? temp.path() : keep_dir;
  fs::create_directories(root);
  convert::SyntheticModelSpec spec;
  const std::string bf16_dir = root + "/bf16";
  FP8KIT_CHECK_ARG(!fs::exists(bf16_dir), "{} already exists", bf16_dir);
  convert::write_synthetic_checkpoint(bf16_dir, spec);
  const uint64_t bf16_bytes = directory_bytes(bf16_dir);
  std::printf("fp8kit demo: a synthetic Qwen3-MoE-style BF16 checkpoint (%lld layers: dense + MoE with %lld experts, "
              "hidden %lld), %.2f MiB, in %s\n",
              (long long)spec.num_layers, (long long)spec.num_experts, (long long)spec.hidden_size,
              bf16_bytes / 1048576.0, root.c_str());

  std::vector<SchemeRun> runs(3);
  runs[0] = {"per-tensor", {}};
  runs[0].options.scheme = QuantScheme::kPerTensor;
  runs[1] = {"per-channel", {}};
  runs[1].options.scheme = QuantScheme::kPerChannel;
  runs[2] = {"block 128x128", {}};
  runs[2].options.scheme = QuantScheme::kBlock;

  struct Summary {
    std::string label;
    uint64_t bytes;
    double seconds;
    Stats all;
    size_t problems;
  };
  std::vector<Summary> summaries;
  for (const SchemeRun& run : runs) {
    const std::string out_dir = root + "/" + quant_scheme_name(run.options.scheme);
    const ConversionReport report = quantize_checkpoint(bf16_dir, out_dir, run.options);
    const InspectReport inspect = inspect_checkpoint(out_dir);
    const std::vector<convert::WeightError> errors = convert::measure_quantization_error(bf16_dir, out_dir);
    std::map<std::string, Stats> groups;
    Stats all;
    for (const auto& e : errors) {
      groups[weight_group(e.name)].add(e);
      all.add(e);
    }
    const uint64_t bytes = directory_bytes(out_dir);
    std::printf("\n== %s: %s (%s)\n", run.label.c_str(), out_dir.c_str(), inspect.format.c_str());
    std::printf("  size on disk %.2f MiB (%.2fx of BF16), quantized in %.3f s, %lld weights FP8, ignored: %zu, "
                "inspect problems: %zu\n",
                bytes / 1048576.0, double(bytes) / bf16_bytes, report.seconds, (long long)report.tensors_quantized,
                report.ignored_layers.size(), inspect.problems.size());
    print_stats_header();
    for (const auto& [label, stats] : groups) print_stats_row(label, stats);
    print_stats_row("all", all);
    for (const std::string& p : inspect.problems) std::printf("  problem: %s\n", p.c_str());
    summaries.push_back({run.label, bytes, report.seconds, all, inspect.problems.size()});
  }
  std::printf("\nsummary  %-14s  %8s  %8s  %11s  %11s  %11s  %8s\n", "scheme", "MiB", "seconds", "W err mean",
              "Wx err mean", "worst row", "problems");
  std::printf("         %-14s  %8.2f  %8s  %11s  %11s  %11s  %8s\n", "bf16 (input)", bf16_bytes / 1048576.0, "-", "-", "-",
              "-", "-");
  for (const Summary& s : summaries) {
    std::printf("         %-14s  %8.2f  %8.3f  %11.3e  %11.3e  %11.3e  %8zu\n", s.label.c_str(), s.bytes / 1048576.0,
                s.seconds, s.all.w_sum / s.all.count, s.all.y_sum / s.all.count, s.all.row_max, s.problems);
  }
  std::vector<DemoModel> runner_models;
  for (const SchemeRun& run : runs) {
    const bool compressed_tensors = run.options.scheme == QuantScheme::kPerChannel;
    runner_models.push_back({run.label, root + "/" + quant_scheme_name(run.options.scheme),
                             compressed_tensors ? "the model loader does not read compressed-tensors checkpoints yet" : ""});
  }
  runner_models.push_back({"fp8 online", bf16_dir, ""});  // the BF16 checkpoint quantized at load
  print_runner_section(bf16_dir, runner_models);
  size_t problems = 0;
  for (const Summary& s : summaries) problems += s.problems;
  return problems == 0 ? 0 : kExitProblems;
}

}  // namespace

void add_demo(CLI::App& app, std::function<int()>& run) {
  auto keep = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("demo", "Quantize a built-in synthetic model with every scheme and report errors");
  cmd->add_option("--dir", *keep, "write the checkpoints here and keep them (default: a temporary directory)");
  cmd->callback([keep, &run] {
    run = [keep] { return run_demo(*keep); };
  });
}

}  // namespace fp8kit::cli
