#include "model/runner/decode_graphs.h"

#if FP8KIT_WITH_CUDA

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/cuda/cuda_graph.h"
#include "core/cuda/graph_memory_pool.h"
#include "core/thread_allocator.h"
#include "fp8kit/platform.h"

namespace fp8kit::runner {
namespace {

// Where each input of a padded batch of `size` rows lies in the one buffer a step uploads
// (256-byte aligned offsets, so every view is aligned for its dtype).
struct InputLayout {
  int64_t ids = 0, positions = 0, query_start_loc = 0, seq_lens = 0, block_table = 0, slots = 0, bytes = 0;
  InputLayout(int64_t size, int64_t width) {
    const auto aligned = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
    positions = ids + aligned(4 * size);
    query_start_loc = positions + aligned(8 * size);
    seq_lens = query_start_loc + aligned(4 * (size + 1));
    block_table = seq_lens + aligned(4 * size);
    slots = block_table + aligned(4 * size * width);
    bytes = slots + aligned(8 * size);
  }
};

Tensor view_at(const Tensor& buffer, int64_t byte_offset, const Shape& shape, DType dtype) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return Tensor::from_storage(buffer.storage(), shape, strides, byte_offset / int64_t(dtype_size(dtype)), dtype);
}

// The step's batch padded to `size` rows in `layout` (host memory): padding rows are sequences
// with no query (query_start_loc stays at the last real row) and no keys, token 0 at position 0,
// slot -1 (not written), an all-zero block table row.
void fill_inputs(uint8_t* base, const InputLayout& layout, int64_t size, int64_t width, const ForwardBatch& b) {
  const int64_t rows = b.token_ids.numel(), batch_width = b.metadata.block_table.size(1);
  std::memset(base, 0, size_t(layout.bytes));
  std::memcpy(base + layout.ids, b.token_ids.data<int32_t>(), size_t(rows) * 4);
  std::memcpy(base + layout.positions, b.positions.data<int64_t>(), size_t(rows) * 8);
  auto* qsl = reinterpret_cast<int32_t*>(base + layout.query_start_loc);
  std::memcpy(qsl, b.metadata.query_start_loc.data<int32_t>(), size_t(rows + 1) * 4);
  std::fill(qsl + rows + 1, qsl + size + 1, qsl[rows]);
  std::memcpy(base + layout.seq_lens, b.metadata.seq_lens.data<int32_t>(), size_t(rows) * 4);
  auto* table = reinterpret_cast<int32_t*>(base + layout.block_table);
  const int32_t* from = b.metadata.block_table.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r) std::copy(from + r * batch_width, from + (r + 1) * batch_width, table + r * width);
  auto* slots = reinterpret_cast<int64_t*>(base + layout.slots);
  std::memcpy(slots, b.metadata.slot_mapping.data<int64_t>(), size_t(rows) * 8);
  std::fill(slots + rows, slots + size, int64_t(-1));
}

}  // namespace

struct DecodeGraphs::Graph {
  Graph(int64_t size, int64_t width, const ForwardContext& user, int device)
      : size(size),
        device(device),
        layout(size, width),
        ctx(Device::cuda(device), user.overrides(), stream.get()),
        memory(new cuda::GraphMemoryPool(device)) {
    inputs = Tensor::empty({layout.bytes}, DType::kU8, Device::cuda(device));
    batch.token_ids = view_at(inputs, layout.ids, {size}, DType::kI32);
    batch.positions = view_at(inputs, layout.positions, {size}, DType::kI64);
    batch.metadata.query_start_loc = view_at(inputs, layout.query_start_loc, {size + 1}, DType::kI32);
    batch.metadata.seq_lens = view_at(inputs, layout.seq_lens, {size}, DType::kI32);
    batch.metadata.block_table = view_at(inputs, layout.block_table, {size, width}, DType::kI32);
    batch.metadata.slot_mapping = view_at(inputs, layout.slots, {size}, DType::kI64);
  }
  ~Graph() {
    // A replay may still run: its memory goes back to the caching allocator only after it. (The
    // whole device: the stream of the last replay may be gone; an error left by other work must
    // not escape a destructor.)
    try {
      device_synchronize(device);
    } catch (const Error&) {
    }
    logits = Tensor();
    graph = cuda::CapturedGraph();
    cuda::GraphMemoryPool::retire(memory);
  }

