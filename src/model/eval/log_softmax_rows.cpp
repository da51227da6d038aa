// log_softmax_row and Accumulator (log_softmax_rows.h): eval's statistics in double on the host
// (llama.cpp's perplexity tool computes the same quantities from the same logits).
#include "model/eval/log_softmax_rows.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "fp8kit/half.h"

namespace fp8kit::eval {
namespace {

double value(const Tensor& t, const uint8_t* row, int64_t i) {
  switch (t.dtype()) {
    case DType::kBF16: return bf16_to_float(reinterpret_cast<const BFloat16*>(row)[i]);
    case DType::kF16: return f16_to_float(reinterpret_cast<const Float16*>(row)[i]);
    default: return reinterpret_cast<const float*>(row)[i];
  }
}

// numpy.percentile's default (linear between the two nearest ranks) of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double pos = q * double(sorted.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

void log_softmax_row(const Tensor& logits, int64_t row, std::vector<double>& out, const std::string& where) {
  FP8KIT_CHECK(logits.dim() == 2 && logits.stride(1) == 1 && logits.device().is_cpu(), ErrorCode::kInternal,
               "eval: logits must be a CPU [rows, vocab] tensor, got {}", logits.description());
  const int64_t vocab = logits.size(1);
  const auto* base = static_cast<const uint8_t*>(logits.data_ptr()) + row * logits.stride(0) * int64_t(logits.element_size());
  out.resize(size_t(vocab));
  double m = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v) {
    const double x = value(logits, base, v);
    FP8KIT_CHECK_ARG(std::isfinite(x), "eval: {}: logit of token {} is {}", where, v, x);
    out[size_t(v)] = x;
    m = std::max(m, x);
  }
  double sum = 0;
  for (double x : out) sum += std::exp(x - m);
  const double lse = m + std::log(sum);
  for (double& x : out) x -= lse;
}

void Accumulator::add_nll(double nll, double base_nll) {
  ++count_;
  nll_ += nll;
  if (base_nll >= 0) base_nll_ += base_nll;
}

void Accumulator::add_distribution(const std::vector<double>& base_logp, const std::vector<double>& model_logp,
                                   int32_t target) {
  double kl = 0;
  size_t base_best = 0, model_best = 0;
  for (size_t v = 0; v < base_logp.size(); ++v) {
    kl += std::exp(base_logp[v]) * (base_logp[v] - model_logp[v]);
    if (base_logp[v] > base_logp[base_best]) base_best = v;
    if (model_logp[v] > model_logp[model_best]) model_best = v;
  }
  kld_.push_back(std::max(kl, 0.0));  // a sum of rounded terms can dip below zero by an ulp
  agree_ += base_best == model_best ? 1 : 0;
  const double dp = std::exp(model_logp[size_t(target)]) - std::exp(base_logp[size_t(target)]);
  sum_dp2_ += dp * dp;
}

double Accumulator::ppl() const { return count_ > 0 ? std::exp(nll_ / double(count_)) : 0.0; }
double Accumulator::base_ppl() const { return count_ > 0 ? std::exp(base_nll_ / double(count_)) : 0.0; }

DistributionStats Accumulator::distribution() const {
  DistributionStats s;
  const size_t n = kld_.size();
  if (n == 0) return s;
  std::vector<double> sorted = kld_;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0, sum2 = 0;
  for (double k : sorted) {
    sum += k;
    sum2 += k * k;
  }
  s.kld_mean = sum / double(n);
  const double var = n > 1 ? std::max(sum2 / double(n) - s.kld_mean * s.kld_mean, 0.0) * double(n) / double(n - 1) : 0.0;
  s.kld_stderr = std::sqrt(var / double(n));
  s.kld_median = percentile(sorted, 0.5);
  s.kld_p99 = percentile(sorted, 0.99);
  s.kld_max = sorted.back();
  s.top1_agreement = double(agree_) / double(n);
  s.delta_p_rms = std::sqrt(sum_dp2_ / double(n));
  return s;
}

}  // namespace fp8kit::eval
