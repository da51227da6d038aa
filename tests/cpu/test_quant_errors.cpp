// Argument errors of every quantization op, with their exact messages (the spec's texts where the
// spec has them, spec 1.6), and the device routing of a CPU-only build.
#include <cfloat>

#include "fp8kit/ops/quant.h"
#include "fp8kit/platform.h"
#include "test_quant_util.h"

namespace fp8kit {
namespace {

using namespace quant_test;
constexpr ErrorCode kArg = ErrorCode::kInvalidArgument;

Tensor f32(const Shape& shape) { return Tensor::zeros(shape, DType::kF32); }

// A tensor that claims to live on a CUDA device (host memory underneath; never dereferenced).
Tensor cuda_tensor(const Shape& shape, DType dtype) {
  static std::vector<uint8_t> memory(1 << 16);
  return Tensor::from_blob(memory.data(), shape, dtype, Device::cuda(0));
}

TEST(QuantErrors, ScaledFp8Quant) {
  using ops::ScaledFp8QuantOptions;
  auto quant = [](const Tensor& x, const ScaledFp8QuantOptions& o = {}) { return ops::scaled_fp8_quant(cpu_ctx(), x, o); };
  expect_error([&] { quant(Tensor()); }, kArg, "scaled_fp8_quant: `input` is an undefined tensor");
  expect_error([&] { quant(f32({3})); }, kArg, "scaled_fp8_quant: `input` must be 2-D, got f32[3] on cpu");
  expect_error(
      [&] {
        quant(Tensor::zeros({2, 2}, DType::kE4M3FN));
      },
      kArg, "scaled_fp8_quant: `input` must be f32, f16 or bf16, got e4m3fn[2, 2] on cpu");
  expect_error(
      [&] {
        quant(f32({4, 2}).t());
      },
      kArg, "scaled_fp8_quant: the last dimension of `input` must be contiguous, got strides [1, 2]");
  ScaledFp8QuantOptions o;
  o.out_dtype = DType::kE5M2;
  expect_error(
      [&] {
        quant(f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `out_dtype` must be e4m3fn or e4m3fnuz, got e5m2");
  o = {};
  o.scale = f32({2});
  expect_error(
      [&] {
        quant(f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `scale` must be a one-element f32 tensor, got f32[2] on cpu");
  o.scale = Tensor::zeros({}, DType::kBF16);
  expect_error(
      [&] {
        quant(f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `scale` must be a one-element f32 tensor, got bf16[] on cpu");
  o = {};
  o.scale_ub = Tensor::scalar_f32(1.0f);
  expect_error(
      [&] {
        quant(f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `scale_ub` only applies to dynamic per-token quantization");
  o.use_per_token_if_dynamic = true;
  o.scale = Tensor::scalar_f32(1.0f);  // static wins over per-token
  expect_error(
      [&] {
        quant(f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `scale_ub` only applies to dynamic per-token quantization");
  o.scale = Tensor();
  o.scale_ub = f32({2});
  expect_error(
      [&] {
        quant(f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `scale_ub` must be a one-element f32 tensor, got f32[2] on cpu");
  o = {};
  o.output = Tensor::empty({2, 2}, DType::kE4M3FN);
  o.num_token_padding = 4;
  expect_error([&] { quant(f32({2, 2}), o); }, kArg, "padding not supported if output passed in");
  o = {};
  o.num_token_padding = -1;
  expect_error(
      [&] {
        quant(f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `num_token_padding` must be non-negative, got -1");
  o = {};
  o.output = Tensor::empty({2, 2}, DType::kE4M3FNUZ);
  expect_error(
      [&] {
        quant(f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `output` must be e4m3fn, got e4m3fnuz[2, 2] on cpu");
  o.output = Tensor::empty({2, 3}, DType::kE4M3FN);
  expect_error(
      [&] {
        quant(f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `output` must have shape [2, 2], got e4m3fn[2, 3] on cpu");
  o.output = Tensor::empty({2, 2}, DType::kE4M3FN).t();
  expect_error([&] { quant(f32({2, 2}), o); }, kArg, "scaled_fp8_quant: `output` must be contiguous");
}

TEST(QuantErrors, PerTokenGroupQuant) {
  using ops::PerTokenGroupQuantOptions;
  auto quant = [](const Tensor& x, const PerTokenGroupQuantOptions& o = {}) {
    return ops::per_token_group_quant(cpu_ctx(), x, o);
  };
  expect_error(
      [&] {
        quant(f32({2, 130}));
      },
      kArg, "the last dimension of `x` 130 must be divisible by `group_size` 128");
  expect_error([&] { quant(f32({256, 2}).t()); }, kArg, "`x` groups must be contiguous");
  expect_error([&] { quant(f32({})); }, kArg,
               "per_token_group_quant: `x` must have at least one dimension, got f32[] on cpu");
  expect_error(
      [&] {
        quant(Tensor::zeros({2, 128}, DType::kI32));
      },
      kArg, "per_token_group_quant: `x` must be f32, f16 or bf16, got i32[2, 128] on cpu");
  PerTokenGroupQuantOptions o;
  o.group_size = 0;
  expect_error([&] { quant(f32({2, 128}), o); }, kArg, "per_token_group_quant: `group_size` must be positive, got 0");
  o = {};
  o.eps = 0.0f;
  expect_error(
      [&] {
        quant(f32({2, 128}), o);
      },
      kArg, "per_token_group_quant: `eps` must be positive and finite, got 0");
  o.eps = INFINITY;
  expect_error(
      [&] {
        quant(f32({2, 128}), o);
      },
      kArg, "per_token_group_quant: `eps` must be positive and finite, got inf");
  o = {};
  o.column_major_scales = true;
  expect_error(
      [&] {
        quant(f32({2, 2, 128}), o);
      },
      kArg, "per_token_group_quant: column-major scales need a 2-D `x`, got f32[2, 2, 128] on cpu");
  o = {};
  o.out_dtype = DType::kBF16;
  expect_error(
      [&] {
        quant(f32({2, 128}), o);
      },
      kArg, "per_token_group_quant: `out_dtype` must be e4m3fn or e4m3fnuz, got bf16");
  o = {};
  o.output = Tensor::empty({2, 256}, DType::kE4M3FN);
  expect_error(
      [&] {
        quant(f32({2, 128}), o);
      },
      kArg, "per_token_group_quant: `output` must have shape [2, 128], got e4m3fn[2, 256] on cpu");
}

TEST(QuantErrors, WeightQuantization) {
  expect_error([&] { ops::quantize_weight_per_tensor(cpu_ctx(), f32({4})); }, kArg,
               "quantize_weight_per_tensor: `w` must be 2-D, got f32[4] on cpu");
  expect_error(
      [&] {
        ops::quantize_weight_per_channel(cpu_ctx(), Tensor::zeros({2, 2}, DType::kE4M3FN));
      },
      kArg, "quantize_weight_per_channel: `w` must be f32, f16 or bf16, got e4m3fn[2, 2] on cpu");
  expect_error(
      [&] {
        ops::quantize_weight_block(cpu_ctx(), f32({2, 2}), 0, 128);
      },
      kArg, "quantize_weight_block: `block_n` and `block_k` must be positive, got [0, 128]");
  ops::WeightQuantOptions o;
  o.out_dtype = DType::kE5M2;
  expect_error(
      [&] {
        ops::quantize_weight_block(cpu_ctx(), f32({2, 2}), 128, 128, o);
      },
      kArg, "quantize_weight_block: `out_dtype` must be e4m3fn or e4m3fnuz, got e5m2");
  expect_error([&] { ops::quantize_weight_per_tensor(cpu_ctx(), Tensor()); }, kArg,
               "quantize_weight_per_tensor: `w` is an undefined tensor");
}

TEST(QuantErrors, Dequantize) {
  const Tensor q = Tensor::zeros({4, 6}, DType::kE4M3FN);
  expect_error(
      [&] {
        ops::dequantize_weight(cpu_ctx(), f32({4, 6}), Tensor::scalar_f32(1), DType::kF32);
      },
      kArg, "dequantize_weight: `q` must be an FP8 tensor, got f32[4, 6] on cpu");
  expect_error([&] { ops::dequantize_weight(cpu_ctx(), Tensor::zeros({4}, DType::kE4M3FN), Tensor::scalar_f32(1), DType::kF32); },
               kArg, "dequantize_weight: `q` must be 2-D, got e4m3fn[4] on cpu");
  expect_error([&] { ops::dequantize_weight(cpu_ctx(), q, Tensor::zeros({1}, DType::kI32), DType::kF32); }, kArg,
               "dequantize_weight: `scale` must be f32, f16, bf16 or ue8m0, got i32[1] on cpu");
  expect_error([&] { ops::dequantize_weight(cpu_ctx(), q, Tensor::scalar_f32(1), DType::kE4M3FN); }, kArg,
               "dequantize_weight: `out_dtype` must be f32, f16 or bf16, got e4m3fn");
  expect_error(
      [&] {
        ops::dequantize_weight(cpu_ctx(), q, f32({2, 3}), DType::kF32);
      },
      kArg,
      "dequantize_weight: `scale` f32[2, 3] on cpu is neither per-tensor, per-row ([4] or [4, 1]) nor, "
      "without `block`, 2-D blocks");
  expect_error(
      [&] {
        ops::dequantize_weight(cpu_ctx(), q, f32({2, 3}), DType::kF32, std::make_pair(2, 4));
      },
      kArg,
      "dequantize_weight: `scale` f32[2, 3] on cpu does not match q e4m3fn[4, 6] on cpu with block [2, 4]: "
      "expected shape [2, 2]");
  expect_error(
      [&] {
        ops::dequantize_weight(cpu_ctx(), q, f32({2, 3}), DType::kF32, std::make_pair(0, 4));
      },
      kArg, "dequantize_weight: `block` must be positive, got [0, 4]");
  expect_error([&] { ops::per_tensor_dequantize(cpu_ctx(), q, f32({2})); }, kArg,
               "per_tensor_dequantize: `scale` must be a one-element f32 tensor, got f32[2] on cpu");
  expect_error([&] { ops::per_tensor_dequantize(cpu_ctx(), Tensor::zeros({2}, DType::kBF16), Tensor::scalar_f32(1)); }, kArg,
               "per_tensor_dequantize: `q` must be an FP8 tensor, got bf16[2] on cpu");
}

TEST(QuantErrors, RequantizeWithMaxScale) {
  const Tensor w = Tensor::zeros({4, 2}, DType::kE4M3FN);
  const Tensor s = f32({2});
  expect_error(
      [&] {
        ops::requantize_with_max_scale(cpu_ctx(), w, s, {1, 2, 1});
      },
      kArg, "requantize_with_max_scale: `logical_widths` has 3 entries but `weight_scale` has 2");
  expect_error(
      [&] {
        ops::requantize_with_max_scale(cpu_ctx(), w, s, {1, 2});
      },
      kArg, "requantize_with_max_scale: `logical_widths` sum to 3 but `weight` has 4 rows");
  expect_error(
      [&] {
        ops::requantize_with_max_scale(cpu_ctx(), w, s, {-1, 5});
      },
      kArg, "requantize_with_max_scale: `logical_widths` must be non-negative, got -1");
  expect_error(
      [&] {
        ops::requantize_with_max_scale(cpu_ctx(), Tensor::zeros({4, 2}, DType::kBF16), s, {2, 2});
      },
      kArg, "requantize_with_max_scale: `weight` must be e4m3fn or e4m3fnuz, got bf16");
  expect_error(
      [&] {
        ops::requantize_with_max_scale(cpu_ctx(), Tensor::zeros({8}, DType::kE4M3FN), s, {4, 4});
      },
      kArg, "requantize_with_max_scale: `weight` must be 2-D, got e4m3fn[8] on cpu");
  expect_error(
      [&] {
        ops::requantize_with_max_scale(cpu_ctx(), w, Tensor::zeros({2}, DType::kBF16), {2, 2});
      },
      kArg, "requantize_with_max_scale: `weight_scale` must be f32, got bf16[2] on cpu");
  expect_error(
      [&] {
        ops::requantize_with_max_scale(cpu_ctx(), w, f32({2, 1}), {2, 2});
      },
      kArg, "requantize_with_max_scale: `weight_scale` must be 1-D, got f32[2, 1] on cpu");
  expect_error([&] { ops::requantize_with_max_scale(cpu_ctx(), w, f32({0}), {}); }, kArg,
               "requantize_with_max_scale: `weight_scale` is empty");
}

TEST(QuantErrors, NormalizeToFnuz) {
  expect_error([&] { ops::normalize_e4m3fn_to_e4m3fnuz(cpu_ctx(), Tensor::zeros({2}, DType::kE4M3FNUZ), Tensor::scalar_f32(1)); },
               kArg, "normalize_e4m3fn_to_e4m3fnuz: `weight` must be e4m3fn, got e4m3fnuz[2] on cpu");
  expect_error(
      [&] { ops::normalize_e4m3fn_to_e4m3fnuz(cpu_ctx(), Tensor::zeros({2}, DType::kE4M3FN), Tensor::zeros({1}, DType::kF16)); },
      kArg, "normalize_e4m3fn_to_e4m3fnuz: `weight_scale` must be f32, got f16[1] on cpu");
  expect_error(
      [&] {
        ops::normalize_e4m3fn_to_e4m3fnuz(cpu_ctx(), Tensor::zeros({2}, DType::kE4M3FN), Tensor::scalar_f32(1),
                                          Tensor::zeros({1}, DType::kBF16));
      },
      kArg, "normalize_e4m3fn_to_e4m3fnuz: `input_scale` must be f32, got bf16[1] on cpu");
}

TEST(QuantErrors, QuantMaxOfOtherDTypes) {
  expect_error([] { ops::fp8_quant_max(DType::kE5M2); }, kArg, "fp8_quant_max: expected e4m3fn or e4m3fnuz, got e5m2");
}

TEST(QuantErrors, CudaTensorsInACpuBuild) {
  // A CUDA build routes these to its kernels (tests/gpu/); the fake device memory here would crash them.
  if (cuda_built()) GTEST_SKIP() << "CUDA build";
  constexpr ErrorCode kUnsupported = ErrorCode::kUnsupported;
  const Tensor x = cuda_tensor({2, 128}, DType::kBF16);
  expect_error([&] { ops::scaled_fp8_quant(cpu_ctx(), x); }, kUnsupported, "scaled_fp8_quant: fp8kit was built without CUDA");
  expect_error([&] { ops::per_token_group_quant(cpu_ctx(), x); }, kUnsupported,
               "per_token_group_quant: fp8kit was built without CUDA");
  expect_error([&] { ops::quantize_weight_block(cpu_ctx(), x, 128, 128); }, kUnsupported,
               "quantize_weight_block: fp8kit was built without CUDA");
  const Tensor q = cuda_tensor({2, 128}, DType::kE4M3FN);
  const Tensor s = cuda_tensor({}, DType::kF32);
  expect_error([&] { ops::dequantize_weight(cpu_ctx(), q, s, DType::kBF16); }, kUnsupported,
               "dequantize_weight: fp8kit was built without CUDA");
  expect_error([&] { ops::per_tensor_dequantize(cpu_ctx(), q, s); }, kUnsupported,
               "per_tensor_dequantize: fp8kit was built without CUDA");
  expect_error([&] { ops::requantize_with_max_scale(cpu_ctx(), q, cuda_tensor({1}, DType::kF32), {2}); }, kUnsupported,
               "requantize_with_max_scale: fp8kit was built without CUDA");
  expect_error([&] { ops::normalize_e4m3fn_to_e4m3fnuz(cpu_ctx(), q, s); }, kUnsupported,
               "normalize_e4m3fn_to_e4m3fnuz: fp8kit was built without CUDA");
}

TEST(QuantErrors, MixedDevices) {
  ops::ScaledFp8QuantOptions o;
  o.scale = cuda_tensor({}, DType::kF32);
  expect_error(
      [&] {
        ops::scaled_fp8_quant(cpu_ctx(), f32({2, 2}), o);
      },
      kArg, "scaled_fp8_quant: `scale` is on cuda:0 but `input` is on cpu");
  expect_error(
      [&] {
        ops::dequantize_weight(cpu_ctx(), Tensor::zeros({2, 2}, DType::kE4M3FN), o.scale, DType::kF32);
      },
      kArg, "dequantize_weight: `scale` is on cuda:0 but `q` is on cpu");
  expect_error(
      [&] {
        ops::requantize_with_max_scale(cpu_ctx(), Tensor::zeros({2, 2}, DType::kE4M3FN), cuda_tensor({1}, DType::kF32), {2});
      },
      kArg, "requantize_with_max_scale: `weight_scale` is on cuda:0 but `weight` is on cpu");
}

}  // namespace
}  // namespace fp8kit
