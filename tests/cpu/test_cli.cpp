// The fp8kit binary end to end: quantize -> inspect -> dequantize on a synthetic checkpoint, the
// demo (its quantization tables and its model-runner table), and the exit codes and one-line messages of bad command lines and bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/wait.h>

#include "convert/synthetic_checkpoint.h"
#include "core/parallel.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"
#include "fp8kit/version.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

TEST(Cli, QuantizeInspectDequantize) {
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  auto r = run_cli("quantize " + root + "/bf16 " + root + "/fp8 --scheme block --block 128,128");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("quantized " + root + "/fp8: 35 weights converted"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ignored layers (2): lm_head model.layers.1.mlp.gate"), std::string::npos) << r.output;

  r = run_cli("inspect " + root + "/fp8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("format       fp8-block"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("problems (0): none"), std::string::npos) << r.output;
  r = run_cli("inspect --json " + root + "/fp8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto json = nlohmann::json::parse(r.output);
  EXPECT_EQ(json["format"], "fp8-block");
  EXPECT_EQ(json["quantization_config"]["weight_block_size"], nlohmann::json({128, 128}));

  r = run_cli("dequantize " + root + "/fp8 " + root + "/back");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Checkpoint::open(root + "/back").info("model.layers.0.mlp.down_proj.weight").dtype, DType::kBF16);
  r = run_cli("inspect " + root + "/back");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("format       unquantized"), std::string::npos) << r.output;
}

TEST(Cli, BadCommandLinesExitTwo) {
  EXPECT_EQ(run_cli("").exit_code, 2);
  EXPECT_EQ(run_cli("frobnicate").exit_code, 2);
  EXPECT_EQ(run_cli("quantize only-one-arg").exit_code, 2);
  const auto r = run_cli("quantize a b --scheme per-row");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("per-row"), std::string::npos) << r.output;
  EXPECT_EQ(run_cli("--help").exit_code, 0);
}

// --version prints the project version of CMakeLists.txt, through the generated version.h; the
// library reports the same.
TEST(Cli, VersionFlag) {
  const std::string expected = std::to_string(FP8KIT_VERSION_MAJOR) + "." + std::to_string(FP8KIT_VERSION_MINOR) + "." +
                               std::to_string(FP8KIT_VERSION_PATCH);
  EXPECT_EQ(std::string(FP8KIT_VERSION_STRING), expected);
  EXPECT_EQ(std::string(fp8kit::version_string()), expected);
  EXPECT_EQ(FP8KIT_VERSION, FP8KIT_VERSION_MAJOR * 10000 + FP8KIT_VERSION_MINOR * 100 + FP8KIT_VERSION_PATCH);
  const auto r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "fp8kit " + expected + "\n");
}

// Every FP8KIT_* knob is parsed once at start-up; a bad value is a usage error naming it.
TEST(Cli, BadKnobsInTheEnvironmentExitTwo) {
  const std::string root = testing::scratch_dir();
  for (const auto& [assignment, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"FP8KIT_PDL=yes", "FP8KIT_PDL='yes': expected 0 or 1"},
           {"FP8KIT_MOE_BLOCK_M=32", "FP8KIT_MOE_BLOCK_M='32': expected 16, 64 or 128"},
           {"FP8KIT_GEMM_BACKEND=cutlass", "FP8KIT_GEMM_BACKEND='cutlass': expected one of decode, wgmma, cublaslt, fallback"}}) {
    const std::string command = assignment + " " + FP8KIT_CLI_PATH + " inspect " + root + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string output;
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
    const int status = pclose(pipe);
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2) << assignment;
    EXPECT_EQ(output, "fp8kit: error: " + message + "\n");
  }
  EXPECT_EQ(run_cli("--threads 1025 inspect " + root).exit_code, 2);
}

