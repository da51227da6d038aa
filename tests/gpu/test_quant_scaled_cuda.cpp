// scaled_fp8_quant on CUDA (static, dynamic per-tensor, dynamic per-token) against the CPU
// reference on the same args struct: bit-exact codes and scales over ragged shapes, row strides,
// misaligned views, every input and output dtype, padding, scale_ub and the spec's edge cases;
// the 1,024,000 x 1152 bf16 regression (int64 offsets); capture into a CUDA graph; the one-launch
// form (a grid barrier) launched cooperatively and finishing beside a kernel that fills the GPU.
#include <cuda_runtime_api.h>

#include <cfloat>

#include "core/cuda/cuda_check.h"
#include "fp8kit/ops/quant.h"
#include "gpu_test_util.h"
#include "occupy_multiprocessors.h"
#include "ops/quant/quant_cuda.h"
#include "ops/quant/quant_ref.h"

namespace fp8kit {
namespace {

using namespace gpu_test;
using ops::ScaledFp8QuantArgs;
using ops::ScaledQuantMode;

const char* mode_name(ScaledQuantMode mode) {
  switch (mode) {
    case ScaledQuantMode::kStatic:
      return "static";
    case ScaledQuantMode::kDynamicPerTensor:
      return "dynamic per-tensor";
    default:
      return "dynamic per-token";
  }
}

// How the input rows sit in memory.
enum class Layout {
  kContiguous,  // row stride k
  kStrided,     // row stride a multiple of 16 elements past k: aligned rows, not back to back
  kMisaligned,  // row stride k + 5, starting 3 elements into the buffer
};

struct ScaledCase {
  ScaledQuantMode mode = ScaledQuantMode::kStatic;
  DType out = DType::kE4M3FN;
  int64_t out_rows = -1;      // -1: m
  float static_scale = 0.0f;  // kStatic
  bool use_ub = false;        // kDynamicPerToken
  float ub = 0.0f;
  bool grid_counter = false;  // kDynamicPerTensor: a counter after the scale (the one-launch form)
};

// Runs the reference and the CUDA launcher on `x` (a CPU view into the contiguous `base`) and
// compares codes and scales bit for bit. CUDA outputs are poisoned first.
void check_scaled(const Tensor& base, const Tensor& x, const ScaledCase& sc, uint32_t seed,
                  const std::string& detail = "") {
  const int64_t m = x.size(0), k = x.size(1);
  const int64_t out_rows = sc.out_rows < 0 ? m : sc.out_rows;
  const Case c{std::string("scaled_fp8_quant ") + mode_name(sc.mode),
               {m, k},
               x.dtype(),
               sc.out,
               seed,
               detail + " row stride " + std::to_string(x.stride(0)) + ", out rows " + std::to_string(out_rows)};
  const int64_t scale_count = sc.mode == ScaledQuantMode::kDynamicPerToken ? out_rows : 1;

  ScaledFp8QuantArgs a;
  a.in_dtype = x.dtype();
  a.m = m;
  a.k = k;
  a.input_row_stride = x.stride(0);
  a.out_dtype = sc.out;
  a.out_rows = out_rows;
  a.out_row_stride = k;
  a.mode = sc.mode;
  a.fp8_max = ops::fp8_quant_max(sc.out);
  a.min_scaling_factor = ops::fp8_min_scaling_factor(sc.out);

  // Reference.
  Tensor out_h = Tensor::empty({out_rows, k}, DType::kU8);
  Tensor scale_h = Tensor::empty({scale_count}, DType::kF32);
  scale_h.fill_bytes_(kPoisonScales);
  if (sc.mode == ScaledQuantMode::kStatic) scale_h.data<float>()[0] = sc.static_scale;
  Tensor ub_h = Tensor::scalar_f32(sc.ub);
  ScaledFp8QuantArgs ah = a;
  ah.input = x.data_ptr();
  ah.out = out_h.data_ptr();
  ah.scale = scale_h.data<float>();
  ah.scale_ub = sc.use_ub ? ub_h.data<float>() : nullptr;
  ops::scaled_fp8_quant_ref(ah);

  // CUDA, outputs poisoned.
  const Tensor x_d = device_view(base, x);
  Tensor out_d = poisoned({out_rows, k}, DType::kU8, Device::cuda(0), kPoisonCodes);
  const bool counter = sc.grid_counter && sc.mode == ScaledQuantMode::kDynamicPerTensor;
  const Tensor scale_and_counter = poisoned({scale_count + 1}, DType::kF32, Device::cuda(0), kPoisonScales);
  Tensor scale_d = counter ? scale_and_counter.narrow(0, 0, 1)
                           : poisoned({scale_count}, DType::kF32, Device::cuda(0), kPoisonScales);
  if (sc.mode == ScaledQuantMode::kStatic) scale_d.copy_(Tensor::from_vector(std::vector<float>{sc.static_scale}));
  const Tensor ub_d = ub_h.to(Device::cuda(0));
  ScaledFp8QuantArgs ad = a;
  ad.input = x_d.data_ptr();
  ad.out = out_d.data_ptr();
  ad.scale = static_cast<float*>(scale_d.data_ptr());
  ad.scale_ub = sc.use_ub ? static_cast<const float*>(ub_d.data_ptr()) : nullptr;
  if (counter) ad.grid_counter = static_cast<uint32_t*>(scale_and_counter.data_ptr()) + 1;
  ops::scaled_fp8_quant_cuda(ad, Stream{});

  expect_same_tensor(c, "scale", scale_d, scale_h);
  expect_same_tensor(c, "codes", out_d, out_h);
}

// A [m, k] CPU view of dtype `dtype` in the given layout, filled at random; returns {base, view}.
std::pair<Tensor, Tensor> make_input(int64_t m, int64_t k, DType dtype, Layout layout, uint32_t seed,
                                     float sigma = 1.0f) {
  int64_t ld = k, offset = 0;
  if (layout == Layout::kStrided) ld = (k + 15) / 16 * 16 + 16;
  if (layout == Layout::kMisaligned) ld = k + 5, offset = 3;
  Tensor base = random_tensor({m * ld + offset}, dtype, seed, sigma);
  const Tensor view = Tensor::from_storage(base.storage(), {m, k}, {ld, 1}, offset, dtype);
  return {base, view};
}

const DType kInputs[] = {DType::kF32, DType::kF16, DType::kBF16};
const DType kOutputs[] = {DType::kE4M3FN, DType::kE4M3FNUZ};

// Every shape of the grid whose input stays below ~8.5 M elements, plus long rows that
// take the 8-slot and the looped per-token kernels.
std::vector<std::pair<int64_t, int64_t>> sweep_shapes() {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t m : {1, 3, 64, 65536}) {
    for (int64_t k : {1, 3, 8, 127, 128, 129, 1024, 4097, 8192, 8193}) {
      if (m * k <= (int64_t(17) << 19)) shapes.push_back({m, k});
    }
  }
  for (int64_t m : {1, 3}) {
    for (int64_t k : {2000, 20000, 40000}) shapes.push_back({m, k});
  }
  // Rows enough for a warp per row (more than the GPU holds warps): the warp-team kernels.
  for (int64_t k : {600, 1024, 2000, 4096}) shapes.push_back({1100, k});
  return shapes;
}

TEST(QuantScaledCuda, EveryModeShapeDTypeAndLayout) {
  for (auto [m, k] : sweep_shapes()) {
    const bool big = m * k > (int64_t(1) << 20);
    for (Layout layout : {Layout::kContiguous, Layout::kStrided, Layout::kMisaligned}) {
      if (big && layout != Layout::kContiguous) continue;  // keeps the run short; small shapes cover the paths
      for (DType in : kInputs) {
        const uint32_t seed = next_seed();
        const auto [base, x] = make_input(m, k, in, layout, seed);
        for (DType out : kOutputs) {
          if (big && in == DType::kF16 && out == DType::kE4M3FNUZ) continue;
          ScaledCase sc;
          sc.out = out;
          sc.mode = ScaledQuantMode::kStatic;
          sc.static_scale = 0.0173f;
          check_scaled(base, x, sc, seed);
          sc.mode = ScaledQuantMode::kDynamicPerTensor;
          check_scaled(base, x, sc, seed);
          sc.grid_counter = true;  // one launch over a grid barrier for mid-sized inputs
          check_scaled(base, x, sc, seed, "grid counter");
          sc.grid_counter = false;
          sc.mode = ScaledQuantMode::kDynamicPerToken;
          check_scaled(base, x, sc, seed);
          if (!big) {  // padding rows, and the per-token upper bound
            sc.out_rows = m + 5;
            for (ScaledQuantMode mode :
                 {ScaledQuantMode::kStatic, ScaledQuantMode::kDynamicPerTensor, ScaledQuantMode::kDynamicPerToken}) {
              sc.mode = mode;
              check_scaled(base, x, sc, seed, "padded");
            }
            sc.mode = ScaledQuantMode::kDynamicPerTensor;
            sc.grid_counter = true;
            check_scaled(base, x, sc, seed, "padded, grid counter");
            sc.grid_counter = false;
            sc.out_rows = -1;
            sc.mode = ScaledQuantMode::kDynamicPerToken;
            sc.use_ub = true;
            sc.ub = 1.5f;
            check_scaled(base, x, sc, seed, "scale_ub");
          }
        }
      }
    }
  }
}

// A [m, k] input with the given values cycled.
std::pair<Tensor, Tensor> input_of(const std::vector<float>& values, int64_t m, int64_t k, DType dtype) {
  Tensor t = Tensor::empty({m, k}, dtype);
  for (int64_t i = 0; i < m * k; ++i) store_float(t, i, values[size_t(i) % values.size()]);
  return {t, t};
}

TEST(QuantScaledCuda, EdgeCases) {
  // NaN, infinities, zeros, values past 448 and 464, e4m3 ties, subnormal codes, negative zero.
  // Rows with infinities make per-token and per-tensor scales infinite; rows without keep NaN.
  const std::vector<float> with_inf = {NAN,    INFINITY, -INFINITY, 0.0f,       -0.0f,   448.0f,    -449.0f, 464.0f,
                                       480.0f, 1e30f,    -1e30f,    0x1p-10f,   0x1p-9f, 0x1.8p-9f, 13.0f,   -0.75f,
                                       1.0f,   0x1p-20f, 432.0f,    -0x1.2p-7f, 3.0f,    -2.5f,     7.0f,    -0.3f};
  const std::vector<float> finite = {NAN,     0.0f,  -0.0f, 448.0f,   -449.0f,    464.0f, 480.0f, 0x1p-10f,
                                     0x1p-9f, 13.0f, 1.0f,  0x1p-20f, -0x1.2p-7f, 3.0f,   -2.5f,  -0.3f};
  for (DType in : kInputs) {
    for (DType out : kOutputs) {
      for (int64_t k : {24, 23, 130}) {  // whole chunks, a partial chunk, and rows that are not 16-byte aligned
        for (const auto* values : {&with_inf, &finite}) {
          const uint32_t seed = next_seed();
          const auto [base, x] = input_of(*values, 4, k, in);
          ScaledCase sc;
          sc.out = out;
          for (float s :
               {1.0f, 0.5f, 0.0f, -2.0f, NAN, INFINITY, 0x1p-140f}) {  // static: zero scale gives zero codes (H2)
            sc.mode = ScaledQuantMode::kStatic;
            sc.static_scale = s;
            check_scaled(base, x, sc, seed, "specials, static scale " + std::to_string(s));
          }
          sc.mode = ScaledQuantMode::kDynamicPerTensor;
          check_scaled(base, x, sc, seed, "specials");
          sc.mode = ScaledQuantMode::kDynamicPerToken;
          check_scaled(base, x, sc, seed, "specials");
          sc.use_ub = true;
          for (float ub : {0.25f, 1e-30f, NAN, 1e38f}) {
            sc.ub = ub;
            check_scaled(base, x, sc, seed, "specials, ub " + std::to_string(ub));
          }
        }
      }
      // The one-launch form (grid counter) of a mid-sized input with the same specials.
      for (const auto* values : {&with_inf, &finite}) {
        const uint32_t seed = next_seed();
        const auto [base, x] = input_of(*values, 64, 4097, in);
        ScaledCase sc;
        sc.out = out;
        sc.mode = ScaledQuantMode::kDynamicPerTensor;
        sc.grid_counter = true;
        check_scaled(base, x, sc, seed, "specials, grid counter");
      }
      // All zeros: s = 0 per tensor gives zero codes; per token, the floor.
      const auto [zb, zx] = input_of({0.0f}, 3, 100, in);
      for (ScaledQuantMode mode : {ScaledQuantMode::kDynamicPerTensor, ScaledQuantMode::kDynamicPerToken}) {
        ScaledCase sc;
        sc.out = out;
        sc.mode = mode;
        check_scaled(zb, zx, sc, 0, "all zeros");
      }
      // Rows scaled to 448 exactly (s = 1 per token): the e4m3 ties stay ties.
      std::vector<float> ties;
      for (int c = 0; c < 0x7e; ++c) {
        ties.push_back(0.5f * (e4m3fn_bits_to_float(uint8_t(c)) + e4m3fn_bits_to_float(uint8_t(c + 1))));
        ties.push_back(-ties.back());
      }
      ties.push_back(448.0f);
      const auto [tb, tx] = input_of(ties, 2, int64_t(ties.size()), in);
      ScaledCase sc;
      sc.out = out;
      sc.mode = ScaledQuantMode::kDynamicPerToken;
      check_scaled(tb, tx, sc, 0, "ties");
      sc.mode = ScaledQuantMode::kStatic;
      sc.static_scale = 1.0f;
      check_scaled(tb, tx, sc, 0, "ties");
      // Huge values under a small bound: the per-token divisor leaves the reciprocal fast path.
      const auto [hb, hx] = input_of({3e37f, -1e20f, 5.0f, 1e-20f}, 3, 64, DType::kF32);
      sc.mode = ScaledQuantMode::kDynamicPerToken;
      sc.use_ub = true;
      sc.ub = 1e-3f;
      if (in == DType::kF32) check_scaled(hb, hx, sc, 0, "huge values, small ub");
    }
  }
}

TEST(QuantScaledCuda, EmptyInputs) {
  for (ScaledQuantMode mode :
       {ScaledQuantMode::kStatic, ScaledQuantMode::kDynamicPerTensor, ScaledQuantMode::kDynamicPerToken}) {
    for (auto [m, k] : std::vector<std::pair<int64_t, int64_t>>{{0, 16}, {4, 0}, {0, 0}}) {
      const auto [base, x] = make_input(m, k, DType::kBF16, Layout::kContiguous, 1);
      ScaledCase sc;
      sc.mode = mode;
      sc.static_scale = 1.0f;
      check_scaled(base, x, sc, 0, "empty");
      sc.out_rows = m + 3;
      check_scaled(base, x, sc, 0, "empty, padded");
    }
  }
}

// The regression of vLLM's test_fp8_quant_large: 1,024,000 x 1152 bf16 = 2.36 GB of input, past
// 2^31 bytes, so any 32-bit offset shows.
TEST(QuantScaledCuda, LargeStaticNeedsInt64Offsets) {
  const int64_t m = 1024000, k = 1152;
  const uint32_t seed = next_seed();
  Tensor x = Tensor::empty({m, k}, DType::kBF16);
  {
    // A fast generator for 1.2 G values: bf16 bits with exponents around 2^-7..2^7 and both signs.
    uint64_t state = seed | (uint64_t(seed) << 32) | 1;
    uint16_t* p = static_cast<uint16_t*>(x.data_ptr());
    for (int64_t i = 0; i < m * k; i += 4) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      for (int j = 0; j < 4; ++j) {
        const uint16_t r = uint16_t(state >> (16 * j));
        p[i + j] = uint16_t((r & 0x807f) | ((120 + (r >> 7) % 15) << 7));
      }
    }
  }
  ScaledCase sc;
  sc.mode = ScaledQuantMode::kStatic;
  sc.static_scale = 0.05f;
  check_scaled(x, x, sc, seed, "int64 offsets");
}

