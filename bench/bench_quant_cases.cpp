// The cases of bench_quant (bench_quant_cases.h). Inputs are random bf16 generated on the GPU, one
// set per shape shared by every op; when an input is under 2x the L2 it is copied so that timed
// launches rotate through >= 2x L2 of data. Verification: every output element written (outputs
// poisoned first), and the bytes (codes, f32 scales) of the verified rows equal the reference's.
#include "bench_quant_cases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>

#include "fp8kit/ops/quant.h"
#include "fp8kit/platform.h"

namespace fp8kit::bench {
namespace {

using Tensors = std::vector<Tensor>;

// One op on one shape: the GPU call on input copy i, the CPU reference of rows [r0, r0 + n), the
// same rows of the GPU outputs, and optional extra checks (layouts, whole-tensor scales).
struct OpPlan {
  std::function<Tensors(int)> run;
  std::function<Tensors(const Tensors&, int64_t, int64_t)> reference;
  std::function<Tensors(const Tensors&, int64_t, int64_t)> rows_of;
  std::function<std::string(const Tensors&)> extra_check;
  double bytes_in = 0, bytes_out = 0;
  int64_t row_block = 1;  // verified row ranges start at multiples of this
};

struct OpInfo {
  const char* key;
  const char* description;
  bool weight_op;          // large shapes only
  double target_pct_copy;  // PERF_TARGETS.md; 0: none stated
};

// Order = table order. Targets: >= 90% of copy, dynamic per-tensor (two reads) >= 75%.
constexpr OpInfo kOps[] = {
    {"static", "scaled_fp8_quant, static per-tensor scale", false, 90},
    {"dynamic_per_tensor", "scaled_fp8_quant, dynamic per-tensor scale", false, 75},
    {"dynamic_per_token", "scaled_fp8_quant, dynamic per-token scales", false, 90},
    {"group128_rowmajor", "per_token_group_quant g=128, row-major scales", false, 90},
    {"group128_colmajor_tma", "per_token_group_quant g=128, column-major TMA-aligned scales", false, 90},
    {"weight_block128", "quantize_weight_block 128x128", true, 90},
    {"weight_per_channel", "quantize_weight_per_channel", true, 0},
    {"dequant_block128", "dequantize_weight 128x128 blocks -> bf16", true, 0},
};

struct ShapeSpec {
  int64_t m, k;
  bool decode;
  bool weight_ops;
};

std::vector<ShapeSpec> shapes() {
  // bf16 inputs of 64 MiB, 256 MiB, 1 GiB, and PERF_TARGETS' per-token-group shape (72 MiB).
  std::vector<ShapeSpec> s = {
      {8192, 4096, false, true}, {16384, 8192, false, true}, {32768, 16384, false, true}, {2048, 18432, false, false}};
  for (int64_t m : {1, 16, 64}) {
    for (int64_t k : {4096, 7168, 16384}) s.push_back({m, k, true, false});
  }
  return s;
}

struct Diff {
  int64_t count = 0;
  int64_t first = -1;
};

Diff compare_bytes(const Tensor& got_in, const Tensor& want_in) {
  const Tensor got = got_in.contiguous(), want = want_in.contiguous();
  Diff d;
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) {
    d.count = -1;
    return d;
  }
  const size_t es = got.element_size();
  const auto* a = static_cast<const unsigned char*>(got.data_ptr());
  const auto* b = static_cast<const unsigned char*>(want.data_ptr());
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::memcmp(a + i * es, b + i * es, es) != 0) {
      if (d.count == 0) d.first = i;
      ++d.count;
    }
  }
  return d;
}

