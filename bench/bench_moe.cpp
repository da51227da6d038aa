// Benchmark of fused_experts on CUDA (include/fp8kit/ops/moe_experts.h), not a test: the whole
// layer (quantization, moe_align_block_size, two grouped FP8 GEMMs, activation, moe_sum) on the
// PERF_TARGETS MoE shapes. Per case: verify once at M <= 64 (the tensor-core GEMMs against the
// CUDA-core GEMMs, FP8KIT_MOE_GEMM=simt, and no output element left unwritten), then time with
// CUDA events (median, L2 flushed before each launch) and, at M <= 64, CUDA-graph replays of the
// captured call (the layer does no host synchronization). Reports TFLOP/s (2 * slots * 3 * H * I)
// and the touched experts' weight bytes / time against the copy ceiling of the same run; and the
// first grouped GEMM alone (the kernel and block size fused_experts picks, inputs prepared once).
// The torch peer (bench/peers/moe_torch.py) runs in the same gpu-check.
//   bench_moe [[--json] PATH] [--m LIST] [--models LIST] [--scalings per_tensor,block,weight_only]
//             [--quick] [--no-graphs] [--fast-accum]
// weight_only: FP8 experts with bf16 activations (the path of GPUs without FP8 tensor cores).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "fp8kit/ops/moe_experts.h"
#include "fp8kit/ops/moe_routing.h"
#include "fp8kit/ops/quant.h"
#include "fp8kit/platform.h"
#include "ops/moe/grouped_gemm_dispatch.h"
#include "ops/moe/grouped_gemm_sorted.h"

using namespace fp8kit;
using namespace fp8kit::bench;

namespace {

struct Model {
  std::string name;
  int64_t e, h, inter, top_k;
  bool per_tensor;  // the model is also run with per-tensor scales (DeepSeek-V3 ships block only)
};

const std::vector<Model> kModels = {{"mixtral-8x7b", 8, 4096, 14336, 2, true},
                                    {"qwen3-30b-a3b", 128, 2048, 768, 8, true},
                                    {"deepseek-v3", 256, 7168, 2048, 8, false}};

struct Cli {
  std::string json_path;
  std::vector<int64_t> ms{1, 16, 64, 256, 512, 1024, 2048, 4096};  // the grid, 512 and 2048
  std::vector<std::string> models{"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"};
  std::vector<std::string> scalings{"per_tensor", "block"};
  TimerConfig timer{25.0, 10, 500, 3};
  bool graphs = true;
  bool fast_accum = false;  // FusedExpertsOptions::fast_accum (per-tensor cases)
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [[--json] PATH] [--m 1,16,64,256,512,1024,2048,4096] [--models mixtral-8x7b,qwen3-30b-a3b,deepseek-v3]\n"
               "          [--scalings per_tensor,block,weight_only] [--target-ms MS] [--quick] [--no-graphs]\n"
               "          [--fast-accum]\n"
               "  JSON default: $FP8KIT_RESULTS_DIR/bench_moe.json, else ./gpu-results/bench_moe.json\n",
               argv0);
  std::exit(2);
}

Cli parse(int argc, char** argv) {
  Cli cli;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (a == "--json") {
      cli.json_path = value();
    } else if (a == "--m") {
      cli.ms.clear();
      for (const std::string& v : split(value())) cli.ms.push_back(std::stoll(v));
    } else if (a == "--models") {
      cli.models = split(value());
    } else if (a == "--scalings") {
      cli.scalings = split(value());
    } else if (a == "--target-ms") {
      cli.timer.target_ms = std::stod(value());
    } else if (a == "--quick") {
      cli.timer = TimerConfig{8.0, 5, 100, 2};
    } else if (a == "--no-graphs") {
      cli.graphs = false;
    } else if (a == "--fast-accum") {
      cli.fast_accum = true;
    } else if (!a.empty() && a[0] != '-' && cli.json_path.empty()) {
      cli.json_path = a;
    } else {
      usage(argv[0]);
    }
  }
  cli.json_path = results_path(cli.json_path, "bench_moe.json");
  return cli;
}

