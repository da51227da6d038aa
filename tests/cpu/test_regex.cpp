// io::Regex (src/io/regex.h): Python re.match semantics (anchored at the start only, lookaround
// included), fast on patterns that make a backtracking engine exponential, and an error naming
// the pattern for what the DFA matcher cannot run.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "io/regex.h"
#include "expect_error.h"

namespace fp8kit {
namespace {

TEST(Regex, MatchesAtTheStartLikePythonReMatch) {
  const io::Regex r(".*mlp\\.gate$", "test");
  EXPECT_TRUE(r.matches_at_start("model.layers.1.mlp.gate"));
  EXPECT_FALSE(r.matches_at_start("model.layers.1.mlp.gate_proj"));
  const io::Regex prefix("model\\.layers\\.0\\.", "test");
  EXPECT_TRUE(prefix.matches_at_start("model.layers.0.self_attn.q_proj"));  // not anchored at the end
  EXPECT_FALSE(prefix.matches_at_start("x.model.layers.0.self_attn.q_proj"));  // anchored at the start
  EXPECT_TRUE(io::Regex("", "test").matches_at_start("anything"));
  EXPECT_TRUE(io::Regex("lm_head|.*embed", "test").matches_at_start("model.embed_tokens"));
}

TEST(Regex, LinearTimeOnPatternsThatBacktrack) {
  std::string pattern;
  for (int i = 0; i < 100; ++i) pattern += "(a*)*";
  pattern += "b";
  const io::Regex r(pattern, "test");  // std::regex: 2^16 paths took 84 s at 16 groups
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(r.matches_at_start(std::string(5000, 'a') + "c"));
  EXPECT_TRUE(r.matches_at_start(std::string(5000, 'a') + "b"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
}

TEST(Regex, LookaroundMatchesAsPython) {
  const io::Regex r("x(?!y)", "test");
  EXPECT_TRUE(r.matches_at_start("xz"));
  EXPECT_FALSE(r.matches_at_start("xy"));
  EXPECT_TRUE(io::Regex("(?=model).*proj", "test").matches_at_start("model.q_proj"));
}

TEST(Regex, WhatTheDfaMatcherCannotRunIsAnErrorNamingThePattern) {
  testing::expect_invalid([] { io::Regex("(a)\\1", "--ignore pattern"); },
                          "--ignore pattern '(a)\\x5c1' is not a regular expression fp8kit can match (a backreference); "
                          "fp8kit matches re: patterns without backtracking, which rules out backreferences and "
                          "recursion");
  testing::expect_invalid([] { io::Regex("(\n", "p"); },
                          "p '(\\x0a' is not a regular expression fp8kit can match (missing closing parenthesis at offset "
                          "2); fp8kit matches re: patterns without backtracking, which rules out backreferences and "
                          "recursion");
}

}  // namespace
}  // namespace fp8kit
