// Hostile tokenizer files: missing fields, unknown stage types, merges naming unknown tokens, ids
// past the cap, invalid UTF-8, options that would change ids fp8kit cannot reproduce, a FIFO, a
// directory and an oversized file. Each is one clear Error naming the file and the field.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "expect_error.h"
#include "fp8kit/model/tokenizer.h"
#include "test_dirs.h"
#include "tokenizer_test_util.h"

namespace fp8kit::testing {
namespace {

void expect_load_error(const json& j, ErrorCode code, const std::string& message) {
  expect_error([&] { Tokenizer::from_json(j.dump()); }, code, message);
}

TEST(TokenizerErrors, MissingAndMistypedFields) {
  json j = byte_level_json();
  j.erase("model");
  expect_load_error(j, ErrorCode::kInvalidArgument, "tokenizer.json: field 'model' is missing");
  j = byte_level_json();
  j["model"].erase("vocab");
  expect_load_error(j, ErrorCode::kInvalidArgument, "tokenizer.json: model: field 'vocab' is missing");
  j = byte_level_json();
  j["model"]["merges"] = "a b";
  expect_load_error(j, ErrorCode::kInvalidArgument, "tokenizer.json: model: field 'merges' must be an array");
  j = byte_level_json();
  j["model"].erase("type");  // tokenizers reads an untyped model with merges as BPE
  EXPECT_EQ(Tokenizer::from_json(j.dump()).encode("hello"), std::vector<int32_t>{259});
  j["model"].erase("merges");
  expect_load_error(j, ErrorCode::kInvalidArgument, "tokenizer.json: model: field 'type' is missing");
  j = byte_level_json();
  j["pre_tokenizer"].erase("type");
  expect_load_error(j, ErrorCode::kInvalidArgument, "tokenizer.json: pre_tokenizer: field 'type' is missing");
  expect_error([] { Tokenizer::from_json("[1, 2]"); }, ErrorCode::kInvalidArgument,
               "tokenizer.json: expected a JSON object, got array");
}

TEST(TokenizerErrors, UnsupportedStagesAreNamed) {
  json j = byte_level_json();
  j["model"]["type"] = "Unigram";
  expect_load_error(j, ErrorCode::kUnsupported, "tokenizer.json: model type 'Unigram' is not supported");
  j = byte_level_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_load_error(j, ErrorCode::kUnsupported, "tokenizer.json: normalizer type 'Lowercase' is not supported");
  j = byte_level_json();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "Whitespace"}}})}};
  expect_load_error(j, ErrorCode::kUnsupported,
                    "tokenizer.json: pre_tokenizer.pretokenizers[0] type 'Whitespace' is not supported");
  j = byte_level_json();
  j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}};
  expect_load_error(j, ErrorCode::kUnsupported, "tokenizer.json: decoder type 'WordPiece' is not supported");
  j = byte_level_json();
  j["truncation"] = {{"max_length", 8}};
  expect_load_error(j, ErrorCode::kUnsupported, "tokenizer.json: truncation is not supported (it must be null)");
  j = byte_level_json();
  j["model"]["dropout"] = 0.1;
  expect_load_error(j, ErrorCode::kUnsupported,
                    "tokenizer.json: model: BPE dropout 0.1 is not supported (it makes encoding random)");
  j = byte_level_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}, {"invert", false}};
  expect_error_containing([&] { Tokenizer::from_json(j.dump()); }, ErrorCode::kInvalidArgument,
                          "tokenizer.json: pre_tokenizer: invalid regex '(a'");
}

TEST(TokenizerErrors, BadVocabAndMerges) {
  json j = byte_level_json();
  j["model"]["merges"].push_back("h zz");
  expect_load_error(j, ErrorCode::kInvalidArgument, "tokenizer.json: model.merges[6]: token 'zz' is not in the vocab");
  j = byte_level_json();
  j["model"]["merges"].push_back("h l");  // "hl" is not in the vocab
  expect_load_error(j, ErrorCode::kInvalidArgument,
                    "tokenizer.json: model.merges[6]: the merged token 'hl' is not in the vocab");
  j = byte_level_json();
  j["model"]["merges"].push_back("h e l");
  expect_load_error(j, ErrorCode::kInvalidArgument,
                    "tokenizer.json: model.merges[6]: 'h e l' is not two tokens separated by one space");
  j = byte_level_json();
  j["model"]["vocab"]["big"] = 1 << 22;
  expect_load_error(j, ErrorCode::kInvalidArgument,
                    "tokenizer.json: model.vocab: token 'big' has id 4194304; ids are integers in [0, 4194304)");
  j = byte_level_json();
  j["model"]["vocab"]["again"] = 5;
  expect_error_containing([&] { Tokenizer::from_json(j.dump()); }, ErrorCode::kInvalidArgument, "id 5 is given to both");
  j = byte_level_json();
  j["model"]["unk_token"] = "<unk>";
  expect_load_error(j, ErrorCode::kInvalidArgument, "tokenizer.json: model: unk_token '<unk>' is not in the vocab");
}

TEST(TokenizerErrors, InvalidJsonText) {
  expect_error_containing([] { Tokenizer::from_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\xff\": 0}}}"); },
                          ErrorCode::kIo, "tokenizer.json: ");
  expect_error_containing([] { Tokenizer::from_json("{\"model\": "); }, ErrorCode::kIo, "tokenizer.json: ");
  expect_error_containing([] { Tokenizer::from_json(std::string(100, '[') + std::string(100, ']')); }, ErrorCode::kIo,
                          "tokenizer.json: ");
}

TEST(TokenizerErrors, FilesThatAreNotRegularOrTooLarge) {
  const std::string dir = scratch_dir();
  expect_error([&] { Tokenizer::from_directory(dir); }, ErrorCode::kIo, dir + ": no tokenizer.json in this directory");
  const std::string path = dir + "/tokenizer.json";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_error([&] { Tokenizer::from_directory(dir); }, ErrorCode::kIo, path + ": not a regular file");
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  expect_error([&] { Tokenizer::from_file(path); }, ErrorCode::kIo, path + ": not a regular file");
  std::filesystem::remove(path);
  { std::ofstream(path) << "{}"; }
  std::filesystem::resize_file(path, (128u << 20) + 1);  // sparse: nothing is written
  expect_error([&] { Tokenizer::from_file(path); }, ErrorCode::kIo,
               path + ": 134217729 bytes, more than the 134217728 bytes fp8kit reads from such a file");
}

// Random byte edits of valid files: loading and encoding either work or throw fp8kit::Error.
TEST(TokenizerErrors, MutatedFilesFailCleanly) {
  std::mt19937 rng(7);
  for (const json& base : {byte_level_json(), sentencepiece_json()}) {
    const std::string text = base.dump();
    for (int trial = 0; trial < 150; ++trial) {
      std::string mutated = text;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % mutated.size();
        const char bytes[] = {'"', '{', '}', '[', ']', ',', ':', '0', '9', ' ', '\\', 'a', '\xff'};
        if (rng() % 2 == 0) {
          mutated[at] = bytes[rng() % sizeof(bytes)];
        } else {
          mutated.erase(at, 1 + rng() % 8);
        }
      }
      try {
        const Tokenizer t = Tokenizer::from_json(mutated);
        const auto ids = t.encode("hello world <|end|> ab \u00e9 12");
        (void)t.decode(ids);
      } catch (const Error&) {
        // a clear error is the expected outcome for most edits
      }
    }
  }
}

}  // namespace
}  // namespace fp8kit::testing
