// Helpers of the fused_experts tests: MoE problems (integer-grid or random), and an oracle that
// recomputes the spec's pipeline (SEMANTICS.md 1.10) with plain loops, independently of the
// library's reference: quantization by the formulas of quant.h, GEMM sums in double, and either
// the spec's f32 / 16-bit roundings (Rounding::kSpec) or none but the FP8 quantization itself
// (Rounding::kFp64).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "fp8kit/fp8.h"
#include "fp8kit/half.h"
#include "fp8kit/ops/moe_experts.h"
#include "test_context.h"

namespace fp8kit::moe_test {

enum class Quant { kNone, kFp8, kWeightOnly };
enum class Rounding { kSpec, kFp64 };

// A problem with global expert ids; weights as real values: for FP8 the decoded code values
// (w_real = value * scale), otherwise the values themselves.
struct Problem {
  int64_t m = 0, h = 0, inter = 0, e = 0, top_k = 0;
  DType dtype = DType::kBF16;
  std::vector<float> x;           // [m, h], representable in dtype
  std::vector<float> w1, w2;      // [e, 2I, h], [e, h, I]
  std::vector<float> w1_scale, w2_scale;  // FP8: per-tensor [e] or block [e, nb, kb]
  std::optional<std::pair<int64_t, int64_t>> block;
  std::vector<int32_t> ids;       // [m, top_k]
  std::vector<float> weights;     // [m, top_k]
};

struct OracleOptions {
  Quant quant = Quant::kFp8;
  std::optional<float> a1_scale, a2_scale;
  bool gelu = false;
  bool apply_router_weight_on_input = false;
  int64_t chunk_size = 1 << 30;
  Rounding rounding = Rounding::kSpec;
};

inline double round_to(double v, DType dtype) {
  switch (dtype) {
    case DType::kBF16: return bf16_to_float(float_to_bf16(float(v)));
    case DType::kF16: return f16_to_float(float_to_f16(float(v)));
    default: return float(v);
  }
}

// FP8 quantization of rows [rows, k] (values v) as quant.h states it; returns decoded values and
// the scales ([1] per-tensor, [rows, k / g] per group).
struct Quantized {
  std::vector<double> q;
  std::vector<float> scale;
};
// group > 0: 1 x group groups (dynamic); 0: per-tensor, static_scale or dynamic.
inline Quantized quantize(const std::vector<double>& v, int64_t rows, int64_t k, int64_t group,
                          std::optional<float> static_scale) {
  auto cvt = [](float r) { return double(e4m3fn_bits_to_float(float_to_e4m3fn_bits(std::fmax(-448.0f, std::fmin(r, 448.0f))))); };
  Quantized out;
  out.q.resize(v.size());
  if (group > 0) {
    const int64_t g = group;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < k / g; ++j) {
        float amax = 0;
        for (int64_t c = j * g; c < (j + 1) * g; ++c) amax = std::fmax(amax, std::fabs(float(v[size_t(r * k + c)])));
        const float s = std::fmax(amax, 1e-10f) / 448.0f;
        out.scale.push_back(s);
        for (int64_t c = j * g; c < (j + 1) * g; ++c) out.q[size_t(r * k + c)] = cvt(float(v[size_t(r * k + c)]) / s);
      }
    }
    return out;
  }
  float s;
  if (static_scale) {
    s = *static_scale;
  } else {
    float amax = 0;
    for (double d : v) amax = std::fmax(amax, std::fabs(float(d)));
    s = amax / 448.0f;
  }
  out.scale = {s};
  const float inv = 1.0f / s;
  for (size_t i = 0; i < v.size(); ++i) out.q[i] = cvt(float(v[i]) * inv);
  return out;
}

inline double silu(double x, Rounding r) {
  if (r == Rounding::kSpec) return double(float(x) / (1.0f + std::exp(-float(x))));
  return x / (1.0 + std::exp(-x));
}
inline double gelu(double x, Rounding r) {
  if (r == Rounding::kSpec) return double(float(x) * 0.5f * (1.0f + std::erf(float(x) * float(M_SQRT1_2))));
  return x * 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
}

