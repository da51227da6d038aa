// fp8kit::Tokenizer on hand-built tokenizer.json files with hand-checked ids: byte-level BPE
// (GPT-2 split pattern, merge order, added tokens and their flags), SentencePiece-style BPE
// (Prepend/Replace normalizer, byte fallback, unk fusing, template), ignore_merges, decoding,
// streamed decoding and tokenizer_config.json. The exact match against Hugging Face tokenizers
// on a large corpus is tests/python/test_tokenizer_interop.py.
#include <gtest/gtest.h>

#include <fstream>

#include "expect_error.h"
#include "test_dirs.h"
#include "tokenizer_test_util.h"
#include "fp8kit/model/tokenizer.h"

namespace fp8kit::testing {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer load(const json& j) { return Tokenizer::from_json(j.dump()); }

json added(int id, const std::string& content, bool special, bool lstrip = false, bool rstrip = false,
           bool single_word = false, bool normalized = false) {
  return {{"id", id},         {"content", content}, {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

TEST(TokenizerByteLevel, MergesLowestRankFirstAndSplitsWithTheGpt2Pattern) {
  const Tokenizer t = load(byte_level_json());
  // "hello" -> he, ll, hell, hello; " world" -> Ġw, Ġwo, r, l, d.
  EXPECT_EQ(t.encode("hello world"), (Ids{259, 261, 114, 108, 100}));
  const Tokenizer::Encoding e = t.encode_with_tokens("hello world");
  EXPECT_EQ(e.tokens, (std::vector<std::string>{"hello", "\u0120wo", "r", "l", "d"}));
  // Contractions and digits are their own pieces; "  x": the regex's \s+(?!\S) leaves one space.
  EXPECT_EQ(t.encode("he's 12"), (Ids{256, 39, 115, 32, 49, 50}));
  EXPECT_EQ(t.encode("  x"), (Ids{32, 32, 120}));
  EXPECT_EQ(t.encode(""), Ids{});
  EXPECT_EQ(t.vocab_size(), 263);
}

TEST(TokenizerByteLevel, SpecialTokensSplitTheTextAndDecodeBack) {
  const Tokenizer t = load(byte_level_json());
  const Ids ids = t.encode("hello<|end|> world");
  EXPECT_EQ(ids, (Ids{259, 262, 261, 114, 108, 100}));
  EXPECT_EQ(t.decode(ids), "hello<|end|> world");
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/true), "hello world");
  EXPECT_TRUE(t.is_special(262));
  EXPECT_FALSE(t.is_special(259));
  EXPECT_EQ(t.token_to_id("<|end|>"), 262);
  EXPECT_EQ(t.id_to_token(261), "\u0120wo");
  // Every byte string round-trips, emoji and invalid-looking bytes of the alphabet included.
  const std::string text = "caf\u00e9 \U0001f600\t\r\n\n  x\x01";
  EXPECT_EQ(t.decode(t.encode(text)), text);
}

TEST(TokenizerByteLevel, AddedTokenFlags) {
  json j = byte_level_json();
  j["added_tokens"].push_back(added(263, "<mask>", true, /*lstrip=*/true, /*rstrip=*/true));
  j["added_tokens"].push_back(added(264, "word", false, false, false, /*single_word=*/true));
  j["added_tokens"].push_back(added(265, "<mask>x", true));
  const Tokenizer t = load(j);
  // lstrip and rstrip take the spaces around the token.
  EXPECT_EQ(t.encode("a <mask> b"), (Ids{97, 263, 98}));
  const Tokenizer::Encoding e = t.encode_with_tokens("a <mask> b");
  EXPECT_EQ(e.tokens[1], " <mask> ");
  // The longest token at a position wins.
  EXPECT_EQ(t.encode("<mask>xy"), (Ids{265, 121}));
  // single_word: "word" alone matches, inside "sword" it does not.
  EXPECT_EQ(t.encode("word sword"), (Ids{264, 32, 115, 119, 111, 114, 100}));
}

TEST(TokenizerByteLevel, AddedTokenIdsMustBeTheOnesTokenizersAssigns) {
  json j = byte_level_json();
  j["added_tokens"].push_back(added(300, "<x>", true));
  expect_error([&] { load(j); }, ErrorCode::kInvalidArgument,
               "tokenizer.json: added_tokens[1]: token '<x>' has id 300, but tokenizers gives it id 263");
}

TEST(TokenizerSentencePiece, PrependReplaceByteFallbackAndTemplate) {
  const Tokenizer t = load(sentencepiece_json());
  // "ab ab" -> "▁ab▁ab": "▁ a" merges first (rank 0) at both places, then "▁a b".
  EXPECT_EQ(t.encode("ab ab"), (Ids{1, 264, 264}));
  EXPECT_EQ(t.encode("ab ab", /*add_special_tokens=*/false), (Ids{264, 264}));
  // "c" is not in the vocab: its byte <0x63> = 3 + 0x63.
  EXPECT_EQ(t.encode("ac"), (Ids{1, 262, 3 + 0x63}));
  // A 4-byte emoji falls back to four byte tokens.
  EXPECT_EQ(t.encode("\U0001f600", false), (Ids{259, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}));
  EXPECT_EQ(t.decode(Ids{1, 262, 3 + 0x63}), "<s> ac");
  EXPECT_EQ(t.decode(Ids{1, 262, 3 + 0x63}, true), "ac");
  EXPECT_EQ(t.decode(t.encode("ab \U0001f600 ba", false)), "ab \U0001f600 ba");
  // An incomplete byte run decodes to one U+FFFD per byte (tokenizers' ByteFallback).
  EXPECT_EQ(t.decode(Ids{3 + 0xF0, 3 + 0x9F}), "\ufffd\ufffd");
  // <s> in the text is the special token, not its characters.
  EXPECT_EQ(t.encode("<s>a", false), (Ids{1, 262}));
}

TEST(TokenizerBpe, UnknownCharactersFuseOrNotOrVanish) {
  json j = tokenizer_json({{"<unk>", 0}, {"a", 1}}, json::array());
  j["model"]["unk_token"] = "<unk>";
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(load(j).encode("xya"), (Ids{0, 1}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(load(j).encode("xya"), (Ids{0, 0, 1}));
  j["model"]["unk_token"] = nullptr;
  EXPECT_EQ(load(j).encode("xya"), (Ids{1}));
}

TEST(TokenizerBpe, IgnoreMergesTakesAWholeWordFromTheVocab) {
  json j = tokenizer_json({{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}},
                          json::array({"b c", "a b"}));
  EXPECT_EQ(load(j).encode("abc"), (Ids{0, 4}));  // "b c" ranks first; (a, bc) has no merge
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(j).encode("abc"), (Ids{5}));
  EXPECT_EQ(load(j).encode("abcabc"), (Ids{0, 4, 0, 4}));
}

TEST(TokenizerBpe, EqualRanksMergeLeftmostFirst) {
  const json j = tokenizer_json({{"a", 0}, {"aa", 1}}, json::array({"a a"}));
  EXPECT_EQ(load(j).encode("aaa"), (Ids{1, 0}));
  EXPECT_EQ(load(j).encode("aaaa"), (Ids{1, 1}));
}

TEST(TokenizerDecodeStream, HoldsBackIncompleteUtf8) {
  const Tokenizer t = load(byte_level_json());
  const Ids ids = t.encode("\u00e9!");  // é is the bytes C3 A9: two byte-level tokens
  ASSERT_EQ(ids, (Ids{0xC3, 0xA9, 33}));
  DecodeStream stream(t);
  EXPECT_EQ(stream.step(ids[0]), "");
  EXPECT_EQ(stream.step(ids[1]), "\u00e9");
  EXPECT_EQ(stream.step(ids[2]), "!");
  EXPECT_EQ(stream.flush(), "");
  DecodeStream cut(t);
  EXPECT_EQ(cut.step(0xC3), "");
  EXPECT_EQ(cut.flush(), "\ufffd");
  DecodeStream skipping(t, /*skip_special_tokens=*/true);
  std::string text;
  for (const int32_t id : t.encode("hello<|end|> world")) text += skipping.step(id);
  EXPECT_EQ(text, "hello world");
}

TEST(TokenizerApi, BatchEqualsOneByOneAndInvalidUtf8IsRefused) {
  const Tokenizer t = load(byte_level_json());
  const std::vector<std::string> texts = {"hello world", "", "<|end|>", "caf\u00e9"};
  const auto batch = t.encode_batch(texts);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i], t.encode(texts[i]));
  expect_invalid([&] { t.encode("abc\xff\xfe" "def"); }, "text to encode is not valid UTF-8 (byte 3 of 8)");
  expect_invalid([&] { t.encode("\xe2\x82"); }, "text to encode is not valid UTF-8 (byte 0 of 2)");
  expect_invalid([&] { t.decode(Ids{263}); }, "token id 263 is not in the vocabulary of tokenizer.json (263 ids)");
}

TEST(TokenizerApi, LongTextsEncodedInParallelGiveTheSameIds) {
  const Tokenizer t = load(byte_level_json());
  std::string text;
  for (int i = 0; text.size() < (5u << 18); ++i) {  // 1.25 MiB: past the parallel threshold
    text += "hello world " + std::to_string(i) + "  caf\u00e9\n";
    if (i % 97 == 0) text += "<|end|>";
  }
  // encode_with_tokens always runs in one piece, on the calling thread.
  const Ids ids = t.encode(text);
  EXPECT_EQ(ids, t.encode_with_tokens(text).ids);
  EXPECT_EQ(t.decode(ids), text);
}

TEST(TokenizerApi, DirectoryWithTokenizerConfig) {
  const std::string dir = scratch_dir();
  std::ofstream(dir + "/tokenizer.json") << sentencepiece_json().dump();
  std::ofstream(dir + "/tokenizer_config.json")
      << json{{"bos_token", "<s>"}, {"eos_token", {{"__type", "AddedToken"}, {"content", "</s>"}}},
              {"chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}"}}
             .dump();
  const Tokenizer t = Tokenizer::from_directory(dir);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.chat_template(), "{% for m in messages %}{{ m['content'] }}{% endfor %}");
  std::ofstream(dir + "/tokenizer_config.json") << json{{"eos_token", "<eot>"}}.dump();
  expect_invalid([&] { Tokenizer::from_directory(dir); },
                 dir + "/tokenizer_config.json: eos_token '<eot>' is not in the tokenizer's vocabulary");
}

}  // namespace
}  // namespace fp8kit::testing