// Dynamic per-tensor and per-token quantization captured on a user stream, replayed twice over
// changing input: the scales come from the device each time (no host round trip).
TEST(QuantScaledCuda, CapturesIntoACudaGraph) {
  if (cuda::debug_sync_enabled()) GTEST_SKIP() << "FP8KIT_DEBUG_SYNC synchronizes inside the capture";
  cudaStream_t stream = nullptr;
  FP8KIT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Stream s{stream};
  const ForwardContext on_stream(Device::cuda(0), {}, s);
  const int64_t m = 64, k = 4096;
  Tensor x_d = Tensor::empty({m, k}, DType::kBF16, Device::cuda(0));
  ops::ScaledFp8QuantOptions per_tensor, per_token;
  per_token.use_per_token_if_dynamic = true;
  {
    // Warm-up: kernels loaded and occupancy queried, and both results' blocks cached by the
    // allocator, so the capture allocates without cudaMalloc.
    const ops::QuantResult wa = ops::scaled_fp8_quant(on_stream, x_d, per_tensor);
    const ops::QuantResult wb = ops::scaled_fp8_quant(on_stream, x_d, per_token);
    stream_synchronize(s);
  }

  FP8KIT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  ops::QuantResult a = ops::scaled_fp8_quant(on_stream, x_d, per_tensor);
  ops::QuantResult b = ops::scaled_fp8_quant(on_stream, x_d, per_token);
  cudaGraph_t graph = nullptr;
  FP8KIT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  FP8KIT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (int replay = 0; replay < 2; ++replay) {
    const uint32_t seed = next_seed();
    const Tensor x = random_tensor({m, k}, DType::kBF16, seed, replay == 0 ? 1.0f : 30.0f);
    x_d.copy_(x, s);
    for (Tensor* t : {&a.q, &b.q}) t->fill_bytes_(kPoisonCodes, s);
    for (Tensor* t : {&a.scale, &b.scale}) t->fill_bytes_(kPoisonScales, s);
    FP8KIT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    stream_synchronize(s);
    ops::ScaledFp8QuantOptions cpu_token;
    cpu_token.use_per_token_if_dynamic = true;
    const ops::QuantResult want_a = ops::scaled_fp8_quant(ctx_of(x), x);
    const ops::QuantResult want_b = ops::scaled_fp8_quant(ctx_of(x), x, cpu_token);
    const Case c{"scaled_fp8_quant in a CUDA graph", {m, k}, DType::kBF16, DType::kE4M3FN, seed,
                 "replay " + std::to_string(replay)};
    expect_same_tensor(c, "per-tensor codes", a.q, want_a.q);
    expect_same_tensor(c, "per-tensor scale", a.scale, want_a.scale);
    expect_same_tensor(c, "per-token codes", b.q, want_b.q);
    expect_same_tensor(c, "per-token scales", b.scale, want_b.scale);
  }
  FP8KIT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  FP8KIT_CUDA_CHECK(cudaGraphDestroy(graph));
  FP8KIT_CUDA_CHECK(cudaStreamDestroy(stream));
}

