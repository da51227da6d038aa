// Argument block of embedding (include/fp8kit/ops/embedding.h), validated by embedding.cpp. The
// CPU reference (embedding_ref.h) takes it, and a CUDA launcher will take the same struct.
#pragma once

#include <cstdint>

#include "fp8kit/dtype.h"

namespace fp8kit::ops {

struct EmbeddingArgs {
  int64_t num_tokens = 0, hidden = 0;
  const void* ids = nullptr;  // [num_tokens] of ids_dtype
  DType ids_dtype = DType::kI64;
  const void* table = nullptr;  // [num_rows, hidden], row r at table + r * table_row_stride elements
  int64_t num_rows = 0, table_row_stride = 0;
  size_t element_size = 2;  // bytes of one table element (f32: 4, f16/bf16: 2)
  int64_t vocab_start = 0;
  void* out = nullptr;  // [num_tokens, hidden], contiguous
};

}  // namespace fp8kit::ops
