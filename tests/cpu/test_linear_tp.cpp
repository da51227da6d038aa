// Tensor-parallel slices against TP = 1 with the same checkpoint tensors: the column-parallel
// outputs of every rank, put side by side per logical shard, are the TP = 1 output bit for bit
// (QKV with kv-head replication, merged gate/up; unquantized, per-tensor static and dynamic,
// block); the row-parallel partial outputs summed over ranks are the TP = 1 output, exactly for
// integer data and within f32 rounding for FP8, with the bias added by rank 0 only.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/ops/quant.h"
#include "test_context.h"
#include "test_linear_util.h"

namespace fp8kit {
namespace {

using linear_test::random_16bit;
using linear_test::read16;
using linear_test::same_bits;

using linear_test::kK;
using linear_test::kQ;
using linear_test::kV;

LinearOptions options(const Fp8Config* config, int rank, int size, DType dtype = DType::kBF16, bool bias = true) {
  LinearOptions o;
  o.quant_config = config;
  o.parallel = {rank, size};
  o.params_dtype = dtype;
  o.bias = bias;
  return o;
}

// A checkpoint of q/k/v (4 query heads, 2 kv heads of 32, hidden 64) in the scheme of `config`.
struct QkvCheckpoint {
  std::vector<Tensor> weights, weight_scales;
  Tensor bias;
  QkvCheckpoint(const Fp8Config* config, std::mt19937& rng) {
    for (int64_t rows : {128, 64, 64}) {
      const Tensor w = random_16bit({rows, 64}, DType::kBF16, rng, 0.05f);
      if (config == nullptr || !config->is_checkpoint_fp8_serialized) {
        weights.push_back(w);
      } else if (config->weight_block_size) {
        const ops::QuantResult q = ops::quantize_weight_block(cpu_ctx(), w, 32, 32);
        weights.push_back(q.q);
        weight_scales.push_back(q.scale);
      } else {
        const ops::QuantResult q = ops::quantize_weight_per_tensor(cpu_ctx(), w);
        weights.push_back(q.q);
        weight_scales.push_back(q.scale);
      }
    }
    bias = random_16bit({256}, DType::kBF16, rng, 0.1f);
  }
  void load(LinearBase& l, const Fp8Config* config) const {
    const ShardId ids[] = {kQ, kK, kV};
    const int64_t offsets[] = {0, 128, 192};
    for (int s = 0; s < 3; ++s) {
      l.load_weight("weight", weights[size_t(s)], ids[s]);
      l.load_weight("bias", bias.narrow(0, offsets[s], weights[size_t(s)].size(0)), ids[s]);
      if (!weight_scales.empty()) {
        l.load_weight(config->weight_block_size ? "weight_scale_inv" : "weight_scale", weight_scales[size_t(s)], ids[s]);
      }
      if (l.find_parameter("input_scale") != nullptr) {
        l.load_weight("input_scale", Tensor::scalar_f32(0.01f * float(s + 2)), ids[s]);
      }
    }
  }
};

// Columns [c0, c0 + n) of a 2-D output.
Tensor columns(const Tensor& y, int64_t c0, int64_t n) { return y.narrow(1, c0, n); }

void expect_qkv_ranks_match_tp1(const Fp8Config* config) {
  std::mt19937 rng(31);
  const QkvCheckpoint ck(config, rng);
  const Tensor x = random_16bit({5, 64}, DType::kBF16, rng);
  QKVParallelLinear whole("qkv_proj", 64, 32, 4, 2, options(config, 0, 1));
  ck.load(whole, config);
  whole.process_weights_after_loading(cpu_ctx());
  const Tensor y1 = whole.forward(cpu_ctx(), x);
  for (int size : {2, 4}) {
    for (int rank = 0; rank < size; ++rank) {
      SCOPED_TRACE(::testing::Message() << "tp " << size << " rank " << rank);
      QKVParallelLinear l("qkv_proj", 64, 32, 4, 2, options(config, rank, size));
      ck.load(l, config);
      l.process_weights_after_loading(cpu_ctx());
      const Tensor y = l.forward(cpu_ctx(), x);
      const int64_t q = 128 / size, kv = 32, kv_rank = rank / l.num_kv_head_replicas();
      EXPECT_TRUE(same_bits(columns(y, 0, q), columns(y1, rank * q, q)));
      EXPECT_TRUE(same_bits(columns(y, q, kv), columns(y1, 128 + kv_rank * kv, kv)));
      EXPECT_TRUE(same_bits(columns(y, q + kv, kv), columns(y1, 192 + kv_rank * kv, kv)));
    }
  }
}

TEST(LinearTp, QkvColumnsUnquantized) { expect_qkv_ranks_match_tp1(nullptr); }

TEST(LinearTp, QkvColumnsPerTensorStatic) {
  const Fp8Config config(true, "static");
  expect_qkv_ranks_match_tp1(&config);
}

TEST(LinearTp, QkvColumnsPerTensorDynamic) {
  const Fp8Config config(true, "dynamic");
  expect_qkv_ranks_match_tp1(&config);
}

TEST(LinearTp, QkvColumnsBlock) {
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{32, 32});
  expect_qkv_ranks_match_tp1(&config);
}

TEST(LinearTp, MergedColumnsUnquantized) {
  // (Online FP8 quantization takes its scale from each rank's own slice, so there the slices
  // match TP = 1 only within FP8 error.)
  std::mt19937 rng(32);
  const Tensor gate = random_16bit({96, 48}, DType::kBF16, rng), up = random_16bit({96, 48}, DType::kBF16, rng);
  const Tensor x = random_16bit({3, 48}, DType::kBF16, rng);
  MergedColumnParallelLinear whole("gate_up_proj", 48, {96, 96}, options(nullptr, 0, 1, DType::kBF16, false));
  whole.load_weight("weight", gate, ShardId{int64_t(0)});
  whole.load_weight("weight", up, ShardId{int64_t(1)});
  whole.process_weights_after_loading(cpu_ctx());
  const Tensor y1 = whole.forward(cpu_ctx(), x);
  for (int size : {2, 4}) {
    for (int rank = 0; rank < size; ++rank) {
      MergedColumnParallelLinear l("gate_up_proj", 48, {96, 96}, options(nullptr, rank, size, DType::kBF16, false));
      l.load_weight("weight", up, ShardId{int64_t(1)});
      l.load_weight("weight", gate, ShardId{int64_t(0)});
      l.process_weights_after_loading(cpu_ctx());
      const Tensor y = l.forward(cpu_ctx(), x);
      const int64_t n = 96 / size;
      EXPECT_TRUE(same_bits(columns(y, 0, n), columns(y1, rank * n, n)));
      EXPECT_TRUE(same_bits(columns(y, n, n), columns(y1, 96 + rank * n, n)));
    }
  }
}

// Sum over ranks of the row-parallel partial outputs (f32 layers), next to the TP = 1 output.
struct RowSums {
  Tensor y1;
  std::vector<double> sum, magnitude;  // sum of |partials| + |y1|: the scale of rounding errors
};

RowSums row_sums(const Fp8Config* config, int size, const Tensor& x, const std::function<void(LinearBase&)>& load) {
  RowSums r;
  RowParallelLinear whole("down_proj", 128, 24, options(config, 0, 1, DType::kF32));
  load(whole);
  whole.process_weights_after_loading(cpu_ctx());
  r.y1 = whole.forward(cpu_ctx(), x);
  r.sum.assign(size_t(r.y1.numel()), 0.0);
  for (int64_t i = 0; i < r.y1.numel(); ++i) r.magnitude.push_back(std::fabs(read16(r.y1, i)));
  for (int rank = 0; rank < size; ++rank) {
    RowParallelLinear l("down_proj", 128, 24, options(config, rank, size, DType::kF32));
    load(l);
    l.process_weights_after_loading(cpu_ctx());
    const Tensor y = l.forward(cpu_ctx(), x.narrow(1, rank * (128 / size), 128 / size).contiguous());
    for (int64_t i = 0; i < y.numel(); ++i) {
      r.sum[size_t(i)] += read16(y, i);
      r.magnitude[size_t(i)] += std::fabs(read16(y, i));
    }
  }
  return r;
}

TEST(LinearTp, RowSumsUnquantizedExactly) {
  // Small integers: every product and sum is exact in f32, so the sums are equal.
  std::mt19937 rng(33);
  std::uniform_int_distribution<int> d(-4, 4);
  Tensor w = Tensor::empty({24, 128}, DType::kF32), x = Tensor::empty({3, 128}, DType::kF32);
  Tensor b = Tensor::empty({24}, DType::kF32);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = float(d(rng));
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(d(rng));
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = float(d(rng));
  for (int size : {2, 4}) {
    const RowSums r = row_sums(nullptr, size, x, [&](LinearBase& l) {
      l.load_weight("weight", w, std::nullopt);
      l.load_weight("bias", b, std::nullopt);
    });
    for (int64_t i = 0; i < r.y1.numel(); ++i) EXPECT_EQ(r.sum[size_t(i)], double(read16(r.y1, i))) << i;
  }
}

void expect_row_sums_close(const Fp8Config& config, const std::function<void(LinearBase&)>& load) {
  std::mt19937 rng(34);
  const Tensor x = random_16bit({4, 128}, DType::kF32, rng);
  for (int size : {2, 4}) {
    SCOPED_TRACE(size);
    const RowSums r = row_sums(&config, size, x, load);
    for (int64_t i = 0; i < r.y1.numel(); ++i) {
      // Each partial and the TP = 1 output are rounded to f32 a few times (per K-block for block
      // scaling): a few ulps of the partial sums.
      const double err = std::fabs(r.sum[size_t(i)] - read16(r.y1, i));
      EXPECT_TRUE(err <= 2e-6 * r.magnitude[size_t(i)]) << i << ": " << err;
    }
  }
}

TEST(LinearTp, RowSumsPerTensorStatic) {
  const Fp8Config config(true, "static");
  std::mt19937 rng(35);
  const ops::QuantResult w = ops::quantize_weight_per_tensor(cpu_ctx(), random_16bit({24, 128}, DType::kBF16, rng));
  const Tensor b = random_16bit({24}, DType::kF32, rng);
  expect_row_sums_close(config, [&](LinearBase& l) {
    l.load_weight("weight", w.q, std::nullopt);
    l.load_weight("weight_scale", w.scale, std::nullopt);
    l.load_weight("input_scale", Tensor::scalar_f32(0.01f), std::nullopt);
    l.load_weight("bias", b, std::nullopt);
  });
}

TEST(LinearTp, RowSumsBlock) {
  // K-blocks of 32 fall on rank boundaries at TP 2 and 4, so the activation groups are the same.
  const Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{8, 32});
  std::mt19937 rng(36);
  const ops::QuantResult w = ops::quantize_weight_block(cpu_ctx(), random_16bit({24, 128}, DType::kBF16, rng), 8, 32);
  const Tensor b = random_16bit({24}, DType::kF32, rng);
  expect_row_sums_close(config, [&](LinearBase& l) {
    l.load_weight("weight", w.q, std::nullopt);
    l.load_weight("weight_scale_inv", w.scale, std::nullopt);
    l.load_weight("bias", b, std::nullopt);
  });
}

TEST(LinearTp, RowBiasOnlyOnRankZero) {
  std::mt19937 rng(37);
  const Tensor w = random_16bit({8, 16}, DType::kBF16, rng), b = random_16bit({8}, DType::kBF16, rng);
  const Tensor x = random_16bit({2, 8}, DType::kBF16, rng);
  for (int rank = 0; rank < 2; ++rank) {
    RowParallelLinear with("o_proj", 16, 8, options(nullptr, rank, 2, DType::kBF16, true));
    RowParallelLinear without("o_proj", 16, 8, options(nullptr, rank, 2, DType::kBF16, false));
    with.load_weight("weight", w, std::nullopt);
    with.load_weight("bias", b, std::nullopt);
    without.load_weight("weight", w, std::nullopt);
    with.process_weights_after_loading(cpu_ctx());
    without.process_weights_after_loading(cpu_ctx());
    EXPECT_EQ(same_bits(with.forward(cpu_ctx(), x), without.forward(cpu_ctx(), x)), rank != 0);
  }
}

}  // namespace
}  // namespace fp8kit