// One grouped GEMM: out[s, n] for every slot s of the chunk (A row s / per_row).
inline std::vector<double> oracle_gemm(const Problem& p, const OracleOptions& o, const std::vector<double>& a,
                                       const Quantized* aq, const std::vector<float>& w, const std::vector<float>& ws,
                                       int64_t n, int64_t k, int64_t slot0, int64_t slots, int64_t per_row,
                                       bool mul_weight) {
  const bool spec = o.rounding == Rounding::kSpec;
  const bool fp8 = o.quant == Quant::kFp8;
  const int64_t bn = p.block ? p.block->first : 0, bk = p.block ? p.block->second : k;
  const int64_t nb = p.block ? (n + bn - 1) / bn : 1, kb = p.block ? (k + bk - 1) / bk : 1;
  std::vector<double> out(size_t(slots * n));
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t e = p.ids[size_t(slot0 + s)], row = s / per_row;
    const double rw = p.weights[size_t(slot0 + s)];
    for (int64_t j = 0; j < n; ++j) {
      auto wv = [&](int64_t c) {  // the weight as the GEMM sees it
        const double v = w[size_t((e * n + j) * k + c)];
        if (o.quant != Quant::kWeightOnly) return v;
        const double sc = p.block ? ws[size_t((e * nb + j / bn) * kb + c / bk)] : ws[size_t(e)];
        return spec ? double(float(v) * float(sc)) : v * sc;
      };
      double acc = 0;
      if (fp8 && p.block) {
        float acc_f = 0;
        for (int64_t b = 0; b < kb; ++b) {
          double partial = 0;
          for (int64_t c = b * bk; c < std::min(k, (b + 1) * bk); ++c) partial += aq->q[size_t(row * k + c)] * wv(c);
          const float as = aq->scale[size_t(row * kb + b)], bs = ws[size_t((e * nb + j / bn) * kb + b)];
          acc_f = std::fma(float(partial) * as, bs, acc_f);  // Triton's order, FP contraction on
          acc += partial * as * bs;
        }
        if (spec) acc = acc_f;
        if (mul_weight) acc = spec ? double(float(acc) * float(rw)) : acc * rw;
      } else {
        for (int64_t c = 0; c < k; ++c) acc += (fp8 ? aq->q[size_t(row * k + c)] : a[size_t(row * k + c)]) * wv(c);
        if (spec) acc = float(acc);
        if (mul_weight) acc = spec ? double(float(acc) * float(rw)) : acc * rw;
        if (fp8) {
          acc = spec ? double(float(acc) * aq->scale[0] * ws[size_t(e)]) : acc * aq->scale[0] * ws[size_t(e)];
        }
      }
      out[size_t(s * n + j)] = spec ? round_to(acc, p.dtype) : acc;
    }
  }
  return out;
}

// The whole pipeline; returns [m, h].
inline std::vector<double> oracle(const Problem& p, const OracleOptions& o) {
  const bool spec = o.rounding == Rounding::kSpec;
  const int64_t group = p.block ? p.block->second : 0;
  std::vector<double> y(size_t(p.m * p.h));
  for (int64_t t0 = 0; t0 < p.m; t0 += o.chunk_size) {
    const int64_t m = std::min(o.chunk_size, p.m - t0), slots = m * p.top_k;
    std::vector<double> a(p.x.begin() + t0 * p.h, p.x.begin() + (t0 + m) * p.h);
    Quantized aq;
    if (o.quant == Quant::kFp8) aq = quantize(a, m, p.h, group, o.a1_scale);
    const std::vector<double> c1 = oracle_gemm(p, o, a, &aq, p.w1, p.w1_scale, 2 * p.inter, p.h, t0 * p.top_k, slots,
                                               p.top_k, o.apply_router_weight_on_input);
    std::vector<double> c2(size_t(slots * p.inter));
    for (int64_t s = 0; s < slots; ++s) {
      for (int64_t i = 0; i < p.inter; ++i) {
        const double g = c1[size_t(s * 2 * p.inter + i)], u = c1[size_t(s * 2 * p.inter + p.inter + i)];
        double act = o.gelu ? gelu(g, o.rounding) : silu(g, o.rounding);
        if (spec) act = round_to(act, p.dtype);
        c2[size_t(s * p.inter + i)] = spec ? round_to(act * u, p.dtype) : act * u;
      }
    }
    Quantized cq;
    if (o.quant == Quant::kFp8) cq = quantize(c2, slots, p.inter, group, o.a2_scale);
    const std::vector<double> c3 = oracle_gemm(p, o, c2, &cq, p.w2, p.w2_scale, p.h, p.inter, t0 * p.top_k, slots, 1,
                                               !o.apply_router_weight_on_input);
    const bool per_add = o.quant != Quant::kWeightOnly && p.top_k >= 2 && p.top_k <= 4;
    for (int64_t t = 0; t < m; ++t) {
      for (int64_t c = 0; c < p.h; ++c) {
        double acc = 0;
        float acc_f = 0;
        for (int64_t k = 0; k < p.top_k; ++k) {
          const double v = c3[size_t((t * p.top_k + k) * p.h + c)];
          acc += v;
          acc_f = per_add ? float(round_to(acc_f + float(v), p.dtype)) : acc_f + float(v);
        }
        y[size_t((t0 + t) * p.h + c)] = spec ? round_to(acc_f, p.dtype) : acc;
      }
    }
  }
  return y;
}

