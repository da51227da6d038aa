// CPU reference of embedding (include/fp8kit/ops/embedding.h): row copies, tokens split into
// num_parts chunks on the thread pool. Tested by tests/cpu/test_embedding.cpp.
#pragma once

#include "ops/embedding/embedding_args.h"

namespace fp8kit::ops {

void embedding_ref(const EmbeddingArgs& args, int num_parts);

}  // namespace fp8kit::ops
