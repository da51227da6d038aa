// An open-addressing hash map from a pair of token ids to (merge rank, merged id): the BPE inner
// loop looks a pair up for every symbol boundary, and std::unordered_map's node chasing
// dominates it. Tested through tests/cpu/test_tokenizer.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace fp8kit::tok {

struct Merge {
  int32_t rank = -1;  // -1: no merge
  int32_t id = -1;
};

class PairMap {
 public:
  // Room for `n` entries at a load factor of at most 1/2.
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    keys_.assign(cap, kEmpty);
    values_.assign(cap, Merge{});
    mask_ = cap - 1;
  }
  // Inserts or overwrites (a later merge of the same pair wins, as in tokenizers' HashMap).
  void put(int32_t a, int32_t b, Merge m) {
    const uint64_t key = pack(a, b);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == kEmpty || keys_[i] == key) {
        keys_[i] = key;
        values_[i] = m;
        return;
      }
    }
  }
  Merge get(int32_t a, int32_t b) const {
    if (keys_.empty()) return {};
    const uint64_t key = pack(a, b);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == key) return values_[i];
      if (keys_[i] == kEmpty) return {};
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pack(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static size_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
  size_t mask_ = 0;
};

}  // namespace fp8kit::tok