// ---- building the library's inputs ------------------------------------------------------------

inline Tensor float_tensor(const std::vector<float>& v, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dtype) {
      case DType::kBF16: t.data<BFloat16>()[i] = float_to_bf16(v[i]); break;
      case DType::kF16: t.data<Float16>()[i] = float_to_f16(v[i]); break;
      default: t.data<float>()[i] = v[i]; break;
    }
  }
  return t;
}

inline Tensor fp8_tensor(const std::vector<float>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kE4M3FN);
  for (size_t i = 0; i < v.size(); ++i) static_cast<uint8_t*>(t.data_ptr())[i] = float_to_e4m3fn_bits(v[i]);
  return t;
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DType::kBF16: out[size_t(i)] = bf16_to_float(t.data<BFloat16>()[i]); break;
      case DType::kF16: out[size_t(i)] = f16_to_float(t.data<Float16>()[i]); break;
      default: out[size_t(i)] = t.data<float>()[i]; break;
    }
  }
  return out;
}

struct Inputs {
  Tensor x, w1, w2, weights, ids;
  ops::FusedExpertsOptions options;
};

// The library's view of problem p (FP8 weights as e4m3 codes, or dtype weights).
inline Inputs inputs(const Problem& p, const OracleOptions& o) {
  Inputs in;
  in.x = float_tensor(p.x, {p.m, p.h}, p.dtype);
  const Shape s1{p.e, 2 * p.inter, p.h}, s2{p.e, p.h, p.inter};
  if (o.quant == Quant::kNone) {
    in.w1 = float_tensor(p.w1, s1, p.dtype);
    in.w2 = float_tensor(p.w2, s2, p.dtype);
  } else {
    in.w1 = fp8_tensor(p.w1, s1);
    in.w2 = fp8_tensor(p.w2, s2);
    const int64_t bn = p.block ? p.block->first : 1, bk = p.block ? p.block->second : 1;
    auto scale_shape = [&](int64_t n, int64_t k) {
      return p.block ? Shape{p.e, (n + bn - 1) / bn, (k + bk - 1) / bk} : Shape{p.e};
    };
    in.options.w1_scale = Tensor::from_vector(p.w1_scale, scale_shape(2 * p.inter, p.h));
    in.options.w2_scale = Tensor::from_vector(p.w2_scale, scale_shape(p.h, p.inter));
    in.options.block_shape = p.block;
  }
  in.options.use_fp8_w8a8 = o.quant == Quant::kFp8;
  in.options.weight_only = o.quant == Quant::kWeightOnly;
  if (o.a1_scale) in.options.a1_scale = Tensor::scalar_f32(*o.a1_scale);
  if (o.a2_scale) in.options.a2_scale = Tensor::scalar_f32(*o.a2_scale);
  in.options.activation = o.gelu ? "gelu" : "silu";
  in.options.apply_router_weight_on_input = o.apply_router_weight_on_input;
  in.options.chunk_size = std::min<int64_t>(o.chunk_size, 1 << 30);
  in.weights = Tensor::from_vector(p.weights, {p.m, p.top_k});
  in.ids = Tensor::from_vector(p.ids, {p.m, p.top_k});
  return in;
}