Tensor rows_to_cpu(const Tensor& t, int64_t r0, int64_t n) { return t.narrow(0, r0, n).to(Device::cpu()); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Inputs of one shape: `copies` identical random bf16 tensors on the GPU and their max |x|.
struct ShapeInputs {
  int64_t m = 0, k = 0;
  std::vector<Tensor> x;
  float amax = 0;
};

OpPlan make_plan(const std::string& key, const ShapeInputs& in) {
  const int64_t m = in.m, k = in.k;
  const double mk = double(m) * double(k);
  const Device cpu = Device::cpu();
  const std::vector<Tensor>& x = in.x;
  auto x_rows = [&in](int64_t r0, int64_t n) { return rows_to_cpu(in.x[0], r0, n); };
  auto rows_all = [](const Tensors& out, int64_t r0, int64_t n) {
    Tensors r;
    for (const Tensor& t : out) r.push_back(rows_to_cpu(t, r0, n));
    return r;
  };
  OpPlan p;
  p.rows_of = rows_all;
  if (key == "static") {
    const float s = in.amax / 448.0f;  // a calibrated static scale
    const Tensor scale_dev = Tensor::scalar_f32(s).to(Device::cuda(0));
    p.run = [&x, scale_dev](int i) {
      ops::ScaledFp8QuantOptions o;
      o.scale = scale_dev;
      return Tensors{ops::scaled_fp8_quant(bench_ctx(x[i]), x[i], o).q};
    };
    p.reference = [x_rows, s](const Tensors&, int64_t r0, int64_t n) {
      ops::ScaledFp8QuantOptions o;
      o.scale = Tensor::scalar_f32(s);
      return Tensors{ops::scaled_fp8_quant(bench_ctx(x_rows(r0, n)), x_rows(r0, n), o).q};
    };
    p.bytes_in = 2 * mk + 4;
    p.bytes_out = mk;
  } else if (key == "dynamic_per_tensor") {
    p.run = [&x](int i) {
      ops::ScaledFp8QuantOptions o;
      const ops::QuantResult r = ops::scaled_fp8_quant(bench_ctx(x[i]), x[i], o);
      return Tensors{r.q, r.scale};
    };
    // The whole-tensor scale against an independent absmax; the codes of the verified rows
    // against the reference's static path with that scale (the same formula once s is known).
    const float amax = in.amax;
    p.extra_check = [amax, cpu](const Tensors& out) -> std::string {
      const float got = out[1].to(cpu).contiguous().data<float>()[0];
      const float want = amax / 448.0f;
      return float_bits(got) == float_bits(want) ? "" : fmt::format("scale {:a} != amax/448 {:a}", got, want);
    };
    p.reference = [x_rows, cpu](const Tensors& out, int64_t r0, int64_t n) {
      ops::ScaledFp8QuantOptions o;
      o.scale = Tensor::scalar_f32(out[1].to(cpu).contiguous().data<float>()[0]);
      return Tensors{ops::scaled_fp8_quant(bench_ctx(x_rows(r0, n)), x_rows(r0, n), o).q};
    };
    p.rows_of = [](const Tensors& out, int64_t r0, int64_t n) { return Tensors{rows_to_cpu(out[0], r0, n)}; };
    p.bytes_in = 2 * mk;
    p.bytes_out = mk + 4;
  } else if (key == "dynamic_per_token") {
    p.run = [&x](int i) {
      ops::ScaledFp8QuantOptions o;
      o.use_per_token_if_dynamic = true;
      const ops::QuantResult r = ops::scaled_fp8_quant(bench_ctx(x[i]), x[i], o);
      return Tensors{r.q, r.scale};
    };
    p.reference = [x_rows](const Tensors&, int64_t r0, int64_t n) {
      ops::ScaledFp8QuantOptions o;
      o.use_per_token_if_dynamic = true;
      const ops::QuantResult r = ops::scaled_fp8_quant(bench_ctx(x_rows(r0, n)), x_rows(r0, n), o);
      return Tensors{r.q, r.scale};
    };
    p.bytes_in = 2 * mk;
    p.bytes_out = mk + 4.0 * m;
  } else if (key == "group128_rowmajor" || key == "group128_colmajor_tma") {
    const bool colmajor = key == "group128_colmajor_tma";
    p.run = [&x, colmajor](int i) {
      ops::PerTokenGroupQuantOptions o;
      o.group_size = 128;
      o.column_major_scales = colmajor;
      o.tma_aligned_scales = colmajor;
      const ops::QuantResult r = ops::per_token_group_quant(bench_ctx(x[i]), x[i], o);
      return Tensors{r.q, r.scale};
    };
    // The reference's row-major scales hold the same values; rows_to_cpu reads them logically.
    p.reference = [x_rows](const Tensors&, int64_t r0, int64_t n) {
      ops::PerTokenGroupQuantOptions o;
      o.group_size = 128;
      const ops::QuantResult r = ops::per_token_group_quant(bench_ctx(x_rows(r0, n)), x_rows(r0, n), o);
      return Tensors{r.q, r.scale};
    };
    if (colmajor) {
      p.extra_check = [m](const Tensors& out) -> std::string {
        const Tensor& s = out[1];  // [M, K/128], strides (1, align(M, 4)); a size-1 dimension's stride is free
        const bool rows_ok = s.size(0) == 1 || s.stride(0) == 1;
        const bool groups_ok = s.size(1) == 1 || (s.stride(1) >= m && s.stride(1) % 4 == 0);
        if (rows_ok && groups_ok) return "";
        return fmt::format("scale strides {} are not column-major TMA-aligned", shape_to_string(s.strides()));
      };
    }
    p.bytes_in = 2 * mk;
    p.bytes_out = mk + 4.0 * m * (k / 128);
  } else if (key == "weight_block128") {
    p.run = [&x](int i) {
      ops::WeightQuantOptions o;
      const ops::QuantResult r = ops::quantize_weight_block(bench_ctx(x[i]), x[i], 128, 128, o);
      return Tensors{r.q, r.scale};
    };
    p.reference = [x_rows](const Tensors&, int64_t r0, int64_t n) {
      const ops::QuantResult r = ops::quantize_weight_block(bench_ctx(x_rows(r0, n)), x_rows(r0, n), 128, 128);
      return Tensors{r.q, r.scale};
    };
    p.rows_of = [](const Tensors& out, int64_t r0, int64_t n) {
      return Tensors{rows_to_cpu(out[0], r0, n), rows_to_cpu(out[1], r0 / 128, ceil_div(n, 128))};
    };
    p.row_block = 128;
    p.bytes_in = 2 * mk;
    p.bytes_out = mk + 4.0 * ceil_div(m, 128) * ceil_div(k, 128);
  } else if (key == "weight_per_channel") {
    p.run = [&x](int i) {
      ops::WeightQuantOptions o;
      const ops::QuantResult r = ops::quantize_weight_per_channel(bench_ctx(x[i]), x[i], o);
      return Tensors{r.q, r.scale};
    };
    p.reference = [x_rows](const Tensors&, int64_t r0, int64_t n) {
      const ops::QuantResult r = ops::quantize_weight_per_channel(bench_ctx(x_rows(r0, n)), x_rows(r0, n));
      return Tensors{r.q, r.scale};
    };
    p.bytes_in = 2 * mk;
    p.bytes_out = mk + 4.0 * m;
  } else if (key == "dequant_block128") {
    // Inputs: the block quantization of every input copy (made once, untimed).
    auto qs = std::make_shared<Tensors>(), ss = std::make_shared<Tensors>();
    for (const Tensor& w : x) {
      ops::WeightQuantOptions o;
      const ops::QuantResult r = ops::quantize_weight_block(bench_ctx(w), w, 128, 128, o);
      qs->push_back(r.q);
      ss->push_back(r.scale);
    }
    p.run = [qs, ss](int i) {
      return Tensors{ops::dequantize_weight(bench_ctx((*qs)[i]), (*qs)[i], (*ss)[i], DType::kBF16, std::pair<int64_t, int64_t>{128, 128})};
    };
    p.reference = [qs, ss](const Tensors&, int64_t r0, int64_t n) {
      return Tensors{ops::dequantize_weight(bench_ctx(rows_to_cpu((*qs)[0], r0, n)), rows_to_cpu((*qs)[0], r0, n),
                                            rows_to_cpu((*ss)[0], r0 / 128, ceil_div(n, 128)), DType::kBF16,
                                            std::pair<int64_t, int64_t>{128, 128})};
    };
    p.row_block = 128;
    p.bytes_in = mk + 4.0 * ceil_div(m, 128) * ceil_div(k, 128);
    p.bytes_out = 2 * mk;
  }
  return p;
}

// Elements of `t` (1-D or 2-D, any strides) never written since their memory was poisoned.
int64_t unwritten(const Tensor& t, cudaStream_t stream) {
  if (t.dim() == 0) return count_poisoned(t.data_ptr(), 1, 1, 0, 0, int(t.element_size()), stream);
  if (t.dim() == 1) return count_poisoned(t.data_ptr(), 1, t.size(0), 0, t.stride(0), int(t.element_size()), stream);
  return count_poisoned(t.data_ptr(), t.size(0), t.size(1), t.stride(0), t.stride(1), int(t.element_size()), stream);
}

// Runs the plan on copy 0 into poisoned memory, checks that every output element was written and
// compares the verified rows with the reference; fills verify_* of `r`. The op's outputs come from
// the caching allocator, which hands back a freed block of the same rounded size: after emptying
// the cache, blocks of the outputs' sizes are poisoned and freed, so the op receives them.
void verify(const OpPlan& p, const ShapeInputs& in, bool decode, cudaStream_t stream, CaseResult& r) {
  std::vector<size_t> sizes;
  for (const Tensor& t : p.run(0)) sizes.push_back(t.storage()->nbytes());
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (verify)");
  cuda_empty_cache(0);
  {
    Tensors poison;
    for (size_t bytes : sizes) {
      poison.push_back(Tensor::empty({static_cast<int64_t>(bytes)}, DType::kU8, Device::cuda(0)));
      poison.back().fill_bytes_(kPoisonByte, Stream{static_cast<void*>(stream)});
    }
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (poison)");
  }
  const Tensors out = p.run(0);
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (verify)");
  std::vector<std::pair<int64_t, int64_t>> ranges;  // (first row, rows)
  if (decode) {
    ranges.push_back({0, in.m});
  } else {
    const int64_t n = std::min<int64_t>(in.m, std::max<int64_t>(64, p.row_block));
    ranges.push_back({0, n});
    const int64_t last = (in.m - n) / p.row_block * p.row_block;
    if (last > 0) ranges.push_back({last, in.m - last});
  }
  std::string note;
  if (p.extra_check) note = p.extra_check(out);
  static const char* const kOutputNames[] = {"output", "scale"};
  for (size_t t = 0; t < out.size() && t < 2; ++t) {
    const int64_t missing = unwritten(out[t], stream);
    if (missing == 0) continue;
    if (!note.empty()) note += "; ";
    note += fmt::format("{}: {} of {} elements never written", kOutputNames[t], missing, out[t].numel());
  }
  for (const auto& [r0, n] : ranges) {
    r.verify_rows += n;
    const Tensors want = p.reference(out, r0, n);
    const Tensors got = p.rows_of(out, r0, n);
    for (size_t t = 0; t < want.size() && t < got.size(); ++t) {
      const Diff d = compare_bytes(got[t], want[t]);
      if (d.count == 0) continue;
      if (!note.empty()) note += "; ";
      note += d.count < 0 ? fmt::format("{} of rows {}+{}: shape/dtype {} vs reference {}", kOutputNames[t], r0, n,
                                        got[t].description(), want[t].description())
                          : fmt::format("{} of rows {}+{}: {} of {} differ, first at flat index {}", kOutputNames[t],
                                        r0, n, d.count, want[t].numel(), d.first);
    }
  }
  r.verify_ok = note.empty();
  r.verify_note = note;
}

}  // namespace

