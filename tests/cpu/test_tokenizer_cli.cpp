// `fp8kit tokenize` end to end: ids, --json, --decode (and --stream), --batch, and its errors.
#include <gtest/gtest.h>

#include <fstream>

#include "test_dirs.h"
#include "tokenizer_test_util.h"

namespace fp8kit::testing {
namespace {

std::string model_dir() {
  const std::string dir = scratch_dir();
  std::ofstream(dir + "/tokenizer.json") << byte_level_json().dump();
  return dir;
}

TEST(TokenizeCli, EncodesAndDecodes) {
  const std::string dir = model_dir();
  CommandResult r = run_cli("tokenize " + dir + " --prompt 'hello world'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "259 261 114 108 100\n");
  r = run_cli("tokenize " + dir + " --prompt 'hello world' --json");
  EXPECT_EQ(r.output, "{\"ids\":[259,261,114,108,100],\"tokens\":[\"hello\",\"\u0120wo\",\"r\",\"l\",\"d\"]}\n");
  r = run_cli("tokenize " + dir + " --decode '259 262 261 114 108 100'");
  EXPECT_EQ(r.output, "hello<|end|> world\n");
  r = run_cli("tokenize " + dir + " --decode '259 262 261' --skip-special-tokens --json");
  EXPECT_EQ(r.output, "{\"text\":\"hello wo\"}\n");
  r = run_cli("tokenize " + dir + " --decode '195 169 33 195' --stream --json");
  EXPECT_EQ(r.output, "{\"chunks\":[\"\",\"\u00e9\",\"!\",\"\"],\"rest\":\"\ufffd\"}\n");
  std::ofstream(dir + "/batch.jsonl") << "\"hello\"\n\"a\\nb\"\n";
  r = run_cli("tokenize " + dir + " --text " + dir + "/batch.jsonl --batch");
  EXPECT_EQ(r.output, "259\n97 10 98\n");
}

TEST(TokenizeCli, Errors) {
  const std::string dir = model_dir();
  CommandResult r = run_cli("tokenize " + dir + " --prompt hi --chat");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output,
            "fp8kit: error: --chat: chat templates are Jinja programs and fp8kit has no Jinja engine (no C++ Jinja "
            "library is packaged in Debian or PyPI); pass the formatted text with --prompt\n");
  r = run_cli("tokenize " + dir + " --decode '1 x'");
  EXPECT_EQ(r.output, "fp8kit: error: --decode: 'x' is not a token id\n");
  r = run_cli("tokenize " + dir);
  EXPECT_EQ(r.output, "fp8kit: error: tokenize: give --text FILE, --prompt TEXT or --decode IDS\n");
  r = run_cli("tokenize " + dir + " --text /dev/zero");
  EXPECT_EQ(r.output, "fp8kit: error: /dev/zero: not a regular file\n");
  r = run_cli("tokenize " + dir + "/nothing --prompt hi");
  EXPECT_EQ(r.output, "fp8kit: error: " + dir + "/nothing: no tokenizer.json in this directory\n");
}

}  // namespace
}  // namespace fp8kit::testing
