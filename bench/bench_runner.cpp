// The model runner's speed and memory, as llama-bench measures a model: pp (one prompt of --prompt
// random tokens prefilled in one step) and tg (--decode tokens generated one at a time after a
// one-token prompt), each the median of --runs after one untimed run, with the peak resident set
// of the process against the resident weights (every parameter and plain tensor the engine keeps)
// plus the KV pool, and the machine load around the run. Prints one JSON object.
//   bench_runner MODEL [--prompt 128] [--decode 32] [--runs 3] [--quantization auto|fp8]
//                [--kv-cache-dtype auto|fp8|fp8_e5m2] [--device cpu|cuda] [--batch 1] [--eager]
//   (threads: FP8KIT_NUM_THREADS)
// --batch B decodes B sequences at once (tg counts the tokens of all). On CUDA every step ends
// waiting for its logits, so the host clock times the device work; decode steps replay CUDA
// graphs unless --eager, and the floor is the bytes a decode step reads (every weight once, the
// KV cache of the batch at its mean context) over the device's copy rate measured in the run.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/checkpoint.h"
#include "fp8kit/model/engine.h"
#include "fp8kit/platform.h"

namespace {

using fp8kit::Engine;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) * 1024;
}

int64_t resident_weight_bytes(const fp8kit::LoadedModel& m) {
  int64_t total = 0;
  const auto layer = [&](const fp8kit::Layer& l) {
    for (const auto& [name, p] : l.parameters()) total += p.data.defined() ? int64_t(p.data.nbytes()) : 0;
  };
  for (const auto& [n, l] : m.linears) layer(*l);
  for (const auto& [n, l] : m.moes) layer(*l);
  for (const auto& [n, t] : m.plain) total += int64_t(t.nbytes());
  return total;
}

// Seconds of the steps of one request: its prefill steps and its decode steps apart.
struct Timing {
  double prefill = 0, decode = 0;
  int64_t decoded = 0;
};

Timing run(Engine& engine, const fp8kit::ForwardContext& ctx, const std::vector<int32_t>& prompt, int64_t max_tokens,
           int64_t batch = 1) {
  fp8kit::GenerationParams p;
  p.sampling.temperature = 0.0f;
  p.max_tokens = max_tokens;
  for (int64_t b = 0; b < batch; ++b) engine.add_request(prompt, p);
  Timing t;
  while (engine.has_unfinished_requests()) {
    const double t0 = now();
    const fp8kit::StepOutput s = engine.step(ctx);
    (s.num_prefill_tokens > 0 ? t.prefill : t.decode) += now() - t0;
    if (s.num_prefill_tokens == 0) t.decoded += s.num_decode_tokens;
  }
  return t;
}

