// `fp8kit generate` and `fp8kit eval` end to end on small synthetic checkpoints: the JSON keys,
// greedy determinism, the streamed text, --calculate-kv-scales, the progress bar (only on a
// terminal), the one-line errors of bad inputs, and docs/examples/generate.cpp.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runner_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using testing::run_cli;

// Runs a shell command line; its stdout (and what it redirects there) captured.
testing::CommandResult run_command(const std::string& command) {
  testing::CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

TEST(CliRunner, GeneratePrintsTheJsonItPromises) {
  const std::string root = testing::scratch_dir();
  const std::string model = runner_test::write_model(root + "/moe");
  const std::string args = "generate " + model + " --prompt-ids \"" + ids_text(runner_test::ids(12, 128, 1)) +
                           "\" -n 5 --temperature 0 --ignore-eos --json";
  const auto r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["ids"].size(), 5u);
  EXPECT_TRUE(j["text"].is_null());  // the synthetic model has no tokenizer
  EXPECT_EQ(j["prompt_tokens"], 12);
  EXPECT_GT(j["prompt_tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(j["decode_tokens"], 4);
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(j["finish_reason"], "length");
  const auto again = run_cli(args + " --kv-cache-tokens 512 --max-tokens-per-step 5");  // greedy: the same ids
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(nlohmann::json::parse(again.output.substr(again.output.find('{')))["ids"], j["ids"]);

  const auto plain = run_cli("generate " + model + " --prompt-ids \"1 2 3\" -n 3 --temperature 0 --ignore-eos");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("quantization none"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("decode: 2 tokens in"), std::string::npos) << plain.output;
  const auto online = run_cli("generate " + model + " --prompt-ids \"1 2 3\" -n 1 --quantization fp8 --kv-cache-dtype fp8");
  ASSERT_EQ(online.exit_code, 0) << online.output;
  EXPECT_NE(online.output.find("quantization fp8 online"), std::string::npos) << online.output;
  EXPECT_NE(online.output.find("KV cache fp8_e4m3"), std::string::npos) << online.output;
}

TEST(CliRunner, GenerateErrorsAreOneLine) {
  const std::string root = testing::scratch_dir();
  const std::string model = runner_test::write_model(root + "/moe");
  auto r = run_cli("generate " + model + " --prompt hello");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "fp8kit: error: --prompt: " + model + " has no tokenizer.json (use --prompt-ids)\n");
  r = run_cli("generate " + model + " --prompt-ids \"1 x\"");
  EXPECT_EQ(r.output, "fp8kit: error: --prompt-ids: 'x' is not a token id\n");
  r = run_cli("generate " + model + " --prompt-ids \"1 2\" --chat");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--chat: chat templates are Jinja programs"), std::string::npos) << r.output;
  r = run_cli("generate " + model + " --prompt-ids \"1 2\" --kv-cache-memory 12Q");
  EXPECT_EQ(r.output, "fp8kit: error: --kv-cache-memory: '12Q' is not a memory size (bytes, or a number with K, M, G / "
                      "KiB, MiB, GiB)\n");
  r = run_cli("generate " + model + " --prompt-ids \"1 2\" -n 100 --kv-cache-tokens 16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("\nfp8kit: error: request 0: 2 prompt tokens + max_tokens 100 need 7 KV-cache blocks of 16 "
                          "tokens, the pool has 1 (a larger --kv-cache-memory or --kv-cache-tokens)\n"),
            std::string::npos)
      << r.output;
  r = run_cli("generate " + model + " --prompt-ids \"1 2\" --kv-cache-dtype fp9");
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli("generate " + model);
  EXPECT_EQ(r.output, "fp8kit: error: give one of --prompt and --prompt-ids\n");
}

