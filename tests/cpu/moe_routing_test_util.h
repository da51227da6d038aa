// Helpers of the routing tests (test_moe_routing*.cpp): the ids and weights of a TopkResult as
// plain vectors, and the hidden states routing ignores but checks the row count of.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8kit/tensor.h"

namespace fp8kit::routing_test {

inline std::vector<int64_t> ids_of(const Tensor& ids) {
  std::vector<int64_t> v(size_t(ids.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = ids.dtype() == DType::kI64 ? ids.data<int64_t>()[i] : ids.data<int32_t>()[i];
  }
  return v;
}

inline std::vector<float> weights_of(const Tensor& w) {
  const float* p = w.data<float>();
  return std::vector<float>(p, p + w.numel());
}

inline Tensor hidden(int64_t m) { return Tensor::zeros({m, 4}, DType::kF32); }

}  // namespace fp8kit::routing_test
