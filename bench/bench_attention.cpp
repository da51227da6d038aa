// Benchmark of paged_attention on CUDA (include/fp8kit/ops/attention.h), not a test (the tests are
// tests/gpu/test_attention_cuda.cpp). Llama-3-8B's attention shape (32 query heads, 8 KV heads,
// head size 128, 16-token blocks, blocks placed at random), an fp8_e4m3 and a bf16 cache, the
// cache already holding every key (k and v not given). Decode: one query per sequence at 1k..16k
// context, batch sized so the cache is ~128k tokens (far past the L2): KV bytes read / time
// against the device-to-device copy and the read-only streaming floor of the same run. Prefill:
// fresh 2k/4k prompts and a 2k chunk over 6k of context: TFLOP/s (4 * heads * head_size per
// visible key and query). Every case is checked once: no output left unwritten, and the
// tensor-core kernel against the CUDA-core one (FP8KIT_ATTENTION_KERNEL=simt) within 2e-2 rel L2.
// The torch peer (bench/peers/attention_torch.py) runs the same shapes in the same gpu-check.
// --decode runs the decode cases alone.
//   bench_attention [[--json] PATH] [--quick] [--decode]
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "fp8kit/ops/attention.h"
#include "fp8kit/platform.h"

using namespace fp8kit;
using namespace fp8kit::bench;

namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadSize = 128, kBlock = 16;

struct Case {
  std::string kind;  // "decode" or "prefill"
  int64_t batch = 0, q_len = 0, ctx = 0;  // per sequence: ctx cached tokens before the q_len new ones
  ops::KvCacheDtype cache = ops::KvCacheDtype::kFp8E4M3;
};

struct Result {
  Case c;
  Timing timing;
  double kv_bytes = 0, kv_gbps = 0, pct_copy = 0, pct_read = 0, flops = 0, tflops = 0;
  std::string verify, error;
  bool verify_ok = false;
};

const char* cache_name(ops::KvCacheDtype d) { return d == ops::KvCacheDtype::kAuto ? "bf16" : "fp8_e4m3"; }

// The problem on the device: caches filled at random, q random, metadata of the case.
struct Problem {
  Tensor q;
  ops::PagedKvCache cache;
  ops::AttentionMetadata md;
};

Problem make_problem(const Case& c, cudaStream_t s) {
  const Device gpu = Device::cuda(0);
  const int64_t len = c.ctx + c.q_len, blocks_per_seq = (len + kBlock - 1) / kBlock;
  const int64_t num_blocks = c.batch * blocks_per_seq;
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(uint32_t(len + c.batch)));
  std::vector<int32_t> qsl(size_t(c.batch + 1)), lens(size_t(c.batch), int32_t(len));
  for (int64_t r = 0; r <= c.batch; ++r) qsl[size_t(r)] = int32_t(r * c.q_len);
  Problem p;
  p.md.query_start_loc = Tensor::from_vector(qsl).to(gpu);
  p.md.seq_lens = Tensor::from_vector(lens).to(gpu);
  p.md.block_table = Tensor::from_vector(ids, {c.batch, blocks_per_seq}).to(gpu);
  const bool fp8 = c.cache != ops::KvCacheDtype::kAuto;
  p.cache.dtype = c.cache;
  const Shape shape{num_blocks, kBlock, kKvHeads, kHeadSize};
  p.cache.key_cache = Tensor::empty(shape, fp8 ? DType::kU8 : DType::kBF16, gpu);
  p.cache.value_cache = Tensor::empty(shape, fp8 ? DType::kU8 : DType::kBF16, gpu);
  const int64_t elements = p.cache.key_cache.numel();
  if (fp8) {
    fill_random_e4m3(p.cache.key_cache.data_ptr(), elements, 11, s);
    fill_random_e4m3(p.cache.value_cache.data_ptr(), elements, 12, s);
    p.cache.k_scale = Tensor::from_vector(std::vector<float>{0.01f}).to(gpu);
    p.cache.v_scale = Tensor::from_vector(std::vector<float>{0.01f}).to(gpu);
  } else {
    fill_random_bf16(p.cache.key_cache.data_ptr(), elements / kHeadSize, kHeadSize, 11, s);
    fill_random_bf16(p.cache.value_cache.data_ptr(), elements / kHeadSize, kHeadSize, 12, s);
  }
  p.q = Tensor::empty({c.batch * c.q_len, kHeads, kHeadSize}, DType::kBF16, gpu);
  fill_random_bf16(p.q.data_ptr(), c.batch * c.q_len * kHeads, kHeadSize, 13, s);
  return p;
}

