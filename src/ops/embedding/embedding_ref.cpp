// CPU reference of embedding (embedding_ref.h).
#include "ops/embedding/embedding_ref.h"

#include <cstring>

#include "core/parallel.h"

namespace fp8kit::ops {

void embedding_ref(const EmbeddingArgs& a, int num_parts) {
  const size_t row_bytes = a.element_size * size_t(a.hidden);
  const int64_t grain = (a.num_tokens + num_parts - 1) / num_parts;
  parallel_for(a.num_tokens, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t id = a.ids_dtype == DType::kI32 ? int64_t(static_cast<const int32_t*>(a.ids)[t])
                                                    : static_cast<const int64_t*>(a.ids)[t];
      const int64_t row = id - a.vocab_start;
      auto* dst = static_cast<uint8_t*>(a.out) + size_t(t) * row_bytes;
      if (row < 0 || row >= a.num_rows) {
        std::memset(dst, 0, row_bytes);  // another rank's id (VocabParallelEmbedding's mask)
      } else {
        std::memcpy(dst, static_cast<const uint8_t*>(a.table) + size_t(row * a.table_row_stride) * a.element_size,
                    row_bytes);
      }
    }
  });
}

}  // namespace fp8kit::ops
