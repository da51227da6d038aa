// The tokenizer's parts one by one, with hand-checked results: UTF-8 validation and tokenizers'
// lossy decoding, the byte-level alphabet, the five split behaviours, PCRE2 with Oniguruma's \s,
// normalizers (NFC, Strip), pre-tokenizers (Metaspace, Digits) and decoders (Metaspace, Strip).
#include <gtest/gtest.h>

#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/split.h"
#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {
namespace {

std::vector<std::string> texts(const std::vector<Word>& words) {
  std::vector<std::string> out;
  for (const Word& w : words) out.push_back(w.text);
  return out;
}

std::vector<std::string> pre_tokenize(const Json& j, const std::string& text) {
  std::vector<Word> words = {{text, true}};
  make_pre_tokenizer(j, "pre_tokenizer")->pre_tokenize(words);
  return texts(words);
}

std::string decode(const Json& j, std::vector<std::string> tokens) {
  make_decoder(j, "decoder")->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

using Strings = std::vector<std::string>;

TEST(TokenizerUtf8, ValidationAndLossyDecoding) {
  EXPECT_EQ(find_invalid_utf8("plain ascii text, long enough for the 8-byte path"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\u00e9 \U0001f600"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xc0\xaf"), 2u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("\xed\xa0\x80"), 0u);        // a surrogate
  EXPECT_EQ(find_invalid_utf8("x\xf4\x90\x80\x80"), 1u);   // past U+10FFFF
  EXPECT_EQ(find_invalid_utf8("12345678\xe2\x82"), 8u);    // cut after the ASCII fast path
  // One U+FFFD per maximal invalid subpart, as Rust's String::from_utf8_lossy.
  EXPECT_EQ(utf8_lossy("a\xe2\x82" "b"), "a\ufffd" "b");
  EXPECT_EQ(utf8_lossy("\x80\x80"), "\ufffd\ufffd");
  EXPECT_EQ(utf8_lossy("\xf0\x9f\x98"), "\ufffd");
  EXPECT_TRUE(is_white_space(U'\u3000'));
  EXPECT_FALSE(is_white_space(U'\u180e'));  // Mongolian vowel separator: not White_Space since Unicode 6.3
}

TEST(TokenizerByteLevelAlphabet, PrintableBytesStandForThemselves) {
  const ByteLevelAlphabet& a = ByteLevelAlphabet::get();
  EXPECT_EQ(a.byte_to_text['A'], "A");
  EXPECT_EQ(a.byte_to_text[' '], "\u0120");   // Ġ
  EXPECT_EQ(a.byte_to_text['\n'], "\u010a");  // Ċ
  EXPECT_EQ(a.byte_to_text[0xAD], "\u0143");  // the last of the 68 shifted bytes
  std::string bytes;
  ASSERT_TRUE(byte_level_decode("\u0120hi\u010a", bytes));
  EXPECT_EQ(bytes, " hi\n");
  EXPECT_FALSE(byte_level_decode("<\u4e00>", bytes));
}

TEST(TokenizerSplit, FiveBehaviours) {
  const Regex dash("-", "test");
  const Word w{"a-b--c", true};
  auto split = [&](SplitBehavior b, bool invert = false) {
    std::vector<Word> out;
    split_segments(w, regex_segments(dash, w.text), b, invert, out);
    return texts(out);
  };
  EXPECT_EQ(split(SplitBehavior::kIsolated), (Strings{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split(SplitBehavior::kRemoved), (Strings{"a", "b", "c"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithPrevious), (Strings{"a-", "b-", "-", "c"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithNext), (Strings{"a", "-b", "-", "-c"}));
  EXPECT_EQ(split(SplitBehavior::kContiguous), (Strings{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(split(SplitBehavior::kRemoved, /*invert=*/true), (Strings{"-", "-", "-"}));
}

TEST(TokenizerRegex, WhiteSpaceIsOnigurumas) {
  const Regex space("\\s+", "test");
  std::vector<std::pair<size_t, size_t>> matches;
  space.find_all("a\u00a0\u3000b\u180ec", [&](size_t b, size_t e) { matches.emplace_back(b, e); });
  // NBSP + ideographic space match; U+180E does not (PCRE2's own \s would take it).
  EXPECT_EQ(matches, (std::vector<std::pair<size_t, size_t>>{{1, 6}}));
}

TEST(TokenizerPreTokenizers, MetaspaceAndDigits) {
  const Json metaspace = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(pre_tokenize(metaspace, "hi  there"), (Strings{"\u2581hi", "\u2581", "\u2581there"}));
  const Json no_split = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}};
  EXPECT_EQ(pre_tokenize(no_split, "hi there"), (Strings{"\u2581hi\u2581there"}));
  const Json digits = {{"type", "Digits"}, {"individual_digits", true}};
  EXPECT_EQ(pre_tokenize(digits, "a123b\u0663"), (Strings{"a", "1", "2", "3", "b", "\u0663"}));
  const Json runs = {{"type", "Digits"}, {"individual_digits", false}};
  EXPECT_EQ(pre_tokenize(runs, "a123b"), (Strings{"a", "123", "b"}));
}

TEST(TokenizerNormalizers, NfcStripPrependReplace) {
  auto normalize = [](const Json& j, std::string s) {
    make_normalizer(j, "normalizer")->normalize(s);
    return s;
  };
  EXPECT_EQ(normalize({{"type", "NFC"}}, "Cafe\u0301"), "Caf\u00e9");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\ufb01"), "fi");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, "\u3000 a b \t"), "a b");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "\u2581"}}, ""), "");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "_"}}, "a  b c"), "a_b_c");
}

TEST(TokenizerDecoders, MetaspaceStripAndByteLevel) {
  const Json metaspace = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  // tokenizers drops every replacement of the first token.
  EXPECT_EQ(decode(metaspace, {"\u2581a\u2581b", "\u2581c"}), "ab c");
  const Json never = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "never"}, {"split", true}};
  EXPECT_EQ(decode(never, {"\u2581a", "\u2581c"}), " a c");
  EXPECT_EQ(decode({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}, {"  a ", " b"}), " ab");
  // A token outside the alphabet keeps its own bytes; a cut UTF-8 sequence becomes U+FFFD.
  EXPECT_EQ(decode({{"type", "ByteLevel"}}, {"\u0120hi", "<\u4e00>", "\u00c3"}), " hi<\u4e00>\ufffd");
}

}  // namespace
}  // namespace fp8kit::tok
