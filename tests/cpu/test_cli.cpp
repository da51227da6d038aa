// The fp8kit binary end to end: quantize -> inspect -> dequantize on a synthetic checkpoint, the
// demo, and the exit codes and one-line messages of bad command lines and bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <sys/wait.h>

#include "convert/synthetic_checkpoint.h"
#include "fp8kit/checkpoint.h"
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
           {"FP8KIT_NUM_THREADS=abc", "FP8KIT_NUM_THREADS='abc': expected an integer from 1 to 1024"},
           {"FP8KIT_NUM_THREADS=100000", "FP8KIT_NUM_THREADS='100000': expected an integer from 1 to 1024"},
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
}

}  // namespace
}  // namespace fp8kit
