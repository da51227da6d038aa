// Splitting a word at the matches of a pattern with one of tokenizers' five delimiter behaviours
// (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous), optionally inverted.
// Reference: tokenizers/src/tokenizer/normalizer.rs (NormalizedString::split) and pattern.rs.
// Tested in tests/cpu/test_tokenizer_components.cpp.
#pragma once

#include <string>
#include <vector>

#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/regex.h"

namespace fp8kit::tok {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// "Isolated" -> kIsolated; Error naming `where` for another name.
SplitBehavior parse_split_behavior(const std::string& name, const std::string& where);

// A piece of a word: [begin, end) and whether it is a match of the pattern.
struct Segment {
  size_t begin, end;
  bool is_match;
};

// The segments covering `text`: matches of `regex` and the text between them ([(0,0) no match]
// for empty text, as tokenizers' Pattern::find_matches).
std::vector<Segment> regex_segments(const Regex& regex, const std::string& text);

// Appends to `out` the non-empty pieces of `word` that `behavior` keeps.
void split_segments(const Word& word, std::vector<Segment> segments, SplitBehavior behavior, bool invert,
                    std::vector<Word>& out);

}  // namespace fp8kit::tok
