// The BPE model (see bpe_model.h): loading vocab and merges with checks, and the merge loop.
// Reference: tokenizers/src/models/bpe/model.rs (merge_word, tokenize_with_cache) and word.rs
// (merge_all: lowest rank first, then leftmost). Tested in tests/cpu/test_tokenizer.cpp.
#include "model/tokenizer/bpe_model.h"

#include <algorithm>

#include "core/check.h"
#include "io/json_util.h"
#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/utf8.h"

namespace fp8kit::tok {
namespace {

std::string optional_string(const nlohmann::json& j, const char* name, const std::string& where) {
  const auto it = j.find(name);
  if (it == j.end() || it->is_null()) return {};
  return string_field(j, name, where);
}

// A merge "a b" (one space) or ["a", "b"].
std::pair<std::string, std::string> parse_merge(const nlohmann::json& m, size_t index, const std::string& where) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    FP8KIT_CHECK_ARG(space != std::string::npos && s.find(' ', space + 1) == std::string::npos,
                     "{}.merges[{}]: '{}' is not two tokens separated by one space", where, index, s);
    return {s.substr(0, space), s.substr(space + 1)};
  }
  FP8KIT_CHECK_ARG(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                   "{}.merges[{}]: expected \"a b\" or [\"a\", \"b\"], got {}", where, index, io::json_excerpt(m));
  return {m[0].get<std::string>(), m[1].get<std::string>()};
}

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  int32_t len;  // bytes of the word it covers; 0 once merged into its left neighbour
};

struct QueuedMerge {
  int32_t rank;
  int32_t pos;
  int32_t id;
  bool operator<(const QueuedMerge& o) const {  // the heap's top is the largest: lowest rank, then leftmost
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const std::string& where) {
  const nlohmann::json& dropout = model.contains("dropout") ? model["dropout"] : nlohmann::json();
  FP8KIT_CHECK(dropout.is_null() || (dropout.is_number() && dropout.get<double>() == 0.0), ErrorCode::kUnsupported,
               "{}: BPE dropout {} is not supported (it makes encoding random)", where, io::json_excerpt(dropout));
  fuse_unk_ = bool_field(model, "fuse_unk", false, where);
  byte_fallback_ = bool_field(model, "byte_fallback", false, where);
  ignore_merges_ = bool_field(model, "ignore_merges", false, where);
  prefix_ = optional_string(model, "continuing_subword_prefix", where);
  suffix_ = optional_string(model, "end_of_word_suffix", where);

  const nlohmann::json& vocab = field(model, "vocab", where);
  FP8KIT_CHECK_ARG(vocab.is_object(), "{}: field 'vocab' must be an object of token -> id", where);
  FP8KIT_CHECK_ARG(static_cast<int64_t>(vocab.size()) <= kMaxVocabSize, "{}: vocab has {} tokens, more than the {} fp8kit accepts",
                   where, vocab.size(), kMaxVocabSize);
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    FP8KIT_CHECK_ARG(it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() < kMaxVocabSize,
                     "{}.vocab: token '{}' has id {}; ids are integers in [0, {})", where, it.key(), io::json_excerpt(*it),
                     kMaxVocabSize);
    const auto id = static_cast<int32_t>(it->get<int64_t>());
    if (static_cast<size_t>(id) >= tokens_.size()) {
      tokens_.resize(static_cast<size_t>(id) + 1);
      has_id_.resize(static_cast<size_t>(id) + 1, false);
    }
    FP8KIT_CHECK_ARG(!has_id_[id], "{}.vocab: id {} is given to both '{}' and '{}'", where, id, tokens_[id], it.key());
    tokens_[id] = it.key();
    has_id_[id] = true;
    vocab_.emplace(it.key(), id);
  }