TEST(CliRunner, EvalPrintsTheJsonItPromises) {
  const std::string root = testing::scratch_dir();
  const std::string bf16 = runner_test::write_model(root + "/bf16");
  QuantizeOptions q;
  q.scheme = QuantScheme::kPerTensor;
  quantize_checkpoint(bf16, root + "/fp8", q);
  std::ofstream(root + "/tokens.txt") << ids_text(runner_test::ids(130, 128, 2)) << "\n";
  auto r = run_cli("eval " + root + "/fp8 --base " + bf16 + " --tokens " + root + "/tokens.txt --ctx 64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  for (const char* key : {"ppl", "base_ppl", "kld_mean", "kld_stderr", "kld_median", "kld_p99", "kld_max",
                          "top1_agreement", "delta_p_rms"}) {
    EXPECT_TRUE(j[key].is_number()) << key << ": " << r.output;
  }
  EXPECT_EQ(j["tokens"], 2 * 31);
  EXPECT_EQ(j["windows"], 2);
  EXPECT_GT(j["kld_mean"].get<double>(), 0.0);

  r = run_cli("eval " + bf16 + " --tokens " + root + "/tokens.txt --ctx 64 --first 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  windows: 2 of 64 tokens; 126 tokens scored (window positions 1-63)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("KL divergence"), std::string::npos) << r.output;  // no base
  r = run_cli("eval " + bf16 + " --tokens " + root + "/tokens.txt --ctx 64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(nlohmann::json::parse(r.output.substr(r.output.find('{')))["kld_mean"].is_null());

  // Two models against one pass of the base: a JSON line each, the first as when evaluated alone.
  r = run_cli("eval " + root + "/fp8 " + bf16 + " --base " + bf16 + " --tokens " + root + "/tokens.txt --ctx 64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string lines = r.output.substr(r.output.find('{'));
  const auto first = nlohmann::json::parse(lines.substr(0, lines.find('\n')));
  const auto second = nlohmann::json::parse(lines.substr(lines.find('\n') + 1));
  EXPECT_EQ(first["model"], root + "/fp8");
  EXPECT_EQ(first["kld_mean"], j["kld_mean"]);
  EXPECT_EQ(second["kld_max"], 0.0);  // the base against itself
  EXPECT_EQ(second["top1_agreement"], 1.0);
}

TEST(CliRunner, EvalErrorsAreOneLine) {
  const std::string root = testing::scratch_dir();
  const std::string model = runner_test::write_model(root + "/moe");
  convert::SyntheticModelSpec wide = runner_test::small_spec();
  wide.vocab_size = 256;
  runner_test::write_model(root + "/wide", wide);
  std::ofstream(root + "/tokens.txt") << ids_text(runner_test::ids(70, 128, 2));
  auto r = run_cli("eval " + model + " --base " + root + "/wide --tokens " + root + "/tokens.txt --ctx 32");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("fp8kit: error: eval: " + model + " has a vocabulary of 128 tokens but the base " + root +
                          "/wide has 256\n"),
            std::string::npos)
      << r.output;
  r = run_cli("eval " + model + " --text " + root + "/tokens.txt");
  EXPECT_EQ(r.output, "fp8kit: error: --text: no tokenizer.json in " + model + " (give --tokens)\n");
  r = run_cli("eval " + model + " --tokens " + root + "/missing.txt");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing.txt"), std::string::npos) << r.output;
}

TEST(CliRunner, CalculatedKvScalesChangeTheFp8Cache) {
  // An FP8 checkpoint without KV scales: scales 1.0 with the spec's warning (Fp8KVCacheMethod;
  // a 16-bit model has no KV-cache method and no warning, as in vLLM), against scales from the
  // first step's data: the same FP8 cache, other numbers.
  const std::string root = testing::scratch_dir();
  const std::string bf16 = runner_test::write_model(root + "/moe");
  const std::string model = runner_test::quantize(bf16, root + "/fp8", QuantScheme::kPerTensor);
  std::ofstream(root + "/tokens.txt") << ids_text(runner_test::ids(64, 128, 3)) << "\n";
  const std::string args = "eval " + model + " --base " + bf16 + " --tokens " + root + "/tokens.txt --ctx 64 --json "
                           "--kv-cache-dtype fp8";
  const auto fixed = run_cli(args), calculated = run_cli(args + " --calculate-kv-scales");
  ASSERT_EQ(fixed.exit_code, 0) << fixed.output;
  ASSERT_EQ(calculated.exit_code, 0) << calculated.output;
  EXPECT_NE(fixed.output.find("Using KV cache scaling factor 1.0 for fp8_e4m3"), std::string::npos) << fixed.output;
  EXPECT_EQ(calculated.output.find("Using KV cache scaling factor 1.0"), std::string::npos) << calculated.output;
  const auto kld = [](const testing::CommandResult& r) {
    return nlohmann::json::parse(r.output.substr(r.output.find('{')))["kld_mean"].get<double>();
  };
  EXPECT_TRUE(kld(fixed) > 0 && kld(calculated) > 0) << kld(fixed) << " " << kld(calculated);
  EXPECT_NE(kld(fixed), kld(calculated));
}

TEST(CliRunner, EvalDrawsItsProgressBarOnlyOnATerminal) {
  const std::string root = testing::scratch_dir();
  const std::string model = runner_test::write_model(root + "/moe");
  std::ofstream(root + "/tokens.txt") << ids_text(runner_test::ids(96, 128, 4)) << "\n";
  const std::string args = "eval " + model + " --tokens " + root + "/tokens.txt --ctx 32";
  // stderr on a pseudo-terminal (the parent keeps the slave open, so nothing written is lost).
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const std::string slave_name = ptsname(master);
  const int slave = open(slave_name.c_str(), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  const auto on_terminal = [&](const std::string& extra) {
    const auto r = run_command(std::string(FP8KIT_CLI_PATH) + " " + args + extra + " 2>" + slave_name);
    std::string terminal;
    fcntl(master, F_SETFL, O_NONBLOCK);
    char buffer[4096];
    for (ssize_t n; (n = read(master, buffer, sizeof buffer)) > 0;) terminal.append(buffer, size_t(n));
    EXPECT_EQ(r.exit_code, 0) << r.output << terminal;
    return terminal;
  };
  const std::string drawn = on_terminal("");
  EXPECT_NE(drawn.find("\r  eval [#########                   ]  33%  1/3 windows"), std::string::npos) << drawn;
  EXPECT_NE(drawn.find("100%  3/3 windows"), std::string::npos) << drawn;
  EXPECT_EQ(on_terminal(" --json").find("windows/s"), std::string::npos);  // JSON output: no bar
  close(slave);
  close(master);
  const auto piped = run_cli(args);  // stderr a pipe: no bar
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find('\r'), std::string::npos) << piped.output;
  EXPECT_EQ(piped.output.find("windows/s"), std::string::npos) << piped.output;
}

#ifdef FP8KIT_EXAMPLE_GENERATE
TEST(CliRunner, DocumentedEngineExampleRuns) {
  // docs/examples/generate.cpp: its greedy request gives the ids `fp8kit generate` gives, its
  // sampled one the same ids run after run, and its score a log-probability.
  const std::string root = testing::scratch_dir();
  const std::string model = runner_test::write_model(root + "/moe");
  const auto example = [&](const std::string& extra) {
    const auto r = run_command(std::string(FP8KIT_EXAMPLE_GENERATE) + " " + model + extra + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  };
  const std::string out = example("");
  const auto cli = run_cli("generate " + model + " --prompt-ids \"1 5 9 14 20 27\" -n 8 --temperature 0 --json");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  const auto ids = nlohmann::json::parse(cli.output.substr(cli.output.find('{')))["ids"].get<std::vector<int32_t>>();
  EXPECT_NE(out.find("Qwen3MoeForCausalLM, quantization none, KV cache 64 blocks\n"), std::string::npos) << out;
  EXPECT_NE(out.find("request 0 (greedy): " + ids_text(ids) + "\n"), std::string::npos) << out;
  const size_t sampled = out.find("request 1 (sampled): ");
  ASSERT_NE(sampled, std::string::npos) << out;
  EXPECT_EQ(example(""), out);  // seeded: the same tokens every run
  const std::string score_text = "log p(token 27 | prompt) = ";
  const size_t score = out.find(score_text);
  ASSERT_NE(score, std::string::npos) << out;
  const double logp = std::atof(out.c_str() + score + score_text.size());
  EXPECT_TRUE(logp < 0 && logp > -20) << out;
  EXPECT_NE(example(" fp8").find("quantization fp8 online"), std::string::npos);
  const std::string fp8 = runner_test::quantize(model, root + "/fp8", QuantScheme::kPerTensor);
  const auto r = run_command(std::string(FP8KIT_EXAMPLE_GENERATE) + " " + fp8 + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("quantization fp8 per-tensor (dynamic activations)"), std::string::npos) << r.output;
}
#endif

}  // namespace
}  // namespace fp8kit