TEST(Cli, ErrorsAreOneLineAndExitOne) {
  const std::string root = testing::scratch_dir();
  auto r = run_cli("quantize " + root + "/missing " + root + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output.rfind("fp8kit: error: ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_FALSE(fs::exists(root + "/out"));

  convert::write_synthetic_checkpoint(root + "/bf16", {});
  r = run_cli("quantize " + root + "/bf16 " + root + "/out --block 128x128");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--block 128x128: expected two positive integers N,K"), std::string::npos) << r.output;

  fs::create_directories(root + "/exists");
  r = run_cli("quantize -q " + root + "/bf16 " + root + "/exists");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("already exists; pass --force to replace it"), std::string::npos) << r.output;
  r = run_cli("quantize -q --force " + root + "/bf16 " + root + "/exists");
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // A corrupted shard: a header length beyond the end of the file.
  std::ofstream(root + "/bf16/model.safetensors", std::ios::binary | std::ios::trunc) << std::string("\xff\xff\xff\x7f\0\0\0\0{}", 10);
  r = run_cli("inspect " + root + "/bf16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(root + "/bf16/model.safetensors"), std::string::npos) << r.output;
}

TEST(Cli, InspectExitsThreeOnProblems) {
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  ASSERT_EQ(run_cli("quantize -q " + root + "/bf16 " + root + "/fp8").exit_code, 0);
  // Claim static activations: every weight now lacks its input_scale.
  auto config = read_json_file(root + "/fp8/config.json");
  config["quantization_config"]["activation_scheme"] = "static";
  write_json_file(root + "/fp8/config.json", config);
  const auto r = run_cli("inspect " + root + "/fp8");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("has no input_scale but the activation scheme is static"), std::string::npos) << r.output;
}

TEST(Cli, DemoPrintsATablePerScheme) {
  const std::string root = testing::scratch_dir();
  const auto r = run_cli("demo --dir " + root + "/demo");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"== per-tensor", "== per-channel", "== block 128x128", "summary", "MoE experts"}) {
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  }
  EXPECT_TRUE(fs::exists(root + "/demo/block/config.json"));

  // The model runner's table: each runnable scheme's perplexity, KL and top-1 against BF16, and
  // its prompt and decode speed with 8 generated ids.
  const size_t table = r.output.find("\n== model runner (CPU");
  ASSERT_NE(table, std::string::npos) << r.output;
  std::istringstream rows(r.output.substr(table));
  std::map<std::string, std::string> row;  // label -> the rest of its line
  for (std::string line; std::getline(rows, line);) {
    for (const char* label : {"bf16", "per-tensor", "per-channel", "block 128x128", "fp8 online"}) {
      if (line.rfind(std::string("  ") + label + " ", 0) == 0) row[label] = line.substr(2 + std::strlen(label));
    }
  }
  EXPECT_NE(row["per-channel"].find("not run: the model loader does not read compressed-tensors"), std::string::npos)
      << r.output;
  double ppl = 0, prefill = 0, decode = 0;
  char kl[32] = {}, p99[32] = {}, top1[32] = {};
  ASSERT_EQ(std::sscanf(row["bf16"].c_str(), "%lf %31s %31s %31s %lf %lf", &ppl, kl, p99, top1, &prefill, &decode), 6)
      << r.output;
  EXPECT_EQ(std::string(kl), "-");
  for (const char* label : {"per-tensor", "block 128x128", "fp8 online"}) {
    SCOPED_TRACE(label);
    double kl_mean = 0, kl_p99 = 0, agreement = 0;
    int consumed = 0;
    ASSERT_EQ(std::sscanf(row[label].c_str(), "%lf %lf %lf %lf%% %lf %lf%n", &ppl, &kl_mean, &kl_p99, &agreement,
                          &prefill, &decode, &consumed),
              6)
        << r.output;
    // Measured 0.376 (per-tensor, online) and 0.357 (block): the random model's logits are far
    // sharper than a trained model's, so KL is large; a broken FP8 path gives several nats.
    EXPECT_TRUE(ppl > 1 && kl_mean > 0 && kl_mean < 1.0 && kl_p99 >= kl_mean) << r.output;
    EXPECT_TRUE(agreement > 50 && agreement <= 100) << r.output;
    EXPECT_TRUE(prefill > 0 && decode > 0) << r.output;
    std::istringstream ids(row[label].substr(size_t(consumed)));
    int n = 0;
    for (int id; ids >> id; ++n) EXPECT_TRUE(id >= 0 && id < 1024) << id;
    EXPECT_EQ(n, 8) << r.output;
  }
}

