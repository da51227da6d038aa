// End-to-end CPU speed of fp8kit::Engine on one checkpoint, measured as llama.cpp's llama-bench
// does it (bench/peers/llama_cpp_bench.py): pp = a P-token prompt prefilled in one step, tg = D
// one-token decode steps from an empty context, one untimed run then the median of --runs. Beside
// them, in the same run: the bytes a decode step touches (every tensor of the checkpoint, the tied
// embedding read once as lm_head) and the read bandwidth of that many bytes on the same threads,
// whose quotient is the decode floor, the pool jobs per decode token and the peak resident memory
// before the floor's buffer. Prints one JSON object. Driven by bench/cpu_end_to_end.sh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include "bench_cpu_floors.h"
#include "core/parallel.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/model/engine.h"
#include "fp8kit/runtime/forward_context.h"

namespace {

using namespace fp8kit;

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

GenerationParams greedy(int64_t max_tokens) {
  GenerationParams p;
  p.sampling.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;  // no stop ids: every run generates max_tokens
}

// Seconds of the prefill step of a `prompt`-token request (one new token sampled).
double time_prefill(Engine& engine, const ForwardContext& ctx, const std::vector<int32_t>& ids, int64_t prompt) {
  engine.add_request(std::vector<int32_t>(ids.begin(), ids.begin() + prompt), greedy(1));
  const auto t0 = std::chrono::steady_clock::now();
  while (engine.has_unfinished_requests()) engine.step(ctx);
  return seconds(t0);
}

// Seconds of `decode` one-token steps after a one-token prompt (llama-bench's tg from an empty
// context).
double time_decode(Engine& engine, const ForwardContext& ctx, const std::vector<int32_t>& ids, int64_t decode) {
  engine.add_request({ids[0]}, greedy(decode + 1));
  engine.step(ctx);  // the one-token prefill, not timed
  const auto t0 = std::chrono::steady_clock::now();
  int64_t steps = 0;
  while (engine.has_unfinished_requests()) {
    const StepOutput s = engine.step(ctx);
    steps += s.num_decode_tokens;
  }
  const double t = seconds(t0);
  if (steps != decode) {
    std::fprintf(stderr, "bench_engine_cpu: %lld decode steps instead of %lld\n", (long long)steps, (long long)decode);
    std::exit(1);
  }
  return t;
}

uint64_t checkpoint_bytes(const std::string& dir) {
  const Checkpoint c = Checkpoint::open(dir);
  uint64_t bytes = 0;
  for (const std::string& name : c.tensor_names()) {
    const TensorInfo& t = c.info(name);
    bytes += t.data_end - t.data_begin;
  }
  return bytes;
}

// A "Name: N kB" line of /proc/self/status (0 where there is none, as off Linux).
double status_kb(const char* name) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kb = 0;
  const size_t len = std::strlen(name);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, name, len) == 0) kb = std::atof(line + len);
  }
  std::fclose(f);
  return kb;
}

int usage() {
  std::fprintf(stderr,
               "usage: bench_engine_cpu MODEL_DIR [--threads N] [--backend fast|reference] [--prompt 512] "
               "[--decode 128] [--runs 3]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string model = argv[1];
  int threads = 2, runs = 3;
  int64_t prompt = 512, decode = 128;
  std::string backend = "fast";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--threads") threads = std::atoi(value.c_str());
    else if (flag == "--backend") backend = value;
    else if (flag == "--prompt") prompt = std::atoll(value.c_str());
    else if (flag == "--decode") decode = std::atoll(value.c_str());
    else if (flag == "--runs") runs = std::atoi(value.c_str());
    else return usage();
  }
  if (threads < 1 || runs < 1 || prompt < 1 || decode < 1 || (backend != "fast" && backend != "reference")) {
    return usage();
  }
  try {
    Overrides o = process_overrides();
    o.num_threads = threads;
    o.cpu_backend = backend == "fast" ? CpuBackend::kFast : CpuBackend::kReference;
    const ForwardContext ctx(Device::cpu(), o);
    EngineOptions options;
    options.load.overrides = o;
    // The checkpoint as it is: FP8 when it says so, a 16-bit one unquantized (as fp8kit generate).
    const Checkpoint checkpoint = Checkpoint::open(model);
    const auto& config = checkpoint.config();
    options.load.quantize = config.contains("quantization_config") && !config["quantization_config"].is_null();
    options.kv_cache.num_tokens = std::max(prompt, decode + 1) + 16;
    options.max_tokens_per_step = prompt;
    const auto load_start = std::chrono::steady_clock::now();
    Engine engine(model, options);
    const double load_s = seconds(load_start);
    const int64_t vocab = engine.model_info().vocab_size;
    std::vector<int32_t> ids(static_cast<size_t>(prompt));
    uint32_t x = 12345;
    for (int32_t& id : ids) {
      x = x * 1664525u + 1013904223u;
      id = int32_t((x >> 8) % uint32_t(vocab));
    }
    const std::string load_before = bench::load_average();
    time_prefill(engine, ctx, ids, prompt);  // untimed: first touch of the weights and buffers
    std::vector<double> pp, tg;
    for (int r = 0; r < runs; ++r) pp.push_back(time_prefill(engine, ctx, ids, prompt));
    time_decode(engine, ctx, ids, std::min<int64_t>(decode, 8));
    const uint64_t jobs_before = pool_jobs();
    for (int r = 0; r < runs; ++r) tg.push_back(time_decode(engine, ctx, ids, decode));
    const double jobs_per_token = double(pool_jobs() - jobs_before) / double(runs * decode);
    // Peak resident memory of the engine (mapped weights count as they are touched), taken before
    // the floor's buffer of the checkpoint's size is allocated; and its file-backed part now.
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const double peak_rss_gb = double(usage.ru_maxrss) * 1024.0 * 1e-9;
    const double rss_file_gb = status_kb("RssFile:") * 1024.0 * 1e-9;
    const uint64_t bytes = checkpoint_bytes(model);
    std::vector<double> bw;
    for (int r = 0; r < 3; ++r) bw.push_back(bench::read_bandwidth_gbs(size_t(bytes), 1, threads));
    const double read_gbs = median(bw);
    const double pp_s = median(pp), tg_s = median(tg);
    nlohmann::ordered_json j;
    j["model"] = model;
    j["backend"] = backend;
    j["threads"] = threads;
    j["quantization"] = engine.model_info().quantization;
    j["load_s"] = load_s;
    j["prompt"] = prompt;
    j["pp_tok_s"] = double(prompt) / pp_s;
    j["pp_runs_s"] = pp;
    j["decode"] = decode;
    j["tg_tok_s"] = double(decode) / tg_s;
    j["tg_runs_s"] = tg;
    j["pool_jobs_per_token"] = jobs_per_token;  // hand-offs to the thread pool per decode token
    j["peak_rss_gb"] = peak_rss_gb;
    j["rss_file_gb"] = rss_file_gb;
    j["bytes_per_token"] = bytes;
    j["read_gbs"] = read_gbs;
    j["floor_tok_s"] = read_gbs * 1e9 / double(bytes);
    j["load_before"] = load_before;
    j["load_after"] = bench::load_average();
    std::printf("%s\n", j.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_engine_cpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