  code_point_id_.assign(0x10000, -1);
  for (const auto& [token, id] : vocab_) {
    size_t i = 0;
    if (token.empty()) continue;
    const char32_t cp = next_code_point(token, i);
    if (i == token.size() && cp < 0x10000) code_point_id_[cp] = id;
  }
  byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) byte_ids_[b] = lookup(fmt::format("<0x{:02X}>", b));

  const auto unk = optional_string(model, "unk_token", where);
  if (!unk.empty()) {
    const int32_t id = lookup(unk);
    FP8KIT_CHECK_ARG(id >= 0, "{}: unk_token '{}' is not in the vocab", where, unk);
    unk_id_ = id;
  }

  const nlohmann::json& merges = field(model, "merges", where);
  FP8KIT_CHECK_ARG(merges.is_array(), "{}: field 'merges' must be an array", where);
  FP8KIT_CHECK_ARG(static_cast<int64_t>(merges.size()) <= kMaxVocabSize, "{}: {} merges, more than the {} fp8kit accepts", where,
                   merges.size(), kMaxVocabSize);
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto [a, b] = parse_merge(merges[i], i, where);
    const int32_t a_id = lookup(a), b_id = lookup(b);
    FP8KIT_CHECK_ARG(a_id >= 0, "{}.merges[{}]: token '{}' is not in the vocab", where, i, a);
    FP8KIT_CHECK_ARG(b_id >= 0, "{}.merges[{}]: token '{}' is not in the vocab", where, i, b);
    FP8KIT_CHECK_ARG(b.size() >= prefix_.size(), "{}.merges[{}]: token '{}' is shorter than the continuing_subword_prefix",
                     where, i, b);
    const std::string merged = a + b.substr(prefix_.size());
    const int32_t id = lookup(merged);
    FP8KIT_CHECK_ARG(id >= 0, "{}.merges[{}]: the merged token '{}' is not in the vocab", where, i, merged);
    merges_.put(a_id, b_id, Merge{static_cast<int32_t>(i), id});
  }
}

int32_t BpeModel::lookup(std::string_view s) const {
  const auto it = vocab_.find(s);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !has_id_[id]) return nullptr;
  return &tokens_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t id = lookup(word);
    if (id >= 0) {
      ids.push_back(id);
      return;
    }
  }
  merge_word(word, ids);
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& ids) const {
  // Scratch kept per thread: a word is short, and two allocations per word cost more than its merges.
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<QueuedMerge> heap;
  symbols.clear();
  heap.clear();
  auto add = [&](int32_t id, size_t len) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, static_cast<int32_t>(len)});
  };
  int32_t pending_unk_len = 0;  // a run of unknown characters not added yet (fuse_unk)
  const bool plain = prefix_.empty() && suffix_.empty();
  std::string with_affixes;
  for (size_t i = 0; i < w.size();) {
    const size_t start = i;
    const char32_t cp = next_code_point(w, i);
    const size_t len = i - start;
    int32_t id;
    if (plain && cp < 0x10000) {
      id = code_point_id_[cp];
    } else {
      with_affixes.clear();
      if (start > 0) with_affixes += prefix_;
      with_affixes.append(w.substr(start, len));
      if (i == w.size()) with_affixes += suffix_;
      id = lookup(with_affixes);
    }
    if (id >= 0) {
      if (pending_unk_len > 0) add(unk_id_, static_cast<size_t>(pending_unk_len));
      pending_unk_len = 0;
      add(id, len);
      continue;
    }
    if (byte_fallback_) {
      // The bytes of the symbol (with its affixes, as tokenizers does) as <0xNN> tokens, when
      // all of them exist; a pending unk is added after them, as in tokenizers.
      const std::string_view s = plain ? w.substr(start, len) : std::string_view(with_affixes);
      bool all = true;
      for (const char c : s) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (const char c : s) add(byte_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk_len > 0 && !fuse_unk_) {
        add(unk_id_, static_cast<size_t>(pending_unk_len));
        pending_unk_len = 0;
      }
      pending_unk_len += static_cast<int32_t>(len);
    }
    // Without an unk token an unknown character is dropped, as in tokenizers.
  }
  if (pending_unk_len > 0) add(unk_id_, static_cast<size_t>(pending_unk_len));
  if (symbols.empty()) return;
  symbols.back().next = -1;

  auto push = [&](QueuedMerge m) {
    heap.push_back(m);
    std::push_heap(heap.begin(), heap.end());
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    const Merge m = merges_.get(symbols[i].id, symbols[i + 1].id);
    if (m.rank >= 0) heap.push_back({m.rank, static_cast<int32_t>(i), m.id});
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const QueuedMerge top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (left.len == 0 || left.next < 0) continue;
    const int32_t right_pos = left.next;
    const Symbol right = symbols[right_pos];
    // A stale entry: the pair at this position changed since it was queued.
    const Merge current = merges_.get(left.id, right.id);
    if (current.rank < 0 || current.id != top.id) continue;
    left.id = top.id;
    left.len += right.len;
    left.next = right.next;
    symbols[right_pos].len = 0;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) {
      const Merge m = merges_.get(symbols[left.prev].id, left.id);
      if (m.rank >= 0) push({m.rank, left.prev, m.id});
    }
    if (left.next >= 0) {
      const Merge m = merges_.get(left.id, symbols[left.next].id);
      if (m.rank >= 0) push({m.rank, top.pos, m.id});
    }
  }
  for (const Symbol& s : symbols) {
    if (s.len != 0) ids.push_back(s.id);
  }
}

}  // namespace fp8kit::tok
