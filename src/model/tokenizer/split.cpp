// Delimiter behaviours of tokenizers' splits (see split.h).
#include "model/tokenizer/split.h"

#include <algorithm>

#include "core/check.h"

namespace fp8kit::tok {

SplitBehavior parse_split_behavior(const std::string& name, const std::string& where) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  fail(ErrorCode::kUnsupported, "{}: split behavior '{}' is not supported", where, name);
}

std::vector<Segment> regex_segments(const Regex& regex, const std::string& text) {
  std::vector<Segment> segments;
  if (text.empty()) return {{0, 0, false}};
  size_t prev = 0;
  regex.find_all(text, [&](size_t b, size_t e) {
    if (prev != b) segments.push_back({prev, b, false});
    segments.push_back({b, e, true});
    prev = e;
  });
  if (prev != text.size()) segments.push_back({prev, text.size(), false});
  return segments;
}

void split_segments(const Word& word, std::vector<Segment> segments, SplitBehavior behavior, bool invert,
                    std::vector<Word>& out) {
  if (invert) {
    for (Segment& s : segments) s.is_match = !s.is_match;
  }
  // (begin, end, remove) in text order.
  std::vector<Segment> pieces;
  pieces.reserve(segments.size());
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Segment& s : segments) pieces.push_back({s.begin, s.end, false});
      break;
    case SplitBehavior::kRemoved:
      pieces = segments;  // is_match means "remove"
      break;
    case SplitBehavior::kContiguous:
      for (const Segment& s : segments) {
        if (!pieces.empty() && pieces.back().is_match == s.is_match) {
          pieces.back().end = s.end;
        } else {
          pieces.push_back(s);
        }
      }
      for (Segment& p : pieces) p.is_match = false;
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !pieces.empty()) {
          pieces.back().end = s.end;
        } else {
          pieces.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;  // of the segment to the right
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->is_match && !previous_match && !pieces.empty()) {
          pieces.back().begin = it->begin;
        } else {
          pieces.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  for (const Segment& p : pieces) {
    if (p.is_match || p.end == p.begin) continue;
    out.push_back({word.text.substr(p.begin, p.end - p.begin), word.at_text_start && p.begin == 0});
  }
}

}  // namespace fp8kit::tok