  int64_t size;
  int device;
  InputLayout layout;
  cuda::OwnedStream stream;  // the capture's (and the warm-up's)
  ForwardContext ctx;        // on `stream`; its workspace is the graph's scratch alone
  cuda::GraphMemoryPool* memory;
  Tensor inputs;        // u8 [layout.bytes] on the device: the batch below views it
  ForwardBatch batch;   // padded to `size` rows
  Tensor logits;        // [size, vocab], written by every replay
  cuda::CapturedGraph graph;
};

DecodeGraphs::DecodeGraphs(const DecoderModel& model, const KvCachePool& pool, int64_t max_batch, int64_t table_width)
    : model_(model), pool_(pool), max_batch_(max_batch), table_width_(table_width) {
  FP8KIT_CHECK_ARG(max_batch >= 1 && table_width >= 1, "decode graphs: max_batch {} and table_width {} must be >= 1",
                   max_batch, table_width);
}

DecodeGraphs::~DecodeGraphs() = default;

int64_t DecodeGraphs::padded_size(int64_t rows, int64_t max_batch) {
  if (rows < 1 || rows > max_batch) return 0;
  int64_t size = 1;
  if (rows <= 8) {
    while (size < rows) size *= 2;
  } else {
    size = (rows + 7) / 8 * 8;
  }
  return std::min(size, max_batch);
}

bool DecodeGraphs::serves(const ForwardBatch& b) const {
  const int64_t rows = b.token_ids.defined() ? b.token_ids.numel() : 0;
  return rows >= 1 && rows <= max_batch_ && !b.logit_rows.defined() && b.metadata.seq_lens.numel() == rows &&
         b.metadata.block_table.size(1) <= table_width_;
}

void DecodeGraphs::capture(Graph& g, const ForwardContext& ctx) const {
  // The warm-up reads the cache as the user's stream left it (and the inputs it uploaded); it
  // loads the kernels, makes the plans, and sizes the graph's workspace and memory pool, so the
  // capture allocates nothing new.
  cuda::stream_wait(g.stream.get(), ctx.stream());
  {
    ThreadAllocatorScope allocations(Device::cuda(g.device), g.memory);
    const Tensor warm_up = model_.forward(g.ctx, g.batch, pool_);
  }
  g.ctx.workspace().reset();
  g.ctx.workspace().freeze(true);  // nothing but this graph ever uses it: it must not move
  g.graph = cuda::CapturedGraph::capture(g.stream.get(), g.device, *g.memory,
                                         [&] { g.logits = model_.forward(g.ctx, g.batch, pool_); });
  // The warm-up wrote this step's K/V: the replay after it writes the same values.
  cuda::stream_wait(ctx.stream(), g.stream.get());
}

Tensor DecodeGraphs::run(const ForwardContext& ctx, const ForwardBatch& batch) {
  FP8KIT_CHECK(ctx.device().is_cuda() && serves(batch), ErrorCode::kInternal, "decode graphs: a batch they do not serve");
  const int64_t rows = batch.token_ids.numel(), size = padded_size(rows, max_batch_);
  std::unique_ptr<Graph> fresh;  // kept only once its capture succeeded
  Graph* g = nullptr;
  if (auto it = graphs_.find(size); it != graphs_.end()) {
    g = it->second.get();
  } else {
    fresh = std::make_unique<Graph>(size, table_width_, ctx, ctx.device().index);
    g = fresh.get();
  }
  Tensor host = Tensor::empty({g->layout.bytes}, DType::kU8);
  fill_inputs(static_cast<uint8_t*>(host.data_ptr()), g->layout, size, table_width_, batch);
  g->inputs.copy_(host, ctx.stream());
  if (fresh != nullptr) {
    capture(*fresh, ctx);
    graphs_.emplace(size, std::move(fresh));
  }
  g->graph.launch(ctx.stream());
  return g->logits.narrow(0, 0, rows);
}

}  // namespace fp8kit::runner

#else  // FP8KIT_WITH_CUDA

namespace fp8kit::runner {

// Without CUDA the engine never makes DecodeGraphs (engine.cpp); its std::unique_ptr still needs
// the destructor.
struct DecodeGraphs::Graph {};
DecodeGraphs::~DecodeGraphs() = default;

}  // namespace fp8kit::runner

#endif  // FP8KIT_WITH_CUDA
