// Token embedding lookup, as vLLM's VocabParallelEmbedding does it on one tensor-parallel rank:
// ids in this rank's row range [vocab_start, vocab_start + num_rows) read their row, other ids of
// the vocabulary give zero rows (the all-reduce across ranks adds the one rank that owns each id).
// CPU reference: src/ops/embedding/embedding_ref.cpp; tests: tests/cpu/test_embedding.cpp.
#pragma once

#include <cstdint>
#include <optional>

#include "fp8kit/runtime/forward_context.h"
#include "fp8kit/tensor.h"

namespace fp8kit::ops {

struct EmbeddingOptions {
  int64_t vocab_start = 0;            // the first id of this rank's rows
  std::optional<int64_t> vocab_size;  // ids must lie in [0, vocab_size); default vocab_start + num_rows
  Tensor out;                         // optional preallocated output, contiguous
};

// ---------------------------------------------------------------------------------------------
// embedding(ctx, ids, table, options) -> [*ids.shape, hidden] of table's dtype
//   ids   i32|i64, any shape, contiguous
//   table [num_rows, hidden] f32|f16|bf16 (FP8 tables are not supported), last dimension
//         contiguous, any row stride
//   out[t] = table[ids[t] - vocab_start] (a bit copy) when vocab_start <= ids[t] < vocab_start +
//   num_rows, else zeros. An id outside [0, vocab_size) is Error(kInvalidArgument)
//   "embedding: ids[3] = 70000 is outside the vocabulary [0, 32000)".
// ---------------------------------------------------------------------------------------------
Tensor embedding(const ForwardContext& ctx, const Tensor& ids, const Tensor& table,
                 const EmbeddingOptions& options = {});

}  // namespace fp8kit::ops
