// The runner's CUDA graphs of decode steps (src/model/runner/decode_graphs.cpp): a decode step
// of four sequences, captured and replayed, gives the eager forward's logits bit for bit, 100
// times over, while another stream runs a prefill of another sequence and scribbles on freshly
// allocated memory (whose result stays the eager one too); a batch of three runs padded to four.
// Then the engine with graphs against the engine without them, greedy to the end: the same ids
// (but at a near-tie) and logits within a bound, the decode steps reported as graph replays.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/cuda/cuda_check.h"
#include "fp8kit/platform.h"
#include "model/runner/decode_graphs.h"
#include "runner_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

using namespace runner_test;
using runner::ForwardBatch;
using runner::to_device;

constexpr int64_t kBlockSize = 16, kBlocksPerSeq = 8;  // a block table of 8 blocks: 128 tokens

// One chunk of a sequence: tokens [start, start + ids.size()) of sequence `seq`, whose blocks are
// seq * kBlocksPerSeq, ...
struct Chunk {
  int64_t seq, start;
  std::vector<int32_t> ids;
};

ForwardBatch host_batch(const std::vector<Chunk>& chunks, int64_t width = kBlocksPerSeq) {
  int64_t tokens = 0;
  for (const Chunk& c : chunks) tokens += int64_t(c.ids.size());
  const int64_t r = int64_t(chunks.size());
  ForwardBatch b;
  b.token_ids = Tensor::empty({tokens}, DType::kI32);
  b.positions = Tensor::empty({tokens}, DType::kI64);
  b.metadata.query_start_loc = Tensor::empty({r + 1}, DType::kI32);
  b.metadata.seq_lens = Tensor::empty({r}, DType::kI32);
  b.metadata.block_table = Tensor::zeros({r, width}, DType::kI32);
  b.metadata.slot_mapping = Tensor::empty({tokens}, DType::kI64);
  int64_t t = 0;
  for (int64_t s = 0; s < r; ++s) {
    const Chunk& c = chunks[size_t(s)];
    b.metadata.query_start_loc.data<int32_t>()[s] = int32_t(t);
    b.metadata.seq_lens.data<int32_t>()[s] = int32_t(c.start + int64_t(c.ids.size()));
    for (int64_t j = 0; j < kBlocksPerSeq; ++j) {
      b.metadata.block_table.data<int32_t>()[s * width + j] = int32_t(c.seq * kBlocksPerSeq + j);
    }
    for (size_t j = 0; j < c.ids.size(); ++j, ++t) {
      const int64_t p = c.start + int64_t(j);
      b.token_ids.data<int32_t>()[t] = c.ids[j];
      b.positions.data<int64_t>()[t] = p;
      b.metadata.slot_mapping.data<int64_t>()[t] = (c.seq * kBlocksPerSeq + p / kBlockSize) * kBlockSize + p % kBlockSize;
    }
  }
  b.metadata.query_start_loc.data<int32_t>()[r] = int32_t(t);
  return b;
}

std::vector<uint8_t> bytes_of(const Tensor& device_tensor, const ForwardContext& ctx) {
  Tensor h = Tensor::empty(device_tensor.shape(), device_tensor.dtype());
  h.copy_(device_tensor, ctx.stream());
  std::vector<uint8_t> out(h.nbytes());
  std::memcpy(out.data(), h.data_ptr(), out.size());
  return out;
}

struct Model {
  const char* name;
  bool moe;
  bool quantize;
  const char* kv_cache;
};

