// The runner's scheduler: requests waiting and running, which run in one step (decodes first,
// then prefill chunks, within the step's token budget and sequence limit; a waiting request is
// admitted only when the KV pool can reserve every block its run needs, in arrival order), and
// the batch tensors of the chosen tokens (positions, slots, block tables). Tested by
// tests/cpu/test_kv_cache_pool.cpp.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "fp8kit/model/engine.h"
#include "model/runner/decoder_model.h"
#include "model/runner/kv_cache_pool.h"

namespace fp8kit::runner {

struct Sequence {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // the prompt, then the generated tokens
  int64_t prompt_len = 0;
  int64_t num_computed = 0;  // tokens whose K/V are in the cache
  int64_t num_generated = 0;
  GenerationParams params;
  uint64_t seed = 0;
  std::vector<int32_t> blocks;
  int64_t reserved_blocks = 0;  // of the reservation, still to be taken
  FinishReason finish_reason = FinishReason::kNone;
  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
};

// Blocks a request holds at most: prompt + max_tokens - 1 tokens reach the cache (the last
// sampled token is never fed back).
int64_t blocks_needed(const KvCachePool& pool, int64_t prompt_len, int64_t max_tokens);

// One sequence's share of a step: tokens [start, start + count) of seq.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0, count = 0;
  bool samples = false;  // the chunk ends the sequence's known tokens: a new token is sampled (max_tokens > 0)
  int64_t first_logit_row = 0, num_logit_rows = 0;  // its rows in the step's logits
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  ForwardBatch batch;
  int64_t num_prefill_tokens = 0, num_decode_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(KvCachePool& pool, int64_t max_tokens_per_step, int64_t max_num_seqs);

  void add(std::unique_ptr<Sequence> seq);  // queued at the end of the waiting list
  void abort(int64_t id);
  // Chooses the step's chunks, admitting waiting requests and taking the blocks of their new
  // tokens; empty when there is nothing to run.
  StepPlan schedule();
  // Sequences that finished (finish_reason set) after a step: their blocks go back.
  void retire_finished();
  bool empty() const { return waiting_.empty() && running_.empty(); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }

 private:
  ForwardBatch build_batch(std::vector<ScheduledChunk>& chunks) const;
  void release(Sequence& seq);

  KvCachePool& pool_;
  int64_t max_tokens_per_step_, max_num_seqs_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
};

}  // namespace fp8kit::runner