// An FP8 block checkpoint of the synthetic model (dense Qwen3, one layer), quantized once per
// process; each test edits its own copy.
std::string fp8_copy(const std::string& to) {
  static const std::string fp8 = [] {
    const std::string root = testing::process_dir("cli_fp8");
    convert::SyntheticModelSpec spec;
    spec.num_layers = 1;
    spec.moe_layers = {};
    convert::write_synthetic_checkpoint(root + "/bf16", spec);
    quantize_checkpoint(root + "/bf16", root + "/fp8", {});
    return root + "/fp8";
  }();
  fs::copy(fp8, to, fs::copy_options::recursive);
  return to;
}

void set_quant_key(const std::string& dir, const std::string& key, const nlohmann::ordered_json& value) {
  auto config = read_json_file(dir + "/config.json");
  config["quantization_config"][key] = value;
  write_json_file(dir + "/config.json", config);
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

TEST(Cli, BadThreadCountsExitTwo) {
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  const std::string range = "from 1 to " + std::to_string(max_threads());
  // An empty value keeps the default, as for every FP8KIT_* knob (Overrides::parse).
  for (const char* bad : {"0", "-1", "abc", "2147483648", "1e6", "99999999999", "100000"}) {
    const auto r = run_cli("inspect " + root + "/bf16", std::string("FP8KIT_NUM_THREADS=") + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_EQ(r.output.rfind("fp8kit: error: FP8KIT_NUM_THREADS must be an integer " + range + ", got '", 0), 0u)
        << r.output;
    EXPECT_EQ(lines(r.output), 1u) << r.output;
  }
  auto r = run_cli("--threads 0 inspect " + root + "/bf16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--threads: the thread count must be an integer " + range + ", got '0'"), std::string::npos)
      << r.output;
  r = run_cli("--threads 2 inspect " + root + "/bf16", "FP8KIT_NUM_THREADS=abc");  // --threads wins
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(run_cli("inspect " + root + "/bf16", "FP8KIT_NUM_THREADS=3").exit_code, 0);
}

// The probe's F4 under a process limit: no thread can be started at all, not even the interrupt
// thread of main (it aborted every command, --version included, with "terminate called"). A 1 PiB
// stack limit makes every thread's default stack unmappable, so pthread_create fails with EAGAIN
// as under `ulimit -u`, which root ignores. The run goes on on the main thread, with warnings.
TEST(Cli, ThreadsThatCannotStartAreAWarningNotACrash) {
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  const auto starved = [](const std::string& args) {
    const std::string command = "ulimit -S -s 1099511627776 2>/dev/null || exit 77; exec " +
                                std::string(FP8KIT_CLI_PATH) + " " + args + " 2>&1";
    testing::CommandResult r;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return r;
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  };
  auto r = starved("--version");
  if (r.exit_code == 77) GTEST_SKIP() << "the stack limit cannot be raised here";
  const std::string warning = "fp8kit: warning: cannot start the interrupt thread (";
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(warning, 0), 0u) << r.output;
  EXPECT_NE(r.output.find("\nfp8kit " FP8KIT_VERSION_STRING "\n"), std::string::npos) << r.output;
  r = starved("--threads 4 quantize -q " + root + "/bf16 " + root + "/fp8");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(warning, 0), 0u) << r.output;
  EXPECT_EQ(run_cli("inspect " + root + "/fp8").exit_code, 0);
}

TEST(Cli, BlockSizesNeverCrash) {
  const std::string root = testing::scratch_dir();
  const std::vector<std::string> blocks = {"[0,128]", "[128,0]", "[0,0]", "[-128,128]"};
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string& block = blocks[i];
    const std::string dir = fp8_copy(root + "/b" + std::to_string(i));
    set_quant_key(dir, "weight_block_size", nlohmann::ordered_json::parse(block));
    auto r = run_cli("inspect " + dir);
    EXPECT_EQ(r.exit_code, 3) << block << r.output;  // was 136 (SIGFPE)
    EXPECT_NE(r.output.find("config.json: weight_block_size must hold positive integers"), std::string::npos)
        << r.output;
    r = run_cli("dequantize -q " + dir + " " + dir + ".out");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const std::string error = "fp8kit: error: " + dir + "/config.json: weight_block_size must hold positive integers";
    EXPECT_EQ(r.output.rfind(error, 0), 0u) << r.output;
    EXPECT_FALSE(fs::exists(dir + ".out"));
  }
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  for (const char* block : {"9223372036854775807,128", "99999999999999999999,128", "128,0", " 128,128", "128,128,",
                            "1048577,128"}) {
    const auto r = run_cli("quantize -q --block '" + std::string(block) + "' " + root + "/bf16 " + root + "/q");
    EXPECT_EQ(r.exit_code, 1) << block << r.output;  // 2^63 - 1 wrote a checkpoint without weights
    EXPECT_EQ(lines(r.output), 1u) << r.output;
    EXPECT_FALSE(fs::exists(root + "/q"));
  }
  EXPECT_NE(run_cli("quantize -q --block 9223372036854775807,128 " + root + "/bf16 " + root + "/q").output.find(
                "--block 9223372036854775807,128: block sizes must be from 1 to 1048576"),
            std::string::npos);
}

