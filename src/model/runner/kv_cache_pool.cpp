// KvCachePool (kv_cache_pool.h): the runner's fixed pool of KV-cache blocks and its sizing.
// Tested by tests/cpu/test_kv_cache_pool.cpp.
#include "model/runner/kv_cache_pool.h"

#include <unistd.h>

#include <limits>

#include "core/check.h"

namespace fp8kit::runner {

DType KvCacheLayout::element_dtype() const { return dtype == ops::KvCacheDtype::kAuto ? model_dtype : DType::kU8; }

int64_t KvCacheLayout::bytes_per_block() const {
  return 2 * num_layers * block_size * num_kv_heads * head_dim * static_cast<int64_t>(dtype_size(element_dtype()));
}

int64_t kv_pool_blocks(const KvCacheLayout& layout, int64_t num_tokens, int64_t memory_bytes) {
  FP8KIT_CHECK_ARG((num_tokens > 0) != (memory_bytes > 0),
                   "KV cache: give exactly one of a token count and a memory size (got {} tokens, {} bytes)", num_tokens,
                   memory_bytes);
  const int64_t per_block = layout.bytes_per_block();
  FP8KIT_CHECK_ARG(layout.block_size > 0 && per_block > 0, "KV cache: block size {} is not positive", layout.block_size);
  const int64_t max_tokens = std::numeric_limits<int64_t>::max() / 2;
  FP8KIT_CHECK_ARG(num_tokens <= max_tokens, "KV cache: {} tokens is too many", num_tokens);
  const int64_t blocks =
      num_tokens > 0 ? (num_tokens + layout.block_size - 1) / layout.block_size : memory_bytes / per_block;
  FP8KIT_CHECK_ARG(blocks > 0, "KV cache: {} bytes do not hold one block of {} tokens ({} bytes over {} layers)",
                   memory_bytes, layout.block_size, per_block, layout.num_layers);
  FP8KIT_CHECK_ARG(blocks <= std::numeric_limits<int32_t>::max(), "KV cache: {} blocks are more than block ids hold",
                   blocks);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) {
    const int64_t machine = int64_t(pages) * int64_t(page);
    FP8KIT_CHECK_ARG(blocks <= machine / per_block,
                     "KV cache: {} blocks of {} bytes ({} MiB) are more than this machine's memory ({} MiB)", blocks,
                     per_block, blocks * (per_block / 1024) / 1024, machine / 1048576);
  }
  return blocks;
}

KvCachePool::KvCachePool(const KvCacheLayout& layout, int64_t num_blocks, Device device)
    : layout_(layout), num_blocks_(num_blocks) {
  FP8KIT_CHECK_ARG(num_blocks > 0 && num_blocks <= std::numeric_limits<int32_t>::max(),
                   "KV cache: {} blocks is not a pool size", num_blocks);
  const Shape shape = {num_blocks, layout.block_size, layout.num_kv_heads, layout.head_dim};
  for (int64_t l = 0; l < layout.num_layers; ++l) {
    // Zeroed, so that a read of a slot the forward never wrote (a bug) gives zeros, not garbage.
    keys_.push_back(Tensor::zeros(shape, layout.element_dtype(), device));
    values_.push_back(Tensor::zeros(shape, layout.element_dtype(), device));
  }
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

bool KvCachePool::reserve(int64_t blocks) {
  if (blocks < 0 || blocks > unreserved_blocks()) return false;
  reserved_ += blocks;
  return true;
}

int32_t KvCachePool::allocate_reserved() {
  FP8KIT_CHECK(reserved_ > 0 && !free_.empty(), ErrorCode::kInternal,
               "KV cache: a block was taken without a reservation ({} reserved, {} free)", reserved_, free_.size());
  --reserved_;
  const int32_t block = free_.back();
  free_.pop_back();
  return block;
}

void KvCachePool::release(std::vector<int32_t>& blocks, int64_t unused_reservation) {
  FP8KIT_CHECK(unused_reservation >= 0 && unused_reservation <= reserved_, ErrorCode::kInternal,
               "KV cache: releasing {} reserved blocks of {}", unused_reservation, reserved_);
  reserved_ -= unused_reservation;
  for (int32_t b : blocks) free_.push_back(b);
  blocks.clear();
}

}  // namespace fp8kit::runner
