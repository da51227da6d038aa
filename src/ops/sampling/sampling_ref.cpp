// CPU reference of sample (sampling_ref.h): per row the raw logits in f32, the greedy or
// processed draw (temperature, min-p, top-k, top-p, exponential race), then the raw logprobs.
#include "ops/sampling/sampling_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/parallel.h"
#include "fp8kit/half.h"
#include "ops/sampling/sampling_rng.h"

namespace fp8kit::ops {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// p = softmax(z): e_v = expf(z_v - max z), sum in double (id order) rounded to f32, p_v = e_v / sum.
void softmax(const float* z, int64_t vocab, float* p) {
  float m = kNegInf;
  for (int64_t v = 0; v < vocab; ++v) m = std::max(m, z[v]);
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    p[v] = std::exp(z[v] - m);
    sum += p[v];
  }
  const float s = float(sum);
  for (int64_t v = 0; v < vocab; ++v) p[v] /= s;
}

// Temperature, min-p, top-k, top-p on z (which holds x), in vLLM's order; leaves the draw's
// probabilities in p. ids: vocab int32 of scratch.
void processed_probs(float* z, int64_t vocab, const SamplingParams& sp, float* p, int32_t* ids) {
  for (int64_t v = 0; v < vocab; ++v) z[v] /= sp.temperature;
  if (sp.min_p > 0.0f) {
    softmax(z, vocab, p);
    const float threshold = *std::max_element(p, p + vocab) * sp.min_p;
    for (int64_t v = 0; v < vocab; ++v) {
      if (p[v] < threshold) z[v] = kNegInf;
    }
  }
  if (sp.top_k > 0 && sp.top_k < vocab) {
    std::copy(z, z + vocab, p);
    std::nth_element(p, p + (vocab - sp.top_k), p + vocab);  // ascending: the k-th largest lands at vocab - k
    const float kth = p[vocab - sp.top_k];
    for (int64_t v = 0; v < vocab; ++v) {
      if (z[v] < kth) z[v] = kNegInf;
    }
  }
  if (sp.top_p < 1.0f) {
    softmax(z, vocab, p);
    std::iota(ids, ids + vocab, 0);
    std::sort(ids, ids + vocab, [&](int32_t a, int32_t b) { return z[a] != z[b] ? z[a] < z[b] : a > b; });
    const float limit = 1.0f - sp.top_p;
    double cumulative = 0.0;                   // torch's CPU cumsum accumulates float in double
    for (int64_t i = 0; i + 1 < vocab; ++i) {  // the last (largest) id always stays
      cumulative += p[ids[i]];
      if (float(cumulative) <= limit) z[ids[i]] = kNegInf;
    }
  }
  softmax(z, vocab, p);
}

// The exponential race: argmax_v p_v / q_v with q_v = -ln(u(seed, step, v)), ties to the lowest id.
int64_t race(const float* p, int64_t vocab, const SamplingParams& sp) {
  int64_t best = 0;
  double best_score = -1.0;
  for (int64_t v = 0; v < vocab; ++v) {
    if (!(p[v] > 0.0f)) continue;
    const double q = -std::log(sampling_uniform(sp.seed, sp.step, uint64_t(v)));
    const double score = double(p[v]) / q;
    if (score > best_score) best = v, best_score = score;
  }
  return best;
}

template <typename T>
void run(const SamplingArgs& a) {
  const int64_t V = a.vocab;
  parallel_for(a.num_parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t part = p0; part < p1; ++part) {
      float* x = a.scratch + part * 2 * V;  // x (f32 logits), then z; then the logprobs
      float* p = x + V;
      int32_t* ids = a.scratch_ids + part * V;
      for (int64_t r = part; r < a.num_seqs; r += a.num_parts) {
        const T* row = static_cast<const T*>(a.logits) + r * a.row_stride;
        const SamplingParams& sp = a.params[r];
        for (int64_t v = 0; v < V; ++v) x[v] = to_float(row[v]);
        int64_t token = 0;
        if (sp.temperature < kSamplingEps) {
          for (int64_t v = 1; v < V; ++v) token = x[v] > x[token] ? v : token;  // ties: the lowest id
        } else {
          processed_probs(x, V, sp, p, ids);
          token = race(p, V, sp);
          for (int64_t v = 0; v < V; ++v) x[v] = to_float(row[v]);
        }
        // Raw logprobs: x - logsumexp(x) in double, rounded once.
        double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
        for (int64_t v = 0; v < V; ++v) m = std::max(m, double(x[v]));
        for (int64_t v = 0; v < V; ++v) sum += std::exp(double(x[v]) - m);
        const double lse = m + std::log(sum);
        for (int64_t v = 0; v < V; ++v) x[v] = float(double(x[v]) - lse);
        a.token_ids[r] = token;
        a.logprobs[r] = x[token];
        a.ranks[r] = std::count_if(x, x + V, [&](float lp) { return lp >= x[token]; });
        if (a.num_logprobs > 0) {
          std::iota(ids, ids + V, 0);
          std::partial_sort(ids, ids + a.num_logprobs, ids + V,
                            [&](int32_t i, int32_t j) { return x[i] != x[j] ? x[i] > x[j] : i < j; });
          for (int64_t n = 0; n < a.num_logprobs; ++n) {
            a.top_ids[r * a.num_logprobs + n] = ids[n];
            a.top_logprobs[r * a.num_logprobs + n] = x[ids[n]];
          }
        }
      }
    }
  });
}

}  // namespace

void sample_ref(const SamplingArgs& args) {
  if (args.num_seqs == 0) return;
  switch (args.dtype) {
    case DType::kBF16: return run<BFloat16>(args);
    case DType::kF16: return run<Float16>(args);
    default: return run<float>(args);
  }
}

std::vector<float> sampling_probs_ref(const std::vector<float>& x, const SamplingParams& sp) {
  const int64_t vocab = int64_t(x.size());
  std::vector<float> z = x, p(x.size());
  std::vector<int32_t> ids(x.size());
  processed_probs(z.data(), vocab, sp, p.data(), ids.data());
  return p;
}

}  // namespace fp8kit::ops