void expect_replays_match_eager(const Model& m) {
  SCOPED_TRACE(m.name);
  convert::SyntheticModelSpec spec;  // hidden 256, 4 heads of 64, 2 KV heads, vocabulary 1024
  if (!m.moe) spec.moe_layers = {};
  const std::string dir = write_model(testing::scratch_dir() + "/" + m.name, spec);
  LoadOptions load;
  load.device = Device::cuda(0);
  load.quantize = m.quantize;
  load.kv_cache_dtype = m.kv_cache;
  const runner::DecoderModel model(dir, load);
  runner::KvCacheLayout layout;
  layout.num_layers = model.config().num_layers;
  layout.num_kv_heads = model.config().num_kv_heads;
  layout.head_dim = model.config().head_dim;
  layout.model_dtype = model.dtype();
  layout.dtype = ops::parse_kv_cache_dtype(m.kv_cache);
  layout.block_size = kBlockSize;
  const runner::KvCachePool pool(layout, 6 * kBlocksPerSeq, Device::cuda(0));

  cudaStream_t s1 = nullptr, s2 = nullptr;
  FP8KIT_CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  FP8KIT_CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  {
    const ForwardContext ctx(Device::cuda(0), {}, Stream{s1}), other(Device::cuda(0), {}, Stream{s2});
    const int64_t vocab = model.vocab_size();
    // Four prompts prefilled eagerly, then one decode token each.
    const std::vector<int64_t> lens = {5, 17, 33, 9};
    std::vector<Chunk> prompts, decode;
    for (int64_t s = 0; s < 4; ++s) {
      prompts.push_back({s, 0, ids(lens[size_t(s)], vocab, uint32_t(11 + s))});
      decode.push_back({s, lens[size_t(s)], ids(1, vocab, uint32_t(50 + s))});
    }
    (void)model.forward(ctx, to_device(host_batch(prompts), ctx), pool);
    const ForwardBatch step = host_batch(decode);
    const std::vector<uint8_t> eager = bytes_of(model.forward(ctx, to_device(step, ctx), pool), ctx);

    runner::DecodeGraphs graphs(model, pool, /*max_batch=*/8, /*table_width=*/kBlocksPerSeq);
    ASSERT_TRUE(graphs.serves(step));
    EXPECT_EQ(bytes_of(graphs.run(ctx, step), ctx), eager) << "the first replay (after the capture)";
    EXPECT_EQ(graphs.num_graphs(), 1);

    // Other work on the second stream: a 40-token prefill of sequence 4 and writes over memory
    // allocated after the capture.
    const ForwardBatch other_batch = host_batch({{4, 0, ids(40, vocab, 77)}});
    const std::vector<uint8_t> other_want = bytes_of(model.forward(other, to_device(other_batch, other), pool), other);
    int mismatches = 0, other_mismatches = 0;
    for (int replay = 0; replay < 100; ++replay) {
      const Tensor logits = graphs.run(ctx, step);
      const Tensor other_logits = model.forward(other, to_device(other_batch, other), pool);
      Tensor scribble = Tensor::empty({int64_t(1) << 20}, DType::kU8, Device::cuda(0));
      scribble.fill_bytes_(0xFF, Stream{s2});
      if (bytes_of(logits, ctx) != eager) ++mismatches;
      if (replay % 10 == 0 && bytes_of(other_logits, other) != other_want) ++other_mismatches;
    }
    EXPECT_EQ(mismatches, 0) << "replays that differ from the eager step";
    EXPECT_EQ(other_mismatches, 0) << "other-stream forwards that differ from their eager result";

    // Three rows run padded to the graph of four: the same rows as an eager forward of the
    // padded batch (its fourth sequence has no query and no keys), bit for bit.
    const ForwardBatch three = host_batch({decode[0], decode[1], decode[2]});
    ASSERT_EQ(runner::DecodeGraphs::padded_size(3, 8), 4);
    ForwardBatch padded = host_batch({decode[0], decode[1], decode[2], {5, 0, {}}});
    padded.metadata.seq_lens.data<int32_t>()[3] = 0;
    padded.token_ids = Tensor::from_vector(std::vector<int32_t>{decode[0].ids[0], decode[1].ids[0], decode[2].ids[0], 0});
    padded.positions = Tensor::from_vector(std::vector<int64_t>{lens[0], lens[1], lens[2], 0});
    padded.metadata.slot_mapping = Tensor::from_vector(std::vector<int64_t>{
        step.metadata.slot_mapping.data<int64_t>()[0], step.metadata.slot_mapping.data<int64_t>()[1],
        step.metadata.slot_mapping.data<int64_t>()[2], -1});
    for (int64_t j = 0; j < kBlocksPerSeq; ++j) padded.metadata.block_table.data<int32_t>()[3 * kBlocksPerSeq + j] = 0;
    const Tensor eager_padded = model.forward(ctx, to_device(padded, ctx), pool);
    const std::vector<uint8_t> want_three = bytes_of(eager_padded.narrow(0, 0, 3), ctx);
    EXPECT_EQ(bytes_of(graphs.run(ctx, three), ctx), want_three);
    EXPECT_EQ(graphs.num_graphs(), 1) << "three rows replay the graph of four";
    stream_synchronize(Stream{s2});
  }
  FP8KIT_CUDA_CHECK(cudaStreamDestroy(s1));
  FP8KIT_CUDA_CHECK(cudaStreamDestroy(s2));
}