// Bytes read plus written per second by a device-to-device copy of 1 GiB (the median of 5).
double device_copy_bytes_per_s(fp8kit::Device device) {
  const int64_t n = int64_t(1) << 30;
  const fp8kit::Tensor a = fp8kit::Tensor::zeros({n}, fp8kit::DType::kU8, device);
  fp8kit::Tensor b = fp8kit::Tensor::empty({n}, fp8kit::DType::kU8, device);
  std::vector<double> rates;
  for (int r = 0; r < 6; ++r) {
    fp8kit::device_synchronize(device.index);
    const double t0 = now();
    b.copy_(a);
    fp8kit::device_synchronize(device.index);
    if (r > 0) rates.push_back(2.0 * double(n) / (now() - t0));
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_runner MODEL [--prompt N] [--decode N] [--runs N] [--quantization auto|fp8] "
                         "[--kv-cache-dtype D]\n");
    return 2;
  }
  const std::string model = argv[1];
  int64_t prompt_len = 128, decode = 32, runs = 3, batch = 1;
  std::string quantization = "auto", kv = "auto", device = "cpu";
  bool eager = false;
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--eager") {
      eager = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_runner: %s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[i + 1];
    if (flag == "--prompt") prompt_len = std::stoll(value);
    else if (flag == "--batch") batch = std::max<int64_t>(1, std::stoll(value));
    else if (flag == "--device") device = value;
    else if (flag == "--decode") decode = std::stoll(value);
    else if (flag == "--runs") runs = std::max<int64_t>(1, std::stoll(value));
    else if (flag == "--quantization") quantization = value;
    else if (flag == "--kv-cache-dtype") kv = value;
    else {
      std::fprintf(stderr, "bench_runner: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  try {
    const std::string load_start = loadavg();
    fp8kit::EngineOptions o;
    o.load.overrides = fp8kit::process_overrides();
    // Closed before the engine maps the shards again, so that the peak resident set is the engine's.
    const bool fp8_checkpoint = fp8kit::Checkpoint::open(model).config().contains("quantization_config");
    o.load.quantize = quantization == "fp8" || fp8_checkpoint;
    o.kv_cache.dtype = kv;
    o.kv_cache.num_tokens = std::max(prompt_len, batch * (decode + 16));
    o.max_tokens_per_step = std::max(prompt_len, batch);
    o.max_num_seqs = std::max<int64_t>(64, batch);
    o.cuda_graphs = !eager;
    if (device == "cuda") o.load.device = fp8kit::Device::cuda(0);
    const double t_load = now();
    Engine engine(model, o);
    const double load_s = now() - t_load;
    const int64_t rss_after_load = peak_rss_bytes();
    const fp8kit::ForwardContext ctx = fp8kit::ForwardContext::from_environment(o.load.device);
    std::vector<int32_t> prompt;
    for (int64_t i = 0; i < prompt_len; ++i) prompt.push_back(int32_t((i * 7919 + 17) % engine.model_info().vocab_size));
    std::vector<double> pp, tg;
    for (int64_t r = 0; r <= runs; ++r) {  // run 0 is untimed
      const Timing a = run(engine, ctx, prompt, 1);
      const Timing b = run(engine, ctx, {prompt[0]}, decode, batch);
      if (r == 0) continue;
      pp.push_back(double(prompt_len) / a.prefill);
      tg.push_back(double(b.decoded) / b.decode);
    }
    const int64_t weights = resident_weight_bytes(engine.loaded_model());
    const int64_t pool = engine.kv_cache_info().bytes;
    const int64_t rss = peak_rss_bytes();
    nlohmann::ordered_json j;
    j["model"] = model;
    j["architecture"] = engine.model_info().architecture;
    j["quantization"] = engine.model_info().quantization;
    j["kv_cache_dtype"] = engine.kv_cache_info().dtype;
    j["device"] = o.load.device.str();
    j["threads"] = ctx.num_threads();
    j["decode_batch"] = batch;
    j["cuda_graphs"] = o.load.device.is_cuda() && !eager;
    j["load_s"] = load_s;
    j["pp"] = prompt_len;
    j["pp_tokens_per_s"] = median(pp);
    j["tg"] = decode;
    j["tg_tokens_per_s"] = median(tg);
    j["pp_runs"] = pp;
    j["tg_runs"] = tg;
    j["weights_bytes"] = weights;
    j["kv_pool_bytes"] = pool;
    j["peak_rss_after_load_bytes"] = rss_after_load;
    j["peak_rss_bytes"] = rss;
    j["peak_rss_over_weights_and_kv"] = double(rss) / double(weights + pool);
    if (o.load.device.is_cuda()) {
      // The decode floor: every weight once and the batch's KV at its mean context (1 + decode / 2
      // tokens) per step, at the copy rate (bytes read + written per second) of this device.
      const double copy = device_copy_bytes_per_s(o.load.device);
      const fp8kit::KvCacheInfo kv_info = engine.kv_cache_info();
      const double kv_token = double(kv_info.bytes) / double(std::max<int64_t>(1, kv_info.num_blocks * kv_info.block_size));
      const double step_bytes = double(weights) + double(batch) * (1.0 + double(decode) / 2.0) * kv_token;
      j["device_copy_GBps"] = copy / 1e9;
      j["decode_step_bytes"] = step_bytes;
      j["tg_floor_tokens_per_s"] = double(batch) * copy / step_bytes;
      j["tg_over_floor"] = median(tg) / (double(batch) * copy / step_bytes);
    }
    j["loadavg_start"] = load_start;
    j["loadavg_end"] = loadavg();
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_runner: %s\n", e.what());
    return 1;
  }
}
