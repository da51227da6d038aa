// The paged KV cache of the model runner: one fixed pool of blocks (block_size tokens each) shared
// by every layer, per layer one key and one value cache [num_blocks, block_size, num_kv_heads,
// head_dim] in the cache dtype (the model dtype for auto, bytes for fp8), a free list, and the
// reservations that admit a request only when its whole run fits (so a running sequence never
// finds the pool empty). Tested by tests/cpu/test_kv_cache_pool.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8kit/device.h"
#include "fp8kit/dtype.h"
#include "fp8kit/ops/kv_cache.h"
#include "fp8kit/tensor.h"

namespace fp8kit::runner {

struct KvCacheLayout {
  int64_t num_layers = 0, num_kv_heads = 0, head_dim = 0;
  DType model_dtype = DType::kBF16;
  ops::KvCacheDtype dtype = ops::KvCacheDtype::kAuto;
  int64_t block_size = 16;
  DType element_dtype() const;      // the model dtype (auto) or u8
  int64_t bytes_per_block() const;  // all layers, keys and values
};

// Blocks for a pool of `num_tokens` tokens, or of `memory_bytes` bytes (exactly one positive);
// Error(kInvalidArgument) naming the option for a pool of no block, one beyond 2^31 blocks, or
// one larger than the machine's physical memory.
int64_t kv_pool_blocks(const KvCacheLayout& layout, int64_t num_tokens, int64_t memory_bytes);

class KvCachePool {
 public:
  KvCachePool(const KvCacheLayout& layout, int64_t num_blocks, Device device);

  const KvCacheLayout& layout() const { return layout_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return layout_.block_size; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Free blocks not promised to a running request.
  int64_t unreserved_blocks() const { return free_blocks() - reserved_; }
  int64_t bytes() const { return num_blocks_ * layout_.bytes_per_block(); }
  // Blocks that hold `tokens` tokens.
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size() - 1) / block_size(); }

  // Promises `blocks` to a request; false (nothing changes) when fewer are unreserved.
  bool reserve(int64_t blocks);
  // Takes one block of a reservation (Error(kInternal) when there is none: a scheduler bug).
  int32_t allocate_reserved();
  // Gives back a request's blocks and what is left of its reservation.
  void release(std::vector<int32_t>& blocks, int64_t unused_reservation);

  const Tensor& key_cache(int64_t layer) const { return keys_[static_cast<size_t>(layer)]; }
  const Tensor& value_cache(int64_t layer) const { return values_[static_cast<size_t>(layer)]; }

 private:
  KvCacheLayout layout_;
  int64_t num_blocks_;
  int64_t reserved_ = 0;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
  std::vector<Tensor> keys_, values_;
};

}  // namespace fp8kit::runner
