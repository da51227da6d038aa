// CUDA graphs of the engine's decode steps, as vLLM's CUDA graph runner keeps them: a step whose
// sequences each decode one token replays a graph captured for its batch size padded up to the
// next capture size (1, 2, 4, 8, then multiples of 8). A decode step of a small model is hundreds
// of short kernels; replayed as one graph it costs one launch.
//
// Each graph owns what its kernels touch besides the weights and the KV cache: a stream it was
// captured on, a ForwardContext there whose workspace nothing else uses, the device memory of its
// forward (a GraphMemoryPool) and the input buffers a step's batch is copied into. Padding rows
// are sequences with no query and no keys, and negative slots, so they write nothing and read
// nothing. The attention is planned for a block table as wide as the model's longest sequence,
// so one graph serves every context length. Only built with CUDA (without it, the engine makes
// none).
// Tested by tests/gpu/test_decode_graphs_cuda.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "model/runner/decoder_model.h"
#include "model/runner/kv_cache_pool.h"

namespace fp8kit::runner {

class DecodeGraphs {
 public:
  // Graphs of `model` over `pool` for decode batches of up to max_batch sequences whose block
  // tables are at most table_width blocks wide.
  DecodeGraphs(const DecoderModel& model, const KvCachePool& pool, int64_t max_batch, int64_t table_width);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // The batch size `rows` decode rows run at: the smallest capture size >= rows, or 0 when rows
  // is above max_batch (the step then runs eagerly).
  static int64_t padded_size(int64_t rows, int64_t max_batch);

  // Whether `batch` (on the host) is a step these graphs run: one token per sequence, every
  // row's logits wanted, at most max_batch rows, a block table no wider than table_width.
  bool serves(const ForwardBatch& batch) const;

  // The logits [rows, vocab] on the device of a batch that serves() accepts, replayed on ctx's
  // stream (in its order: the step's uploads, then the graph). The first step of a padded size
  // captures its graph: a warm-up forward on the graph's own stream, then the capture.
  // Error(kCuda) when the capture fails; nothing is left capturing, and the caller may run the
  // step eagerly.
  Tensor run(const ForwardContext& ctx, const ForwardBatch& batch);

  int64_t num_graphs() const { return int64_t(graphs_.size()); }

 private:
  struct Graph;
  void capture(Graph& graph, const ForwardContext& ctx) const;  // warm-up, then the capture

  const DecoderModel& model_;
  const KvCachePool& pool_;
  int64_t max_batch_, table_width_;
  std::map<int64_t, std::unique_ptr<Graph>> graphs_;  // by padded size
};

}  // namespace fp8kit::runner