struct Weights {  // one model's experts on the device, FP8 with both kinds of scales
  Tensor w1, w2, w1_scale_tensor, w2_scale_tensor, w1_scale_block, w2_scale_block;
};

Tensor device_f32(const std::vector<float>& v, const Shape& shape) { return Tensor::from_vector(v, shape).to(Device::cuda(0)); }

Weights make_weights(const Model& m, cudaStream_t s) {
  Weights w;
  const Device gpu = Device::cuda(0);
  w.w1 = Tensor::empty({m.e, 2 * m.inter, m.h}, DType::kE4M3FN, gpu);
  w.w2 = Tensor::empty({m.e, m.h, m.inter}, DType::kE4M3FN, gpu);
  fill_random_e4m3(w.w1.data_ptr(), w.w1.numel(), 11, s);
  fill_random_e4m3(w.w2.data_ptr(), w.w2.numel(), 12, s);
  // Scales that keep activations O(1): codes are O(100), sums over K of O(100 * 100 * sqrt(K)).
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> jitter(0.5f, 1.5f);
  auto scales = [&](int64_t count, int64_t k) {
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = jitter(rng) / (100.0f * std::sqrt(float(k)));
    return v;
  };
  w.w1_scale_tensor = device_f32(scales(m.e, m.h), {m.e});
  w.w2_scale_tensor = device_f32(scales(m.e, m.inter), {m.e});
  const int64_t n1 = (2 * m.inter + 127) / 128, k1 = (m.h + 127) / 128, n2 = (m.h + 127) / 128, k2 = (m.inter + 127) / 128;
  w.w1_scale_block = device_f32(scales(m.e * n1 * k1, m.h), {m.e, n1, k1});
  w.w2_scale_block = device_f32(scales(m.e * n2 * k2, m.inter), {m.e, n2, k2});
  return w;
}

struct Routing {
  Tensor ids, weights;  // device
  int64_t touched = 0;  // distinct experts
};

// Uniform routing: top_k distinct experts per token, weights renormalized.
Routing make_routing(const Model& m, int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  std::vector<int32_t> perm(size_t(m.e));
  std::set<int32_t> touched;
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < m.e; ++i) perm[size_t(i)] = int32_t(i);
    float sum = 0;
    for (int64_t k = 0; k < m.top_k; ++k) {
      std::swap(perm[size_t(k)], perm[size_t(k + int64_t(rng() % uint32_t(m.e - k)))]);
      ids.push_back(perm[size_t(k)]);
      touched.insert(perm[size_t(k)]);
      weights.push_back(u(rng));
      sum += weights.back();
    }
    for (int64_t k = 0; k < m.top_k; ++k) weights[size_t(t * m.top_k + k)] /= sum;
  }
  Routing r;
  r.ids = Tensor::from_vector(ids, {tokens, m.top_k}).to(Device::cuda(0));
  r.weights = Tensor::from_vector(weights, {tokens, m.top_k}).to(Device::cuda(0));
  r.touched = int64_t(touched.size());
  return r;
}

struct CaseResult {
  std::string model, scaling;
  int64_t m = 0, e = 0, h = 0, inter = 0, top_k = 0, touched = 0;
  Timing timing;
  double graph_us = -1, tflops = 0, weight_gbps = 0, pct_copy = 0;
  double gemm1_us = 0, gemm1_tflops = 0, gemm1_gbps = 0;  // GEMM1 alone
  // The layer's physical floor: the larger of its unavoidable bytes (touched experts' weights, x
  // read, out written) at the copy rate of the run and its FLOPs at the datasheet tensor peak.
  double floor_us = 0, pct_floor = 0;
  std::string verify = "-", error;
  bool verify_ok = true;
};