inline Tensor run(const Inputs& in, const ForwardContext& ctx = cpu_ctx()) {
  return ops::fused_experts(ctx, in.x, in.w1, in.w2, in.weights, in.ids, in.options);
}

// ---- problems ---------------------------------------------------------------------------------

// Distinct experts per token, drawn from the first `used` experts (the rest receive no token).
inline void route_randomly(Problem& p, std::mt19937& rng, int64_t used, const std::vector<float>& weight_values) {
  p.ids.clear();
  p.weights.clear();
  std::vector<int32_t> perm(static_cast<size_t>(used));
  for (int64_t t = 0; t < p.m; ++t) {
    for (int64_t i = 0; i < used; ++i) perm[size_t(i)] = int32_t(i);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t k = 0; k < p.top_k; ++k) {
      p.ids.push_back(perm[size_t(k)]);
      p.weights.push_back(weight_values[rng() % weight_values.size()]);
    }
  }
}

inline std::vector<float> pow2_scales(size_t n, std::mt19937& rng) {
  const float choices[] = {0.25f, 0.5f, 1.0f, 2.0f};
  std::vector<float> s(n);
  for (float& v : s) v = choices[rng() % 4];
  return s;
}

// Integer-grid problem (see test_fused_experts_exact.cpp for why every sum is exact in f32):
// x in {1, 2}; each gate row of w1 has one sign and magnitudes {1, 2}, so |gate| >= h and the
// activation is the identity or zero; up rows and w2 in {-2..2}; power-of-two weight scales and
// routed weights.
inline Problem grid_problem(int64_t m, int64_t h, int64_t inter, int64_t e, int64_t top_k, uint32_t seed,
                            std::optional<std::pair<int64_t, int64_t>> block = std::nullopt, DType dtype = DType::kBF16,
                            int64_t used_experts = -1) {
  std::mt19937 rng(seed);
  Problem p;
  p.m = m, p.h = h, p.inter = inter, p.e = e, p.top_k = top_k, p.dtype = dtype, p.block = block;
  p.x.resize(size_t(m * h));
  for (float& v : p.x) v = float(1 + rng() % 2);
  p.w1.resize(size_t(e * 2 * inter * h));
  for (int64_t r = 0; r < e * 2 * inter; ++r) {
    const bool gate = (r % (2 * inter)) < inter;
    const float sign = (rng() % 2) ? 1.0f : -1.0f;
    for (int64_t c = 0; c < h; ++c) {
      p.w1[size_t(r * h + c)] = gate ? sign * float(1 + rng() % 2) : float(int(rng() % 5) - 2);
    }
  }
  p.w2.resize(size_t(e * h * inter));
  for (float& v : p.w2) v = float(int(rng() % 5) - 2);
  const int64_t bn = block ? block->first : 1, bk = block ? block->second : 1;
  p.w1_scale = pow2_scales(block ? size_t(e * ((2 * inter + bn - 1) / bn) * ((h + bk - 1) / bk)) : size_t(e), rng);
  p.w2_scale = pow2_scales(block ? size_t(e * ((h + bn - 1) / bn) * ((inter + bk - 1) / bk)) : size_t(e), rng);
  route_randomly(p, rng, used_experts < 0 ? e : used_experts, {0.25f, 0.5f, 1.0f});
  return p;
}

// Random problem: x ~ N(0, 1); real weights ~ N(0, 1/sqrt(fan_in)) kept in w1_real / w2_real and
// quantized to e4m3 with per-expert (or per-block) amax scales; routed weights softmax-like.
struct RandomProblem {
  Problem p;
  std::vector<float> w1_real, w2_real;
};