// What vLLM's Fp8Config refuses is a problem of inspect (text, --json, --loading: exit 3) and an
// error of dequantize, with the spec's text.
TEST(Cli, QuantizationConfigsVllmRefuses) {
  const std::string root = testing::scratch_dir();
  const std::vector<std::tuple<std::string, nlohmann::ordered_json, std::string>> cases = {
      {"activation_scheme", "foo", "Unsupported activation scheme foo"},
      {"weight_block_size", {128, 128, 128},
       "The quantization block size of weight must have 2 dimensions, but got 3 dimensions"},
      {"activation_scheme", "static",
       "The block-wise quantization only supports dynamic activation scheme for now, but got static activation "
       "scheme."},
      {"quant_method", 5, "quantization config key 'quant_method' must be a string, got integer"},
      {"activation_scheme", 5, "quantization config key 'activation_scheme' must be a string, got integer"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [key, value, text] = cases[i];
    const std::string dir = fp8_copy(root + "/c" + std::to_string(i));
    set_quant_key(dir, key, value);
    auto r = run_cli("inspect " + dir);
    EXPECT_EQ(r.exit_code, 3) << text << "\n" << r.output;
    EXPECT_NE(r.output.find("  config.json: " + text + "\n"), std::string::npos) << r.output;
    r = run_cli("inspect --json " + dir);
    EXPECT_EQ(r.exit_code, 3) << r.output;
    const auto problems = nlohmann::json::parse(r.output)["problems"];
    EXPECT_NE(std::find(problems.begin(), problems.end(), "config.json: " + text), problems.end()) << r.output;
    EXPECT_EQ(run_cli("inspect --loading " + dir).exit_code, 3);
    r = run_cli("dequantize -q " + dir + " " + dir + ".out");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output, "fp8kit: error: " + dir + "/config.json: " + text + "\n");
    EXPECT_FALSE(fs::exists(dir + ".out"));
  }
}

TEST(Cli, InspectLoadingTrustsNoLayerCount) {
  const std::string root = testing::scratch_dir();
  const std::string dir = fp8_copy(root + "/layers");
  auto config = read_json_file(dir + "/config.json");
  config["num_hidden_layers"] = 1000000000;
  write_json_file(dir + "/config.json", config);
  auto r = run_cli("inspect --loading " + dir);  // grew to an out-of-memory kill
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("config.json: `num_hidden_layers` is 1000000000, but the checkpoint holds tensors of 1 "
                          "layer(s)"),
            std::string::npos)
      << r.output;
  config["num_hidden_layers"] = 1;
  config["head_dim"] = 4294967296;
  write_json_file(dir + "/config.json", config);
  r = run_cli("inspect --loading " + dir);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("config.json: `head_dim` must be a non-negative integer up to 2147483647, got 4294967296"),
            std::string::npos)
      << r.output;
}

TEST(Cli, ErrorsNameEscapedPaths) {
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/nl", {});
  fs::remove(root + "/nl/model.safetensors");
  const std::string name = "a\nfp8kit: ok.safetensors";
  std::ofstream(root + "/nl/" + name, std::ios::binary) << std::string("\x03\0\0\0\0\0\0\0{x}", 11);
  const auto r = run_cli("inspect " + root + "/nl");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(lines(r.output), 1u) << r.output;
  EXPECT_NE(r.output.find(root + "/nl/a\\x0afp8kit: ok.safetensors: "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace fp8kit
