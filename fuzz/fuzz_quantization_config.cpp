// libFuzzer target for config.json and its quantization_config, along the code inspect runs: the
// strict JSON parse of read_json_file, the layout's reading of the config (format, block size,
// ignore patterns, the Fp8Config checks as problems), the scheme of a few weights under its block
// size, ignored-module matching, get_quant_config, and (when the declared layer count passes
// inspect's check) describe_hf_model with tensor placement. Any exception other than
// fp8kit::Error, a broken invariant, a crash or a sanitizer report is a finding.
// Run with scripts/fuzz (seed corpus: fuzz/corpus/quantization_config/).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "convert/checkpoint_layout.h"
#include "convert/inspect_loading.h"
#include "core/checked_math.h"
#include "fp8kit/error.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/model/model_loader.h"
#include "io/json_util.h"

namespace {

using fp8kit::Shape;
using json = nlohmann::ordered_json;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "broken invariant: %s\n", what);
  std::abort();
}

// Weights of real and extreme shapes, each with the scales a loader would pair with it.
void check_schemes(const fp8kit::convert::CheckpointLayout& layout) {
  constexpr int64_t kBig = int64_t(1) << 62;
  for (const Shape& w : {Shape{256, 256}, Shape{576, 7168}, Shape{0, 128}, Shape{kBig, 1}, Shape{1, kBig}}) {
    std::vector<Shape> scales = {{}, {1}, {w[0]}, {w[0], 1}, {2, 2}, {0, 2}};
    if (layout.block_size) {
      const auto [bn, bk] = *layout.block_size;
      scales.push_back({fp8kit::ceil_div(w[0], bn), fp8kit::ceil_div(w[1], bk)});
      scales.push_back({fp8kit::ceil_div(w[0], bn), 1, fp8kit::ceil_div(w[1], bk), 1});
    }
    for (const Shape& s : scales) {
      std::optional<std::pair<int64_t, int64_t>> block;
      const std::string scheme = fp8kit::convert::scale_scheme(w, s, layout, block);
      require(scheme.empty() || scheme == "per-tensor" || scheme == "per-channel" || scheme == "block", "scheme");
      require((scheme == "block") == block.has_value(), "a block scheme has its block");
    }
  }
}

void fuzz_config(const json& config) {
  const json* qc = nullptr;
  for (const char* key : {"quantization_config", "compression_config"}) {
    if (config.contains(key) && config[key].is_object()) {
      qc = &config[key];
      break;
    }
  }
  if (qc != nullptr) {
    fp8kit::convert::CheckpointLayout layout;
    layout.config_file = "config.json";
    fp8kit::convert::read_quantization_config(*qc, layout);
    if (layout.block_size) require(layout.block_size->first > 0 && layout.block_size->second > 0, "positive block");
    require(layout.config_problems.size() <= layout.problems.size(), "config problems are problems");
    check_schemes(layout);
    for (const char* module : {"model.layers.0.mlp.down_proj", "lm_head", "model.layers.1.mlp.gate", ""}) {
      (void)layout.is_ignored(module);
    }
    if (layout.format == "fp8" || layout.format == "fp8-block") {
      // What the layout accepts, Fp8Config accepts: inspect and load_model agree.
      bool accepted = true;
      try {
        (void)fp8kit::Fp8Config::from_config(*qc);
      } catch (const fp8kit::Error&) {
        accepted = false;
      }
      require(accepted == layout.config_problems.empty(), "layout and Fp8Config agree");
    }
  }
  try {
    (void)fp8kit::get_quant_config(config);
  } catch (const fp8kit::Error&) {
  }
  // inspect --loading describes only a config whose layers the checkpoint holds (here 4).
  if (fp8kit::convert::layer_count_problem(config, 4)) return;
  const fp8kit::ModelDescription d = fp8kit::describe_hf_model(config);
  require(d.linears.size() < 100000, "a bounded description");
  auto q = fp8kit::get_quant_config(json::object());
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.3.mlp.experts.1.up_proj.weight",
                           "model.embed_tokens.weight", "lm_head.weight"}) {
    (void)fp8kit::place_tensor(d, *q, name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    // read_json_file's parse: nesting bounded at 128, repeated keys tolerated (last wins).
    const json config = fp8kit::io::parse_json_strict<json>(
        std::string_view(reinterpret_cast<const char*>(data), size), 128, nullptr);
    if (config.is_object()) fuzz_config(config);
  } catch (const fp8kit::Error&) {
    // Rejected input: a message for the user, the expected outcome for most inputs.
  }
  return 0;
}