inline void quantize_weights(const std::vector<float>& real, int64_t e, int64_t n, int64_t k,
                             std::optional<std::pair<int64_t, int64_t>> block, std::vector<float>& codes,
                             std::vector<float>& scales) {
  const int64_t bn = block ? block->first : n, bk = block ? block->second : k;
  const int64_t nb = (n + bn - 1) / bn, kb = (k + bk - 1) / bk;
  codes.assign(real.size(), 0.0f);
  scales.assign(size_t(e * nb * kb), 0.0f);
  for (int64_t x = 0; x < e; ++x) {
    for (int64_t i = 0; i < nb; ++i) {
      for (int64_t j = 0; j < kb; ++j) {
        float amax = 0;
        for (int64_t r = i * bn; r < std::min(n, (i + 1) * bn); ++r) {
          for (int64_t c = j * bk; c < std::min(k, (j + 1) * bk); ++c) amax = std::fmax(amax, std::fabs(real[size_t((x * n + r) * k + c)]));
        }
        const float s = std::fmax(amax / 448.0f, 1e-12f);
        scales[size_t((x * nb + i) * kb + j)] = s;
        for (int64_t r = i * bn; r < std::min(n, (i + 1) * bn); ++r) {
          for (int64_t c = j * bk; c < std::min(k, (j + 1) * bk); ++c) {
            const size_t idx = size_t((x * n + r) * k + c);
            codes[idx] = e4m3fn_bits_to_float(float_to_e4m3fn_bits(real[idx] / s));
          }
        }
      }
    }
  }
}

inline RandomProblem random_problem(int64_t m, int64_t h, int64_t inter, int64_t e, int64_t top_k, uint32_t seed,
                                    std::optional<std::pair<int64_t, int64_t>> block = std::nullopt,
                                    DType dtype = DType::kBF16) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  RandomProblem r;
  Problem& p = r.p;
  p.m = m, p.h = h, p.inter = inter, p.e = e, p.top_k = top_k, p.dtype = dtype, p.block = block;
  p.x.resize(size_t(m * h));
  for (float& v : p.x) v = float(round_to(nd(rng), dtype));
  r.w1_real.resize(size_t(e * 2 * inter * h));
  for (float& v : r.w1_real) v = float(round_to(nd(rng) / std::sqrt(float(h)), dtype));
  r.w2_real.resize(size_t(e * h * inter));
  for (float& v : r.w2_real) v = float(round_to(nd(rng) / std::sqrt(float(inter)), dtype));
  quantize_weights(r.w1_real, e, 2 * inter, h, block, p.w1, p.w1_scale);
  quantize_weights(r.w2_real, e, h, inter, block, p.w2, p.w2_scale);
  route_randomly(p, rng, e, {1.0f});
  std::uniform_real_distribution<float> ud(0.05f, 1.0f);
  for (float& w : p.weights) w = ud(rng);
  return r;
}

// max |y - ref| / max |ref|; NaN in y gives NaN (so `err <= tol` fails).
inline double max_error_vs_peak(const std::vector<double>& y, const std::vector<double>& ref) {
  double peak = 0, worst = 0;
  for (double v : ref) peak = std::max(peak, std::abs(v));
  for (size_t i = 0; i < y.size(); ++i) {
    const double e = std::abs(y[i] - ref[i]);
    if (std::isnan(e)) return e;
    worst = std::max(worst, e);
  }
  return worst / peak;
}

// ||y - ref|| / ||ref|| (relative L2 error); NaN-propagating.
inline double rel_l2_error(const std::vector<double>& y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

// mean |y - ref| / mean |ref|: the metric of vLLM's MoE tests (spec 2.8); NaN-propagating.
inline double mean_rel_error(const std::vector<double>& y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    num += std::abs(y[i] - ref[i]);
    den += std::abs(ref[i]);
  }
  return num / den;
}

// Number of positions where y and ref differ, without failing.
inline int64_t count_differences(const std::vector<double>& y, const std::vector<double>& ref) {
  int64_t count = 0;
  for (size_t i = 0; i < y.size(); ++i) count += y[i] == ref[i] ? 0 : 1;
  return count;
}

// Number of positions where y and ref differ (exact comparison), with the first one reported.
inline int64_t mismatches(const std::vector<double>& y, const std::vector<double>& ref, const char* what) {
  int64_t count = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!(y[i] == ref[i])) {
      if (count == 0) ADD_FAILURE() << what << ": first mismatch at " << i << ": " << y[i] << " vs " << ref[i];
      ++count;
    }
  }
  return count;
}

}  // namespace fp8kit::moe_test
