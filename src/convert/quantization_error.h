// How far an FP8 checkpoint is from the 16-bit checkpoint it was made from: for every FP8 weight,
// the relative Frobenius error of the dequantized weight, ||W - W_q|| / ||W||, and of its
// product with random activations, ||W X - W_q X|| / ||W X|| (X: K x 8, fixed seed), and the
// worst row's own relative error (the Frobenius norm hides rows of small magnitude, which is
// where coarse per-tensor scales lose precision), all in double.
#pragma once

#include <string>
#include <vector>

namespace fp8kit::convert {

struct WeightError {
  std::string name;
  double weight_rel_error = 0.0;
  double product_rel_error = 0.0;
  double worst_row_rel_error = 0.0;
};

std::vector<WeightError> measure_quantization_error(const std::string& reference_dir, const std::string& fp8_dir);

}  // namespace fp8kit::convert