Tensor run(const ForwardContext& ctx, const Problem& p, const Tensor& out = Tensor()) {
  ops::PagedAttentionOptions o;
  o.out = out;
  return ops::paged_attention(ctx, p.q, Tensor(), Tensor(), p.cache, p.md, o);
}

// Rel L2 of a against b (bf16, same shape), on the host.
double rel_l2(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
  double num = 0, den = 0;
  for (int64_t i = 0; i < ha.numel(); ++i) {
    const double x = bf16_to_float(ha.data<BFloat16>()[i]), y = bf16_to_float(hb.data<BFloat16>()[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

Result run_case(const Case& c, Timer& timer, const CopyCeiling& copy, double read_gbps, cudaStream_t s) {
  Result r;
  r.c = c;
  const Problem p = make_problem(c, s);
  const ForwardContext& ctx = bench_ctx(p.q);
  Overrides simt = process_overrides();
  simt.attention_kernel = AttentionKernelOverride::kSimt;
  const ForwardContext simt_ctx(Device::cuda(0), simt, Stream{s});

  // Verify once: every element written (the output poisoned first), against the CUDA-core kernel.
  Tensor out = Tensor::empty(p.q.shape(), DType::kBF16, Device::cuda(0));
  out.fill_bytes_(kPoisonByte, Stream{s});
  run(ctx, p, out);
  const int64_t rows = p.q.size(0), width = kHeads * kHeadSize;
  const int64_t unwritten = count_poisoned(out.data_ptr(), rows, width, width, 1, 2, s);
  const double rel = rel_l2(out, run(simt_ctx, p));
  r.verify_ok = unwritten == 0 && rel <= 2e-2;  // NaN fails
  r.verify = fmt::format("{} (rel L2 vs CUDA cores {:.1e}, {} unwritten)", r.verify_ok ? "ok" : "FAIL", rel, unwritten);

  r.timing = timer.time([&](int) { run(ctx, p, out); });
  const int64_t len = c.ctx + c.q_len;
  const double elem = c.cache == ops::KvCacheDtype::kAuto ? 2.0 : 1.0;
  r.kv_bytes = double(c.batch) * double(len) * kKvHeads * kHeadSize * 2.0 * elem;
  r.kv_gbps = r.kv_bytes / (r.timing.median_us * 1e3);
  r.pct_copy = 100.0 * r.kv_gbps / copy.gbps;
  r.pct_read = 100.0 * r.kv_gbps / read_gbps;
  double visible = 0;  // keys seen, summed over the queries of one sequence (causal)
  for (int64_t i = 0; i < c.q_len; ++i) visible += double(c.ctx + i + 1);
  r.flops = 4.0 * kHeads * kHeadSize * visible * double(c.batch);
  r.tflops = r.flops / (r.timing.median_us * 1e6);
  return r;
}

std::vector<Case> cases(bool quick, bool decode_only) {
  std::vector<Case> v;
  for (const auto cache : {ops::KvCacheDtype::kFp8E4M3, ops::KvCacheDtype::kAuto}) {
    for (const int64_t ctx : {1024, 2048, 4096, 8192, 16384}) {
      if (quick && ctx != 4096) continue;
      v.push_back({"decode", std::max<int64_t>(131072 / ctx, 1), 1, ctx - 1, cache});
    }
    v.push_back({"decode", 1, 1, 16383, cache});  // one long sequence: split-K alone fills the chip
    if (decode_only) continue;
    v.push_back({"prefill", 4, 2048, 0, cache});
    if (!quick) v.push_back({"prefill", 2, 4096, 0, cache});
    v.push_back({"prefill", 4, 2048, 6144, cache});  // a chunk over cached context
  }
  return v;
}

void print_table(const std::vector<Result>& results) {
  fmt::print("\n| kind | cache | batch | q_len | context | us | KV GB/s | % copy | % read floor | TFLOP/s | verify |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Result& r : results) {
    if (!r.error.empty()) {
      fmt::print("| {} | {} | {} | {} | {} | error: {} |\n", r.c.kind, cache_name(r.c.cache), r.c.batch, r.c.q_len,
                 r.c.ctx, r.error);
      continue;
    }
    fmt::print("| {} | {} | {} | {} | {} | {:.1f} | {:.0f} | {:.0f} | {:.0f} | {:.1f} | {} |\n", r.c.kind,
               cache_name(r.c.cache), r.c.batch, r.c.q_len, r.c.ctx, r.timing.median_us, r.kv_gbps, r.pct_copy,
               r.pct_read, r.tflops, r.verify);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false, decode_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--decode") {
      decode_only = true;
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      json_path = a;
    } else {
      std::fprintf(stderr, "usage: bench_attention [[--json] PATH] [--quick] [--decode]\n");
      return 2;
    }
  }
  json_path = results_path(json_path, "bench_attention.json");
  if (cuda_device_count() == 0) {
    std::printf("bench_attention: no CUDA device: skipped\n");
    return 77;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    set_bench_stream(stream);
    L2Flusher flusher(get_l2_cache_bytes(0), FlushMode::kRead);
    Timer timer(stream, flusher, TimerConfig{25.0, 10, 500, 3});
    fmt::print("bench_attention on {} (sm_{}, {} SMs)\n", get_device_name(0), get_device_capability(0).as_int(),
               get_cu_count(0));
    const CopyCeiling copy = measure_copy(timer, stream);
    const size_t read_bytes = size_t(1) << 30;
    const Tensor read_buffer = Tensor::empty({int64_t(read_bytes)}, DType::kU8, Device::cuda(0));
    fill_random_e4m3(read_buffer.data_ptr(), int64_t(read_bytes), 5, stream);
    const Timing read = measure_stream_read(read_buffer.data_ptr(), read_bytes, timer, stream);
    const double read_gbps = double(read_bytes) / (read.median_us * 1e3);
    fmt::print("copy ceiling: {:.0f} GB/s (read + written); read floor: {:.0f} GB/s\n", copy.gbps, read_gbps);
    std::fflush(stdout);

    std::vector<Result> results;
    for (const Case& c : cases(quick, decode_only)) {
      try {
        results.push_back(run_case(c, timer, copy, read_gbps, stream));
      } catch (const std::exception& e) {
        Result r;
        r.c = c, r.error = e.what();
        results.push_back(r);
        check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      }
      const Result& r = results.back();
      fmt::print("{} {} batch {} q_len {} ctx {}: {}\n", c.kind, cache_name(c.cache), c.batch, c.q_len, c.ctx,
                 r.error.empty() ? fmt::format("{:.1f} us, {}", r.timing.median_us, r.verify) : r.error);
      std::fflush(stdout);
    }
    print_table(results);

    nlohmann::json j;
    j["bench"] = "bench_attention";
    j["date"] = iso_time_utc();
    add_run_info(j);
    j["copy"] = copy_json(copy);
    j["read_floor_gbps"] = read_gbps;
    j["shape"] = {{"num_heads", kHeads}, {"num_kv_heads", kKvHeads}, {"head_size", kHeadSize}, {"block_size", kBlock}};
    nlohmann::json list = nlohmann::json::array();
    for (const Result& r : results) {
      nlohmann::json c = {{"kind", r.c.kind}, {"cache", cache_name(r.c.cache)}, {"batch", r.c.batch},
                          {"q_len", r.c.q_len}, {"ctx", r.c.ctx}, {"verify", r.verify}, {"verify_ok", r.verify_ok}};
      if (!r.error.empty()) {
        c["error"] = r.error;
      } else {
        c.update(timing_json(r.timing));
        c["kv_bytes"] = r.kv_bytes, c["kv_gbps"] = r.kv_gbps, c["pct_copy"] = r.pct_copy;
        c["pct_read_floor"] = r.pct_read, c["flops"] = r.flops, c["tflops"] = r.tflops;
      }
      list.push_back(c);
    }
    j["cases"] = list;
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    j["wall_s"] = wall_s;
    write_json_file(j, json_path);
    fmt::print("wrote {}\nwall time {:.1f} s\n", json_path, wall_s);
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    const bool all_ok =
        std::all_of(results.begin(), results.end(), [](const Result& r) { return r.verify_ok && r.error.empty(); });
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 1;
  }
}