TEST(DecodeGraphsCuda, ReplaysMatchTheEagerStepBitForBitBesideOtherWork) {
  for (const Model& m : {Model{"dense-fp8", false, true, "fp8"}, Model{"moe-bf16", true, false, "auto"},
                         Model{"moe-fp8", true, true, "fp8"}}) {
    expect_replays_match_eager(m);
  }
}

TEST(DecodeGraphsCuda, PaddedSizes) {
  const std::vector<std::pair<int64_t, int64_t>> want = {{1, 1}, {2, 2}, {3, 4}, {5, 8}, {8, 8}, {9, 16}, {17, 24}, {64, 64}};
  for (const auto& [rows, size] : want) EXPECT_EQ(runner::DecodeGraphs::padded_size(rows, 64), size) << rows;
  EXPECT_EQ(runner::DecodeGraphs::padded_size(65, 64), 0);
  EXPECT_EQ(runner::DecodeGraphs::padded_size(6, 6), 6);  // never past max_batch
  EXPECT_EQ(runner::DecodeGraphs::padded_size(0, 64), 0);
}

// max |got - want| / max |want| of a row (a NaN in got is infinitely far).
double row_error(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0, err = 0;
  for (size_t v = 0; v < want.size(); ++v) {
    scale = std::max(scale, double(std::fabs(want[v])));
    err = std::max(err, std::isnan(got[v]) ? INFINITY : double(std::fabs(got[v] - want[v])));
  }
  return err / std::max(scale, 1e-30);
}

struct EngineRun {
  std::vector<RequestRun> runs;
  int graph_steps = 0, decode_steps = 0;
};

EngineRun run_engine(const std::string& model, bool graphs) {
  EngineOptions o;
  o.load.device = Device::cuda(0);
  o.load.quantize = true;
  o.kv_cache.dtype = "fp8";
  o.cuda_graphs = graphs;
  o.max_tokens_per_step = 64;
  Engine engine(model, o);
  // Five requests ending at different steps: decode batches of 5 (padded to 8), 4, 3, 2, 1.
  for (int r = 0; r < 5; ++r) engine.add_request(ids(6 + 3 * r, 1024, uint32_t(r)), greedy(4 + 3 * r, true));
  const ForwardContext ctx(Device::cuda(0));  // the legacy default stream: graphs replay there too
  EngineRun out;
  out.runs.resize(5);
  while (engine.has_unfinished_requests()) {
    const StepOutput s = engine.step(ctx);
    if (s.num_prefill_tokens == 0) ++out.decode_steps;
    if (s.cuda_graph) ++out.graph_steps;
    for (const RequestOutput& o2 : s.outputs) {
      RequestRun& r = out.runs.at(size_t(o2.request_id));
      r.tokens.insert(r.tokens.end(), o2.new_token_ids.begin(), o2.new_token_ids.end());
      if (o2.logits.defined()) append_rows(o2.logits, r.logits);
    }
  }
  return out;
}

TEST(DecodeGraphsCuda, EngineWithGraphsMatchesTheEagerEngine) {
  convert::SyntheticModelSpec spec;
  spec.moe_layers = {};
  const std::string model = write_model(testing::scratch_dir() + "/engine-dense", spec);
  const EngineRun eager = run_engine(model, false), graphs = run_engine(model, true);
  EXPECT_EQ(eager.graph_steps, 0);
  EXPECT_GT(graphs.decode_steps, 0);
  EXPECT_EQ(graphs.graph_steps, graphs.decode_steps) << "every decode step replays a graph";
  double worst = 0;
  for (size_t r = 0; r < eager.runs.size(); ++r) {
    const RequestRun &e = eager.runs[r], &g = graphs.runs[r];
    ASSERT_EQ(e.logits.size(), g.logits.size()) << "request " << r;
    for (size_t row = 0; row < e.logits.size(); ++row) worst = std::max(worst, row_error(g.logits[row], e.logits[row]));
    // Graph and eager steps differ only in the attention's split of the keys and the GEMMs' row
    // count (padding): f32 sums in another order. FP8 activations may flip a code (1/16 step).
    EXPECT_EQ(e.tokens, g.tokens) << "request " << r << " (a near-tie would explain a difference; worst row " << worst
                                  << ")";
  }
  EXPECT_LE(worst, 0.05) << "worst row max |graph - eager| / max |eager|";
  std::printf("engine with CUDA graphs: %d of %d decode steps replayed, worst row %.3g\n", graphs.graph_steps,
              graphs.decode_steps, worst);
}

}  // namespace
}  // namespace fp8kit
