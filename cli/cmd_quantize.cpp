// `fp8kit quantize IN OUT` and `fp8kit dequantize IN OUT`.
#include <charconv>
#include <cstdio>
#include <optional>
#include <string_view>
#include <tuple>

#include "commands.h"
#include "core/check.h"
#include "core/names.h"
#include "fp8kit/convert.h"
#include "progress_bar.h"

namespace fp8kit::cli {
namespace {

void print_report(const char* verb, const std::string& out, const ConversionReport& r) {
  std::printf("%s %s: %lld weights converted, %lld tensors copied, %.2f GB -> %.2f GB in %.2f s (%.2f GB/s)\n", verb,
              out.c_str(), (long long)r.tensors_quantized, (long long)r.tensors_copied, r.input_tensor_bytes / 1e9,
              r.output_tensor_bytes / 1e9, r.seconds, r.seconds > 0 ? r.input_tensor_bytes / r.seconds / 1e9 : 0.0);
  if (!r.ignored_layers.empty()) {
    std::printf("ignored layers (%zu):", r.ignored_layers.size());
    for (const std::string& l : r.ignored_layers) std::printf(" %s", l.c_str());
    std::printf("\n");
  }
  for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
}

// "N,K" with two decimal integers that fit int64 (sscanf would saturate, not fail); their range
// is plan_quantization's to check.
std::optional<std::pair<int64_t, int64_t>> parse_block(const std::string& text) {
  const size_t comma = text.find(',');
  if (comma == std::string::npos) return std::nullopt;
  auto number = [](std::string_view s) -> std::optional<int64_t> {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
    return v;
  };
  const auto n = number(std::string_view(text).substr(0, comma)), k = number(std::string_view(text).substr(comma + 1));
  if (!n || !k) return std::nullopt;
  return std::make_pair(*n, *k);
}

}  // namespace

void add_quantize(CLI::App& app, std::function<int()>& run) {
  struct Args {
    std::string in, out, scheme = "block", block = "128,128", ignore_file;
    std::vector<std::string> ignore;
    bool ue8m0 = false, lm_head = false, force = false, quiet = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("quantize", "Quantize a BF16/FP16 Hugging Face checkpoint to FP8 (vLLM format)");
  cmd->add_option("IN", args->in, "input checkpoint directory")->required();
  cmd->add_option("OUT", args->out, "output directory (must not exist unless --force)")->required();
  cmd->add_option("--scheme", args->scheme, "per-tensor | per-channel | block (default block)")
      ->check(CLI::IsMember({"per-tensor", "per-channel", "block"}));
  cmd->add_option("--block", args->block, "block shape N,K for --scheme block (default 128,128)");
  cmd->add_flag("--ue8m0", args->ue8m0, "power-of-two block scales (scale_fmt ue8m0)");
  cmd->add_option("--ignore", args->ignore, "keep a module unquantized: exact module path, or re:REGEX (repeatable)");
  cmd->add_flag("--quantize-lm-head", args->lm_head, "quantize lm_head too");
  cmd->add_flag("--force", args->force, "replace OUT if it exists");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress bar");
  cmd->callback([args, &run] {
    run = [args] {
      QuantizeOptions o;
      o.scheme = args->scheme == "per-tensor"    ? QuantScheme::kPerTensor
                 : args->scheme == "per-channel" ? QuantScheme::kPerChannel
                                                 : QuantScheme::kBlock;
      const std::optional<std::pair<int64_t, int64_t>> block = parse_block(args->block);
      FP8KIT_CHECK_ARG(block.has_value(), "--block {}: expected two positive integers N,K such as 128,128",
                       shown_path(args->block));
      std::tie(o.block_n, o.block_k) = *block;
      o.ue8m0_scales = args->ue8m0;
      o.ignore = args->ignore;
      o.quantize_lm_head = args->lm_head;
      o.force = args->force;
      ConversionReport r;
      {
        ProgressBar bar("quantize", !args->quiet);
        o.progress = bar.callback();
        r = quantize_checkpoint(args->in, args->out, o);
      }
      print_report("quantized", args->out, r);
      return 0;
    };
  });
}

void add_dequantize(CLI::App& app, std::function<int()>& run) {
  struct Args {
    std::string in, out, dtype;
    bool force = false, quiet = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("dequantize", "Turn an FP8 checkpoint back into BF16/FP16");
  cmd->add_option("IN", args->in, "input FP8 checkpoint directory")->required();
  cmd->add_option("OUT", args->out, "output directory (must not exist unless --force)")->required();
  cmd->add_option("--dtype", args->dtype, "bf16 | f16 | f32 (default: the config's torch_dtype, else bf16)")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}));
  cmd->add_flag("--force", args->force, "replace OUT if it exists");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress bar");
  cmd->callback([args, &run] {
    run = [args] {
      DequantizeOptions o;
      if (!args->dtype.empty()) o.out_dtype = dtype_from_name(args->dtype);
      o.force = args->force;
      ConversionReport r;
      {
        ProgressBar bar("dequantize", !args->quiet);
        o.progress = bar.callback();
        r = dequantize_checkpoint(args->in, args->out, o);
      }
      print_report("dequantized", args->out, r);
      return 0;
    };
  });
}

}  // namespace fp8kit::cli
