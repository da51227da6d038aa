// Small hand-built tokenizer.json files for the tokenizer tests: a byte-level BPE (ids 0-255 are
// the bytes in byte order, then named merges) and a SentencePiece-style BPE with byte fallback.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "model/tokenizer/byte_level.h"

namespace fp8kit::testing {

using nlohmann::json;

// {"version": "1.0", ..., "model": BPE(vocab, merges)}, the other stages null.
inline json tokenizer_json(json vocab, json merges) {
  return {{"version", "1.0"},       {"truncation", nullptr},   {"padding", nullptr},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},  {"pre_tokenizer", nullptr}, {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                     {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                     {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                     {"vocab", std::move(vocab)}, {"merges", std::move(merges)}}}};
}

// Byte-level BPE, GPT-2 style: bytes are ids 0-255, then "he"=256, "ll"=257, "hell"=258,
// "hello"=259, "Ġw"=260, "Ġwo"=261, "<|end|>"=262 is a special added token.
inline json byte_level_json() {
  json vocab = json::object();
  const auto& alphabet = tok::ByteLevelAlphabet::get();
  for (int b = 0; b < 256; ++b) vocab[alphabet.byte_to_text[b]] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"Ġw", "o"}};
  json merge_list = json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    merge_list.push_back(a + " " + b);
  }
  json j = tokenizer_json(vocab, merge_list);
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  j["added_tokens"].push_back({{"id", 262}, {"content", "<|end|>"}, {"single_word", false}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", false}, {"special", true}});
  return j;
}

// SentencePiece-style BPE (Llama-2): <unk>=0 <s>=1 </s>=2, <0x00>-<0xFF> = 3-258, "▁"=259 "a"=260
// "b"=261 "▁a"=262 "ab"=263 "▁ab"=264; merges "▁ a", "a b", "▁a b"; Prepend + Replace
// normalizer, byte fallback, "<s> $A" template and the Replace/ByteFallback/Fuse/Strip decoder.
inline json sentencepiece_json() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  vocab["\u2581"] = 259;
  vocab["a"] = 260;
  vocab["b"] = 261;
  vocab["\u2581a"] = 262;
  vocab["ab"] = 263;
  vocab["\u2581ab"] = 264;
  json j = tokenizer_json(vocab, json::array({json::array({"\u2581", "a"}), json::array({"a", "b"}),
                                               json::array({"\u2581a", "b"})}));
  j["model"]["unk_token"] = "<unk>";
  j["model"]["fuse_unk"] = true;
  j["model"]["byte_fallback"] = true;
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                                  {{"type", "Replace"}, {"pattern", {{"String", " "}}},
                                                   {"content", "\u2581"}}})}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                            {{"type", "ByteFallback"}},
                                            {{"type", "Fuse"}},
                                            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"pair", json::array()},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  for (const auto& [id, content] : std::vector<std::pair<int, std::string>>{{0, "<unk>"}, {1, "<s>"}, {2, "</s>"}}) {
    j["added_tokens"].push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  return j;
}

}  // namespace fp8kit::testing
