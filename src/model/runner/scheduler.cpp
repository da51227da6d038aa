// Scheduler (scheduler.h): vLLM V1's shape of a step (running sequences first, then waiting ones
// in arrival order, every one taking min(its tokens left, the budget left)), with decodes ahead
// of prefill chunks and admission by whole-run block reservation. Tested by
// tests/cpu/test_kv_cache_pool.cpp.
#include "model/runner/scheduler.h"

#include <algorithm>

#include "core/check.h"

namespace fp8kit::runner {

int64_t blocks_needed(const KvCachePool& pool, int64_t prompt_len, int64_t max_tokens) {
  return pool.blocks_for(prompt_len + std::max<int64_t>(max_tokens - 1, 0));
}

Scheduler::Scheduler(KvCachePool& pool, int64_t max_tokens_per_step, int64_t max_num_seqs)
    : pool_(pool), max_tokens_per_step_(max_tokens_per_step), max_num_seqs_(max_num_seqs) {
  FP8KIT_CHECK_ARG(max_tokens_per_step >= 1, "max_tokens_per_step must be positive, got {}", max_tokens_per_step);
  FP8KIT_CHECK_ARG(max_num_seqs >= 1, "max_num_seqs must be positive, got {}", max_num_seqs);
}

void Scheduler::add(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

void Scheduler::release(Sequence& seq) {
  pool_.release(seq.blocks, seq.reserved_blocks);
  seq.reserved_blocks = 0;
}

void Scheduler::abort(int64_t id) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id == id) {
      waiting_.erase(it);
      return;
    }
  }
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if ((*it)->id == id) {
      release(**it);
      running_.erase(it);
      return;
    }
  }
}

void Scheduler::retire_finished() {
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->finish_reason != FinishReason::kNone) {
      release(**it);
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int64_t budget = max_tokens_per_step_;
  const auto take = [&](Sequence& seq) {
    const int64_t count = std::min(seq.remaining(), budget);
    if (count <= 0 || int64_t(plan.chunks.size()) >= max_num_seqs_) return false;
    ScheduledChunk c;
    c.seq = &seq;
    c.start = seq.num_computed;
    c.count = count;
    c.samples = c.start + count == int64_t(seq.tokens.size());
    plan.chunks.push_back(c);
    budget -= count;
    (seq.num_computed >= seq.prompt_len ? plan.num_decode_tokens : plan.num_prefill_tokens) += count;
    return true;
  };
  for (auto& seq : running_) {  // decodes: one token each
    if (seq->num_computed >= seq->prompt_len) take(*seq);
  }
  for (auto& seq : running_) {  // prefills under way
    if (seq->num_computed < seq->prompt_len) take(*seq);
  }
  while (!waiting_.empty() && budget > 0 && int64_t(plan.chunks.size()) < max_num_seqs_) {
    Sequence& seq = *waiting_.front();
    const int64_t need = blocks_needed(pool_, seq.prompt_len, seq.params.max_tokens);
    if (!pool_.reserve(need)) break;  // waits, in order, until running requests give blocks back
    seq.reserved_blocks = need;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    take(*running_.back());
  }
  if (plan.chunks.empty()) return plan;
  for (ScheduledChunk& c : plan.chunks) {  // the blocks of the new tokens
    while (int64_t(c.seq->blocks.size()) * pool_.block_size() < c.start + c.count) {
      c.seq->blocks.push_back(pool_.allocate_reserved());
      --c.seq->reserved_blocks;
    }
  }
  plan.batch = build_batch(plan.chunks);
  return plan;
}

ForwardBatch Scheduler::build_batch(std::vector<ScheduledChunk>& chunks) const {
  int64_t tokens = 0, max_blocks = 1, rows = 0;
  for (const ScheduledChunk& c : chunks) {
    tokens += c.count;
    max_blocks = std::max<int64_t>(max_blocks, int64_t(c.seq->blocks.size()));
  }
  const int64_t r = int64_t(chunks.size()), bs = pool_.block_size();
  ForwardBatch b;
  b.token_ids = Tensor::empty({tokens}, DType::kI32);
  b.positions = Tensor::empty({tokens}, DType::kI64);
  b.metadata.query_start_loc = Tensor::empty({r + 1}, DType::kI32);
  b.metadata.seq_lens = Tensor::empty({r}, DType::kI32);
  b.metadata.block_table = Tensor::zeros({r, max_blocks}, DType::kI32);
  b.metadata.slot_mapping = Tensor::empty({tokens}, DType::kI64);
  std::vector<int64_t> logit_rows;
  auto* ids = b.token_ids.data<int32_t>();
  auto* pos = b.positions.data<int64_t>();
  auto* qsl = b.metadata.query_start_loc.data<int32_t>();
  auto* lens = b.metadata.seq_lens.data<int32_t>();
  auto* table = b.metadata.block_table.data<int32_t>();
  auto* slots = b.metadata.slot_mapping.data<int64_t>();
  int64_t t = 0;
  for (int64_t s = 0; s < r; ++s) {
    ScheduledChunk& c = chunks[size_t(s)];
    const Sequence& seq = *c.seq;
    qsl[s] = int32_t(t);
    lens[s] = int32_t(c.start + c.count);
    std::copy(seq.blocks.begin(), seq.blocks.end(), table + s * max_blocks);
    c.first_logit_row = rows;
    for (int64_t j = 0; j < c.count; ++j, ++t) {
      const int64_t p = c.start + j;
      ids[t] = seq.tokens[size_t(p)];
      pos[t] = p;
      slots[t] = int64_t(seq.blocks[size_t(p / bs)]) * bs + p % bs;
      const bool sampled = c.samples && seq.params.max_tokens > 0 && j == c.count - 1;
      if ((seq.params.return_logits && p >= seq.params.return_logits_from) || sampled) logit_rows.push_back(t);
    }
    c.num_logit_rows = int64_t(logit_rows.size()) - rows;
    rows = int64_t(logit_rows.size());
  }
  qsl[r] = int32_t(t);
  if (int64_t(logit_rows.size()) != tokens) b.logit_rows = Tensor::from_vector(logit_rows);
  return b;
}

}  // namespace fp8kit::runner