// The one-launch dynamic per-tensor form waits at a grid barrier for all of its blocks: it is a
// cooperative launch (its captured kernel node says so), so it never starts with only part of its
// blocks resident. Launched while another stream's kernel fills every multiprocessor, it starts
// after that kernel lets go and gives the reference's bits.
TEST(QuantScaledCuda, GridBarrierFormIsCooperativeAndFinishesBesideAFullGpu) {
  if (cuda::debug_sync_enabled()) GTEST_SKIP() << "FP8KIT_DEBUG_SYNC synchronizes inside the capture";
  const int64_t m = 64, k = 4096;  // between the one-block and the two-pass sizes on an H200
  const uint32_t seed = next_seed();
  const Tensor x = random_tensor({m, k}, DType::kBF16, seed);
  const ops::QuantResult want = ops::scaled_fp8_quant(ctx_of(x), x);
  const Case c{"scaled_fp8_quant dynamic per-tensor beside a full GPU", {m, k}, DType::kBF16, DType::kE4M3FN, seed, ""};

  cudaStream_t stream = nullptr, other = nullptr;
  FP8KIT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  FP8KIT_CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  const ForwardContext on_stream(Device::cuda(0), {}, Stream{stream});
  const Tensor x_d = x.to(Device::cuda(0));
  {
    const ops::QuantResult warm = ops::scaled_fp8_quant(on_stream, x_d);  // kernels loaded, blocks cached
    stream_synchronize(Stream{stream});
  }

  // The captured node of the one-launch kernel carries the cooperative attribute.
  FP8KIT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  ops::QuantResult captured = ops::scaled_fp8_quant(on_stream, x_d);
  cudaGraph_t graph = nullptr;
  FP8KIT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  size_t count = 0;
  FP8KIT_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  FP8KIT_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  int kernels = 0, cooperative = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    FP8KIT_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    ++kernels;
    cudaLaunchAttributeValue value{};
    FP8KIT_CUDA_CHECK(cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeCooperative, &value));
    cooperative += value.cooperative != 0 ? 1 : 0;
  }
  EXPECT_EQ(kernels, 1) << "the one-launch form: one kernel";
  EXPECT_EQ(cooperative, 1) << "its kernel node is not cooperative";
  FP8KIT_CUDA_CHECK(cudaGraphDestroy(graph));

  for (int round = 0; round < 2; ++round) {  // eager, then the captured graph's replay
    Tensor got_q, got_scale;
    cudaGraphExec_t exec = nullptr;
    {
      gpu_test::OccupiedMultiprocessors full(other, /*limit_s=*/20.0);
      if (round == 0) {
        const ops::QuantResult r = ops::scaled_fp8_quant(on_stream, x_d);
        got_q = r.q;
        got_scale = r.scale;
      } else {
        captured.q.fill_bytes_(kPoisonCodes, Stream{stream});
        FP8KIT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        captured = ops::scaled_fp8_quant(on_stream, x_d);
        FP8KIT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        FP8KIT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        FP8KIT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
        got_q = captured.q;
        got_scale = captured.scale;
      }
      // While the other kernel holds the GPU, no block of the cooperative kernel may run, so the
      // stream cannot have finished; the release lets it through.
      EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady) << "round " << round << ": ran beside " << full.blocks()
                                                            << " blocks that fill the GPU";
      full.release();
    }
    stream_synchronize(Stream{stream});
    expect_same_tensor(c, "codes, round " + std::to_string(round), got_q, want.q);
    expect_same_tensor(c, "scale, round " + std::to_string(round), got_scale, want.scale);
    if (exec != nullptr) FP8KIT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  }
  FP8KIT_CUDA_CHECK(cudaGraphDestroy(graph));
  FP8KIT_CUDA_CHECK(cudaStreamDestroy(stream));
  FP8KIT_CUDA_CHECK(cudaStreamDestroy(other));
}

}  // namespace
}  // namespace fp8kit