std::vector<CaseResult> CaseRunner::run_all(const std::string& filter) {
  std::vector<CaseResult> results;
  for (const ShapeSpec& shape : shapes()) {
    const std::string shape_name = fmt::format("{}x{}", shape.m, shape.k);
    std::vector<int> wanted;
    for (int o = 0; o < int(std::size(kOps)); ++o) {
      if (kOps[o].weight_op && !shape.weight_ops) continue;
      if (!filter.empty() && (std::string(kOps[o].key) + " " + shape_name).find(filter) == std::string::npos) continue;
      wanted.push_back(o);
    }
    if (wanted.empty()) continue;

    ShapeInputs in;
    in.m = shape.m;
    in.k = shape.k;
    const double input_bytes = 2.0 * shape.m * shape.k;
    const int copies = static_cast<int>(std::clamp(std::ceil(2.0 * l2_bytes_ / input_bytes), 1.0, 8.0));
    for (int c = 0; c < copies; ++c) {
      in.x.push_back(Tensor::empty({shape.m, shape.k}, DType::kBF16, Device::cuda(0)));
      fill_random_bf16(in.x.back().data_ptr(), shape.m, shape.k, 1234 + shape.m * 31 + shape.k, stream_);
    }
    in.amax = absmax_bf16(in.x[0].data_ptr(), shape.m * shape.k, stream_);

    for (int o : wanted) {
      CaseResult r;
      r.kernel = kOps[o].key;
      r.description = kOps[o].description;
      r.kernel_order = o;
      r.shape = shape_name;
      r.m = shape.m;
      r.k = shape.k;
      r.decode = shape.decode;
      r.input_copies = copies;
      r.target_pct_copy = shape.decode ? 0 : kOps[o].target_pct_copy;
      try {
        const OpPlan plan = make_plan(r.kernel, in);
        r.bytes_in = plan.bytes_in;
        r.bytes_out = plan.bytes_out;
        verify(plan, in, shape.decode, stream_, r);
        auto launch = [&](int i) { plan.run(i % copies); };
        r.timing = timer_.time(launch);
        if (shape.decode) r.b2b_us = timer_.back_to_back_us(launch);
        r.gbps = r.bytes() / (r.timing.median_us * 1e3);
        r.pct_copy = 100.0 * r.gbps / copy_.gbps;
        if (!r.verify_ok) {
          r.verdict = "FAIL";
        } else if (r.target_pct_copy <= 0) {
          r.verdict = "info";
        } else {
          r.verdict = r.pct_copy >= r.target_pct_copy ? "pass" : "miss";
        }
      } catch (const std::exception& e) {
        r.error = e.what();
        r.verdict = "FAIL";
        cudaGetLastError();  // a non-sticky launch error must not fail the next case
        cudaStreamSynchronize(stream_);
      }
      if (r.error.empty()) {
        fmt::print("  {:<22} {:>12}  {:>10.2f} us  {:>6.0f} GB/s  {:>5.1f}% of copy  {}\n", r.kernel, r.shape,
                   r.timing.median_us, r.gbps, r.pct_copy, r.verify_ok ? "verified" : "VERIFY FAIL: " + r.verify_note);
      } else {
        fmt::print("  {:<22} {:>12}  error: {}\n", r.kernel, r.shape, r.error);
      }
      std::fflush(stdout);
      results.push_back(std::move(r));
    }
    in.x.clear();
    cuda_empty_cache(0);
  }
  return results;
}

}  // namespace fp8kit::bench