// Relative L2 distance of two bf16 device tensors, and the count of never-written elements of a.
std::pair<double, int64_t> compare(const Tensor& a, const Tensor& b, cudaStream_t s) {
  const int64_t poisoned = count_poisoned(a.data_ptr(), a.size(0), a.size(1), a.stride(0), 1, 2, s);
  const Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
  double num = 0, den = 0;
  for (int64_t i = 0; i < ha.numel(); ++i) {
    const double x = bf16_to_float(ha.data<BFloat16>()[i]), y = bf16_to_float(hb.data<BFloat16>()[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return {std::sqrt(num / std::max(den, 1e-300)), poisoned};
}

// The layer's first grouped GEMM alone (x [M, H] -> C1 [M * top_k, 2I]) with the kernel and block
// size fused_experts picks; quantization and moe_align run once, outside the timed region.
Timing time_gemm1(const Model& model, const Weights& w, bool block, const Tensor& x, const Routing& routing,
                  bool fast_accum, Timer& timer, cudaStream_t s) {
  const int64_t m = x.size(0), slots = m * model.top_k;
  const Overrides& overrides = process_overrides();
  const ops::GroupedKernel kernel = ops::preferred_grouped_kernel(ops::ExpertQuant::kFp8W8A8, 0, overrides);
  const int64_t block_m = ops::grouped_block_m(slots, model.e, kernel, overrides);
  const ops::MoeAlignResult align = ops::moe_align_block_size(bench_ctx(routing.ids), routing.ids, block_m, model.e, {}, false);
  ops::QuantResult q;
  if (block) {
    ops::PerTokenGroupQuantOptions o;
    o.group_size = 128;
    q = ops::per_token_group_quant(bench_ctx(x), x, o);
  } else {
    ops::ScaledFp8QuantOptions o;
    q = ops::scaled_fp8_quant(bench_ctx(x), x, o);
  }
  const Tensor c1 = Tensor::empty({slots, 2 * model.inter}, DType::kBF16, Device::cuda(0));
  ops::GroupedGemmArgs g;
  g.n = 2 * model.inter, g.k = model.h, g.num_slots = slots, g.a_slots_per_row = model.top_k, g.block_m = block_m;
  g.grid_m_blocks = std::min(align.expert_ids.size(0), (slots + block_m - 1) / block_m + std::min(slots, model.e));
  g.sorted_ids = static_cast<const int32_t*>(align.sorted_token_ids.data_ptr());
  g.expert_ids = static_cast<const int32_t*>(align.expert_ids.data_ptr());
  g.num_post_pad = static_cast<const int32_t*>(align.num_tokens_post_padded.data_ptr());
  g.a = q.q.data_ptr(), g.a_dtype = q.q.dtype(), g.lda = q.q.stride(0);
  g.b = w.w1.data_ptr(), g.b_dtype = w.w1.dtype(), g.b_expert_stride = w.w1.stride(0), g.ldb = w.w1.stride(1);
  g.num_experts = w.w1.size(0);
  g.quant = ops::ExpertQuant::kFp8W8A8;
  g.block = block, g.block_n = block ? 128 : 0, g.block_k = block ? 128 : 0;
  g.a_scale = static_cast<const float*>(q.scale.data_ptr());
  g.b_scale = static_cast<const float*>((block ? w.w1_scale_block : w.w1_scale_tensor).data_ptr());
  g.c = c1.data_ptr(), g.c_dtype = DType::kBF16, g.ldc = c1.stride(0);
  g.fast_accum = fast_accum;
  if (kernel == ops::GroupedKernel::kWgmma && block_m >= 64 && ops::grouped_gemm_sm90_sorted_rejects(g, 0).empty()) {
    // fused_experts' prefill path: the rows gathered into sorted order once (not timed), then
    // the TMA-fed kernel writing the sorted intermediate.
    const int64_t rows = g.grid_m_blocks * block_m;
    const Tensor xs = Tensor::empty({rows, model.h}, q.q.dtype(), Device::cuda(0));
    const Tensor scale_s = block ? Tensor::empty({rows, q.scale.size(1)}, DType::kF32, Device::cuda(0)) : q.scale;
    const Tensor c1s = Tensor::empty({rows, 2 * model.inter}, DType::kBF16, Device::cuda(0));
    ops::SortedGather gather;
    gather.rows = rows, gather.k = model.h, gather.num_slots = slots, gather.slots_per_row = model.top_k;
    gather.sorted_ids = g.sorted_ids, gather.num_post_pad = g.num_post_pad;
    gather.x = static_cast<const uint8_t*>(q.q.data_ptr()), gather.ldx = q.q.stride(0);
    gather.out = static_cast<uint8_t*>(xs.data_ptr()), gather.ldo = model.h;
    if (block) {
      gather.groups = q.scale.size(1);
      gather.scale = static_cast<const float*>(q.scale.data_ptr());
      gather.scale_out = static_cast<float*>(scale_s.data_ptr());
    }
    ops::gather_sorted_rows(gather, s);
    ops::GroupedGemmArgs gs = g;
    gs.a = xs.data_ptr(), gs.lda = model.h;
    gs.a_scale = static_cast<const float*>(scale_s.data_ptr());
    gs.c = c1s.data_ptr(), gs.ldc = c1s.stride(0);
    return timer.time([&](int) { ops::grouped_gemm_sm90_sorted(gs, s); });
  }
  return timer.time([&](int) { ops::run_grouped_gemm(g, kernel, 0, s); });
}

CaseResult run_case(const Model& model, const Weights& w, bool block, bool weight_only, int64_t m, Timer& timer,
                    const CopyCeiling& copy, const Cli& cli, cudaStream_t s) {
  const bool graphs = cli.graphs;
  CaseResult r;
  r.model = model.name, r.scaling = weight_only ? "weight_only" : block ? "block" : "per_tensor";
  r.m = m, r.e = model.e, r.h = model.h, r.inter = model.inter, r.top_k = model.top_k;
  const Device gpu = Device::cuda(0);
  const Routing routing = make_routing(model, m, uint32_t(1000 + m));
  r.touched = routing.touched;
  Tensor x = Tensor::empty({m, model.h}, DType::kBF16, gpu);
  fill_random_bf16(x.data_ptr(), m, model.h, 77 + uint64_t(m), s);
  ops::FusedExpertsOptions o;
  o.use_fp8_w8a8 = !weight_only;
  o.weight_only = weight_only;  // FP8 experts, bf16 activations (GPUs without FP8 tensor cores)
  o.fast_accum = cli.fast_accum;
  if (block) {
    o.block_shape = std::make_pair(int64_t(128), int64_t(128));
    o.w1_scale = w.w1_scale_block;
    o.w2_scale = w.w2_scale_block;
  } else {
    o.w1_scale = w.w1_scale_tensor;
    o.w2_scale = w.w2_scale_tensor;
  }
  auto call = [&]() { return ops::fused_experts(bench_ctx(x), x, w.w1, w.w2, routing.weights, routing.ids, o); };
  // The CUDA-core grouped GEMMs, which the verification compares against.
  Overrides simt = process_overrides();
  simt.moe_gemm = MoeGemmOverride::kSimt;
  const ForwardContext simt_ctx(Device::cuda(0), simt, Stream{s});

  if (m <= 64) {  // verify: tensor cores vs CUDA cores, every element written
    cuda_empty_cache(0);
    { Tensor poison = Tensor::empty({m, model.h}, DType::kBF16, gpu); poison.fill_bytes_(kPoisonByte, Stream{s}); }
    const Tensor got = call();
    const Tensor want = ops::fused_experts(simt_ctx, x, w.w1, w.w2, routing.weights, routing.ids, o);
    const auto [rel, poisoned] = compare(got, want, s);
    // Fast accumulation adds the tensor cores' truncation over the whole K (about 1% of the
    // output at K = 4096-14336; docs/numerics.md).
    const double bound = o.fast_accum && !block ? 3e-2 : 1e-2;
    r.verify_ok = poisoned == 0 && rel <= bound;  // NaN fails
    r.verify = fmt::format("{} (rel L2 vs CUDA-core GEMM {:.1e}, {} unwritten)", r.verify_ok ? "ok" : "FAIL", rel, poisoned);
  }

  r.timing = timer.time([&](int) { call(); });
  const double flops = 2.0 * double(m * model.top_k) * 3.0 * double(model.h) * double(model.inter);
  const double bytes = double(r.touched) * 3.0 * double(model.h) * double(model.inter);
  r.tflops = flops / (r.timing.median_us * 1e6);
  r.weight_gbps = bytes / (r.timing.median_us * 1e3);
  r.pct_copy = 100.0 * r.weight_gbps / copy.gbps;
  const double io_bytes = 2.0 * 2.0 * double(m) * double(model.h);  // bf16 x in, out
  const double peak_tflops = weight_only ? kBf16PeakTflops : kFp8PeakTflops;
  r.floor_us = std::max((bytes + io_bytes) / (copy.gbps * 1e3), flops / (peak_tflops * 1e6));
  r.pct_floor = 100.0 * r.floor_us / r.timing.median_us;
  if (!weight_only) {  // GEMM1 alone: the FP8 grouped GEMM
    r.gemm1_us = time_gemm1(model, w, block, x, routing, o.fast_accum, timer, s).median_us;
    r.gemm1_tflops = 2.0 * double(m * model.top_k) * 2.0 * double(model.h) * double(model.inter) / (r.gemm1_us * 1e6);
    r.gemm1_gbps = double(r.touched) * 2.0 * double(model.h) * double(model.inter) / (r.gemm1_us * 1e3);
  }

  if (graphs && m <= 64) {  // capture one call (after the warm-up above) and time its replays
    try {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
      Tensor out;
      try {
        out = call();
      } catch (...) {
        cudaStreamEndCapture(s, &graph);
        if (graph != nullptr) cudaGraphDestroy(graph);
        throw;
      }
      check_cuda(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
      check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
      const Timing t = timer.time([&](int) { check_cuda(cudaGraphLaunch(exec, s), "cudaGraphLaunch"); });
      r.graph_us = t.median_us;
      check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    } catch (const std::exception& e) {
      r.verify += fmt::format("; graph capture failed: {}", e.what());
      r.verify_ok = false;
    }
  }
  return r;
}

void print_table(const std::vector<CaseResult>& results, const CopyCeiling& copy) {
  fmt::print("\n{:<14} {:<10} {:>5} {:>7} {:>10} {:>10} {:>8} {:>8} {:>6} {:>9} {:>6} {:>9} {:>8} {:>8}  {}\n", "model",
             "scaling", "M", "experts", "median us", "graph us", "TF/s", "w TB/s", "%copy", "floor us", "%floor", "GEMM1 us",
             "G1 TF/s", "G1 TB/s", "verify");
  for (const CaseResult& r : results) {
    if (!r.error.empty()) {
      fmt::print("{:<14} {:<10} {:>5} error: {}\n", r.model, r.scaling, r.m, r.error);
      continue;
    }
    fmt::print(
        "{:<14} {:<10} {:>5} {:>7} {:>10.1f} {:>10} {:>8.1f} {:>8.2f} {:>5.1f}% {:>9.1f} {:>5.1f}% {:>9.1f} {:>8.1f} {:>8.2f}  {}\n",
        r.model, r.scaling, r.m, r.touched, r.timing.median_us, r.graph_us > 0 ? fmt::format("{:.1f}", r.graph_us) : "-",
        r.tflops, r.weight_gbps / 1e3, r.pct_copy, r.floor_us, r.pct_floor, r.gemm1_us, r.gemm1_tflops, r.gemm1_gbps / 1e3,
        r.verify);
  }
  fmt::print(
      "\nwhole layer (quant, align, GEMM1, activation, quant, GEMM2, sum). TF/s = 2 * M * top_k * 3 * H * I / median;"
      " w TB/s = touched experts' FP8 weight bytes (3 * H * I each) / median; %copy of {:.0f} GB/s. floor us = the"
      " larger of (those weight bytes + x in + out) at that copy rate and the FLOPs at the dense tensor peak ({:.0f}"
      " TF/s FP8, {:.0f} bf16); %floor = floor / median. GEMM1 = the"
      " first grouped GEMM alone (2 * M * top_k * 2I * H FLOP; touched w13 bytes). graph us ="
      " replays of the captured call. Targets (PERF_TARGETS.md): decode >= 3.8 TB/s, prefill vs vLLM's Triton"
      " kernels (bench/peers/moe_torch.py runs a torch peer in the same gpu-check).\n",
      copy.gbps, kFp8PeakTflops, kBf16PeakTflops);
}

}  // namespace

int main(int argc, char** argv) {
  const Cli cli = parse(argc, argv);
  if (cuda_device_count() == 0) {
    std::printf("bench_moe: no CUDA device: skipped\n");
    return 77;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    set_bench_stream(stream);
    L2Flusher flusher(get_l2_cache_bytes(0), FlushMode::kRead);
    Timer timer(stream, flusher, cli.timer);
    fmt::print("bench_moe on {} (sm_{}, {} SMs)\n", get_device_name(0), get_device_capability(0).as_int(),
               get_cu_count(0));
    const CopyCeiling copy = measure_copy(timer, stream);
    fmt::print("copy ceiling: {:.0f} GB/s\n", copy.gbps);
    std::fflush(stdout);

    std::vector<CaseResult> results;
    for (const Model& model : kModels) {
      if (std::find(cli.models.begin(), cli.models.end(), model.name) == cli.models.end()) continue;
      const Weights w = make_weights(model, stream);
      for (const std::string& scaling : cli.scalings) {
        const bool block = scaling == "block", weight_only = scaling == "weight_only";
        if (!block && ((scaling != "per_tensor" && !weight_only) || !model.per_tensor)) continue;
        for (const int64_t m : cli.ms) {
          try {
            results.push_back(run_case(model, w, block, weight_only, m, timer, copy, cli, stream));
          } catch (const std::exception& e) {
            CaseResult r;
            r.model = model.name, r.scaling = scaling, r.m = m, r.error = e.what(), r.verify_ok = false;
            results.push_back(r);
            check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
          }
          const CaseResult& r = results.back();
          fmt::print("{} {} M={}: {}\n", r.model, r.scaling, r.m,
                     r.error.empty() ? fmt::format("{:.1f} us", r.timing.median_us) : r.error);
          std::fflush(stdout);
        }
      }
      check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    print_table(results, copy);

    nlohmann::json j;
    j["bench"] = "bench_moe";
    j["date"] = iso_time_utc();
    add_run_info(j);
    j["copy"] = copy_json(copy);
    j["fast_accum"] = cli.fast_accum;
    nlohmann::json cases = nlohmann::json::array();
    for (const CaseResult& r : results) {
      nlohmann::json c = {{"model", r.model}, {"scaling", r.scaling}, {"m", r.m},         {"e", r.e},
                          {"h", r.h},         {"i", r.inter},       {"top_k", r.top_k}, {"touched_experts", r.touched},
                          {"verify", r.verify}, {"verify_ok", r.verify_ok}};
      if (!r.error.empty()) {
        c["error"] = r.error;
      } else {
        c.update(timing_json(r.timing));
        c["graph_us"] = r.graph_us > 0 ? nlohmann::json(r.graph_us) : nlohmann::json();
        c["tflops"] = r.tflops;
        c["weight_gbps"] = r.weight_gbps;
        c["gemm1_us"] = r.gemm1_us;
        c["gemm1_tflops"] = r.gemm1_tflops;
        c["gemm1_weight_gbps"] = r.gemm1_gbps;
        c["pct_copy"] = r.pct_copy;
        c["floor_us"] = r.floor_us;
        c["pct_floor"] = r.pct_floor;
      }
      cases.push_back(c);
    }
    j["cases"] = cases;
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    j["wall_s"] = wall_s;
    write_json_file(j, cli.json_path);
    fmt::print("wrote {}\nwall time {:.1f} s\n", cli.json_path, wall_s);
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    const bool all_ok = std::all_of(results.begin(), results.end(),
                                    [](const CaseResult& r) { return r.verify_ok && r.error.empty(); });
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_moe: %s\n", e.what());
    return 1;
  }
}
