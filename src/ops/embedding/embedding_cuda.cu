// embedding on CUDA: the kernel and its launcher (embedding_cuda.h). Reference: embedding_ref.cpp
// on the same EmbeddingArgs, bit for bit (row copies; zeros for ids outside this rank's rows).
// Threads copy 16-byte units where the table rows and the output allow it, else whole elements.
// Floor: memory-bound, 2 * num_tokens * hidden * sizeof(T) bytes (row read + written).
// Tests: tests/gpu/test_embedding_cuda.cpp.
#include "core/cuda/pdl.cuh"
#include "ops/cuda_launch.cuh"
#include "ops/embedding/embedding_cuda.h"

namespace fp8kit::ops {
namespace {

using namespace cuda_launch;

constexpr int kThreads = 256;

template <typename Unit, typename Id>
__global__ void __launch_bounds__(kThreads) embedding_kernel(const EmbeddingArgs a, int64_t units_per_row,
                                                             int64_t table_row_units) {
  cuda::pdl_wait();
  cuda::pdl_allow_dependents();
  const int64_t total = a.num_tokens * units_per_row;
  const Unit* table = static_cast<const Unit*>(a.table);
  Unit* out = static_cast<Unit*>(a.out);
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t t = i / units_per_row, c = i % units_per_row;
    const int64_t row = int64_t(__ldg(static_cast<const Id*>(a.ids) + t)) - a.vocab_start;
    Unit v{};  // another rank's id (VocabParallelEmbedding's mask), or one outside the vocabulary
    if (row >= 0 && row < a.num_rows) v = table[row * table_row_units + c];
    out[i] = v;
  }
}

template <typename Unit>
void launch(const EmbeddingArgs& a, cudaStream_t s) {
  const int64_t row_bytes = a.hidden * int64_t(a.element_size);
  const int64_t units = row_bytes / int64_t(sizeof(Unit));
  const int64_t table_row_units = a.table_row_stride * int64_t(a.element_size) / int64_t(sizeof(Unit));
  const unsigned grid = grid_for(a.num_tokens * units, kThreads);
  if (a.ids_dtype == DType::kI32) {
    cuda::launch_pdl(embedding_kernel<Unit, int32_t>, grid, kThreads, 0, s, a, units, table_row_units);
  } else {
    cuda::launch_pdl(embedding_kernel<Unit, int64_t>, grid, kThreads, 0, s, a, units, table_row_units);
  }
  FP8KIT_CHECK_LAUNCH(s, "embedding_kernel");
}

}  // namespace

void embedding_cuda(const EmbeddingArgs& a, Stream stream) {
  if (a.num_tokens == 0 || a.hidden == 0) return;
  const cudaStream_t s = to_cuda(stream);
  const bool vector = (a.hidden * int64_t(a.element_size)) % 16 == 0 && aligned16(a.table) && aligned16(a.out) &&
                      strides_aligned16({a.table_row_stride}, a.element_size);
  if (vector) return launch<uint4>(a, s);
  if (a.element_size == 4) return launch<uint32_t>(a, s);
  launch<uint16_t>(a, s);
}

}  // namespace fp8kit::ops
