// Host-side statistics of eval (include/fp8kit/model/eval.h): one logits row as log-probabilities
// in double, and the accumulators of perplexity and of the MODEL-against-BASE distribution
// statistics. Tested by tests/cpu/test_eval.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8kit/model/eval.h"
#include "fp8kit/tensor.h"

namespace fp8kit::eval {

// log_softmax of row `row` of logits [rows, vocab] (f32, f16 or bf16), in double; Error naming
// `where` when the row holds a NaN or an infinity.
void log_softmax_row(const Tensor& logits, int64_t row, std::vector<double>& out, const std::string& where);

class Accumulator {
 public:
  void add_nll(double nll, double base_nll);  // base_nll < 0: no base
  // One position: KL(base || model), argmax agreement and the correct token's probability change.
  void add_distribution(const std::vector<double>& base_logp, const std::vector<double>& model_logp, int32_t target);
  int64_t count() const { return count_; }
  double ppl() const;
  double base_ppl() const;
  DistributionStats distribution() const;  // sorts the KL values it keeps

 private:
  int64_t count_ = 0;
  double nll_ = 0, base_nll_ = 0;
  std::vector<double> kld_;
  double sum_dp2_ = 0;
  int64_t agree_ = 0;
};

}  // namespace fp8kit::eval
