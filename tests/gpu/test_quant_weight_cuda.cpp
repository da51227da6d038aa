// The weight-side ops on CUDA against the CPU reference on the same args struct, bit-exact:
// quantize_weight per-tensor, per-channel and block (128x128, 64x128, 128x64, partial edge
// tiles, odd block shapes, transposed and strided weights, ue8m0), dequantize (every FP8 and
// scale dtype, per-tensor, per-row and block scales with any strides), requantize_with_max_scale
// (more shards than one launch takes, the not-loaded sentinel, zero and NaN scales) and
// normalize_e4m3fn_to_e4m3fnuz (in place, misaligned); then each public op on a user stream.
#include <cuda_runtime_api.h>

#include <cfloat>
#include <numeric>

#include "fp8kit/ops/quant.h"
#include "gpu_test_util.h"
#include "ops/quant/quant_cuda.h"
#include "ops/quant/quant_ref.h"

namespace fp8kit {
namespace {

using namespace gpu_test;
using ops::WeightQuantArgs;
using ops::WeightQuantScheme;

const char* scheme_name(WeightQuantScheme s) {
  return s == WeightQuantScheme::kPerTensor    ? "per-tensor"
         : s == WeightQuantScheme::kPerChannel ? "per-channel"
                                               : "block";
}

// `w` is a CPU view into the contiguous `base` (any strides).
void check_weight_quant(const Tensor& base, const Tensor& w, WeightQuantScheme scheme, int64_t bn, int64_t bk,
                        DType out, bool ue8m0, uint32_t seed, const std::string& detail) {
  const int64_t n = w.size(0), k = w.size(1);
  const int64_t scales = scheme == WeightQuantScheme::kPerTensor    ? 1
                         : scheme == WeightQuantScheme::kPerChannel ? n
                                                                    : (n + bn - 1) / bn * ((k + bk - 1) / bk);
  const Case c{
      std::string("quantize_weight ") + scheme_name(scheme),
      {n, k},
      w.dtype(),
      out,
      seed,
      detail + (scheme == WeightQuantScheme::kBlock ? ", block " + std::to_string(bn) + "x" + std::to_string(bk) : "") +
          (ue8m0 ? ", ue8m0" : "") + ", strides " + shape_to_string(w.strides())};
  WeightQuantArgs a;
  a.in_dtype = w.dtype();
  a.n = n;
  a.k = k;
  a.w_stride_n = w.stride(0);
  a.w_stride_k = w.stride(1);
  a.out_dtype = out;
  a.scheme = scheme;
  a.block_n = bn;
  a.block_k = bk;
  a.fp8_max = ops::fp8_quant_max(out);
  a.ue8m0_scales = ue8m0;

  Tensor out_h = Tensor::empty({n, k}, DType::kU8);
  Tensor scale_h = Tensor::empty({scales}, DType::kF32);
  WeightQuantArgs ah = a;
  ah.w = w.data_ptr();
  ah.out = out_h.data_ptr();
  ah.scale = scale_h.data<float>();
  ops::quantize_weight_ref(ah);

  const Tensor w_d = device_view(base, w);
  Tensor out_d = poisoned({n, k}, DType::kU8, Device::cuda(0), kPoisonCodes);
  Tensor scale_d = poisoned({scales}, DType::kF32, Device::cuda(0), kPoisonScales);
  WeightQuantArgs ad = a;
  ad.w = w_d.data_ptr();
  ad.out = out_d.data_ptr();
  ad.scale = static_cast<float*>(scale_d.data_ptr());
  ops::quantize_weight_cuda(ad, Stream{});

  expect_same_tensor(c, "scales", scale_d, scale_h);
  expect_same_tensor(c, "codes", out_d, out_h);
}

TEST(QuantWeightCuda, EverySchemeShapeAndLayout) {
  struct Shape2 {
    int64_t n, k;
  };
  const Shape2 shapes[] = {{1, 1}, {3, 5}, {127, 129}, {128, 128}, {129, 257}, {256, 384}, {300, 1000}, {512, 1536}};
  struct Block {
    int64_t n, k;
  };
  const Block blocks[] = {{128, 128}, {64, 128}, {128, 64}, {1, 16}, {3, 5}, {256, 128}};
  for (const Shape2& s : shapes) {
    for (DType in : {DType::kF32, DType::kF16, DType::kBF16}) {
      const uint32_t seed = next_seed();
      // Contiguous; rows padded (aligned), rows padded and offset (misaligned); transposed.
      const int64_t ld = s.k + 24;
      Tensor base = random_tensor({s.n * ld + 3}, in, seed, 2.0f);
      const Tensor contiguous = Tensor::from_storage(base.storage(), {s.n, s.k}, {s.k, 1}, 0, in);
      const Tensor padded = Tensor::from_storage(base.storage(), {s.n, s.k}, {ld, 1}, 0, in);
      const Tensor misaligned = Tensor::from_storage(base.storage(), {s.n, s.k}, {ld, 1}, 3, in);
      const Tensor transposed = Tensor::from_storage(base.storage(), {s.n, s.k}, {1, s.n}, 0, in);
      const std::pair<const Tensor*, const char*> views[] = {{&contiguous, "contiguous"},
                                                             {&padded, "padded rows"},
                                                             {&misaligned, "misaligned"},
                                                             {&transposed, "transposed"}};
      for (const auto& [view, name] : views) {
        for (DType out : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
          for (bool ue8m0 : {false, true}) {
            check_weight_quant(base, *view, WeightQuantScheme::kPerTensor, 1, 1, out, ue8m0, seed, name);
            check_weight_quant(base, *view, WeightQuantScheme::kPerChannel, 1, 1, out, ue8m0, seed, name);
            for (const Block& b : blocks) {
              if (view != &contiguous && b.n != 128) continue;
              check_weight_quant(base, *view, WeightQuantScheme::kBlock, b.n, b.k, out, ue8m0, seed, name);
            }
          }
        }
      }
    }
  }
}

TEST(QuantWeightCuda, ZerosNaNAndInfinities) {
  for (DType in : {DType::kF32, DType::kBF16}) {
    Tensor w = Tensor::zeros({200, 260}, in);  // block (0, 0) all zero: scale FLT_MIN, zero codes
    for (int64_t i = 0; i < w.numel(); ++i) {
      const int64_t r = i / 260, c = i % 260;
      if (r >= 128 || c >= 128) store_float(w, i, float((r * 7 + c * 3) % 23) - 11.0f);
    }
    store_float(w, 130 * 260 + 2, NAN);
    store_float(w, 150 * 260 + 200, INFINITY);
    store_float(w, 10 * 260 + 140, -1e30f);
    for (WeightQuantScheme scheme :
         {WeightQuantScheme::kPerTensor, WeightQuantScheme::kPerChannel, WeightQuantScheme::kBlock}) {
      for (bool ue8m0 : {false, true}) check_weight_quant(w, w, scheme, 128, 128, DType::kE4M3FN, ue8m0, 0, "specials");
    }
  }
  Tensor empty = Tensor::empty({0, 5}, DType::kBF16);
  for (WeightQuantScheme scheme :
       {WeightQuantScheme::kPerTensor, WeightQuantScheme::kPerChannel, WeightQuantScheme::kBlock}) {
    check_weight_quant(empty, empty, scheme, 128, 128, DType::kE4M3FN, false, 0, "empty");
  }
  Tensor no_cols = Tensor::empty({4, 0}, DType::kBF16);
  check_weight_quant(no_cols, no_cols, WeightQuantScheme::kPerTensor, 1, 1, DType::kE4M3FN, false, 0, "no columns");
  check_weight_quant(no_cols, no_cols, WeightQuantScheme::kPerChannel, 1, 1, DType::kE4M3FN, false, 0, "no columns");
}

// ---- dequantize -------------------------------------------------------------------------------

Tensor random_codes(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::kU8);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = uint8_t(rng());
  return t;
}

// Scales of `dtype` at random (positive, a few magnitudes), shape [rows, cols] in a buffer twice as
// wide, so a transposed or strided view can be taken.
Tensor random_scales(int64_t count, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-8.0f, 4.0f);
  Tensor t = Tensor::empty({count}, dtype);
  for (int64_t i = 0; i < count; ++i) {
    const float v = std::exp2(u(rng));
    switch (dtype) {
      case DType::kUE8M0:
        t.data<Float8UE8M0>()[i] = Float8UE8M0{uint8_t(127 + int(std::floor(u(rng))))};
        break;
      case DType::kF32:
        t.data<float>()[i] = v;
        break;
      case DType::kF16:
        t.data<Float16>()[i] = float_to_f16(v);
        break;
      default:
        t.data<BFloat16>()[i] = float_to_bf16(v);
    }
  }
  return t;
}

void check_dequant(const Tensor& q_base, const Tensor& q, const Tensor& s_base, const Tensor& s, int64_t bn, int64_t bk,
                   DType out, uint32_t seed, const std::string& detail) {
  const int64_t n = q.size(0), k = q.size(1);
  const Case c{"dequantize",
               {n, k},
               q.dtype(),
               out,
               seed,
               detail + ", scale " + std::string(dtype_name(s.dtype())) + " strides " + shape_to_string(s.strides())};
  ops::DequantArgs a;
  a.q_dtype = q.dtype();
  a.n = n;
  a.k = k;
  a.q_stride_n = q.stride(0);
  a.q_stride_k = q.stride(1);
  a.scale_dtype = s.dtype();
  a.scale_stride_n = s.dim() > 0 ? s.stride(0) : 0;
  a.scale_stride_k = s.dim() > 1 ? s.stride(1) : 0;
  a.block_n = bn;
  a.block_k = bk;
  a.out_dtype = out;
  Tensor out_h = Tensor::empty({n, k}, out);
  ops::DequantArgs ah = a;
  ah.q = static_cast<const uint8_t*>(q.data_ptr());
  ah.scale = s.data_ptr();
  ah.out = out_h.data_ptr();
  ops::dequantize_ref(ah);

  const Tensor q_d = device_view(q_base, q);
  const Tensor s_d = device_view(s_base, s);
  Tensor out_d = poisoned({n, k}, out, Device::cuda(0), kPoisonCodes);
  ops::DequantArgs ad = a;
  ad.q = static_cast<const uint8_t*>(q_d.data_ptr());
  ad.scale = s_d.data_ptr();
  ad.out = out_d.data_ptr();
  ops::dequantize_cuda(ad, Stream{});
  expect_same_tensor(c, "values", out_d, out_h);
}

TEST(QuantWeightCuda, DequantizeEveryFormatAndScaleLayout) {
  const DType q_types[] = {DType::kE4M3FN, DType::kE4M3FNUZ, DType::kE5M2, DType::kE5M2FNUZ};
  const DType s_types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kUE8M0};
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 17}, {129, 300}, {256, 1024}, {200, 4100}}) {
    const uint32_t seed = next_seed();
    Tensor q_base = random_codes({n * (k + 16) + 5}, seed);
    for (DType qt : q_types) {
      const Tensor q_contig = Tensor::from_storage(q_base.storage(), {n, k}, {k, 1}, 0, qt);
      const Tensor q_padded = Tensor::from_storage(q_base.storage(), {n, k}, {k + 16, 1}, 0, qt);
      const Tensor q_odd = Tensor::from_storage(q_base.storage(), {n, k}, {k + 16, 1}, 5, qt);
      const Tensor q_t = Tensor::from_storage(q_base.storage(), {n, k}, {1, n}, 0, qt);
      for (DType st : s_types) {
        for (DType out : {DType::kF32, DType::kF16, DType::kBF16}) {
          if (qt != DType::kE4M3FN && st != DType::kF32 && out != DType::kBF16) continue;
          const Tensor per_tensor = random_scales(1, st, seed + 1);
          const Tensor per_row = random_scales(2 * n, st, seed + 2);
          const int64_t bn = 128, bk = 128, sbn = (n + 127) / 128, sbk = (k + 127) / 128;
          const Tensor blocks = random_scales(2 * sbn * sbk, st, seed + 3);
          const Tensor rows_view = Tensor::from_storage(per_row.storage(), {n}, {2}, 1, st);  // every other one
          const Tensor blocks_t = Tensor::from_storage(blocks.storage(), {sbn, sbk}, {1, 2 * sbn}, 0, st);
          const Tensor small_blocks = random_scales(((n + 2) / 3) * ((k + 6) / 7), st, seed + 4);
          const Tensor small_view = small_blocks.view({(n + 2) / 3, (k + 6) / 7});
          const std::pair<const Tensor*, const char*> views[] = {
              {&q_contig, "contiguous"}, {&q_padded, "padded"}, {&q_odd, "misaligned"}, {&q_t, "transposed"}};
          for (const auto& [qv, name] : views) {
            if (n * k > 100000 && qv == &q_padded) continue;
            const std::string view_name = name;
            check_dequant(q_base, *qv, per_tensor, per_tensor, std::max<int64_t>(n, 1), std::max<int64_t>(k, 1), out,
                          seed, view_name + ", per tensor");
            check_dequant(q_base, *qv, per_row, rows_view, 1, std::max<int64_t>(k, 1), out, seed,
                          view_name + ", per row");
            check_dequant(q_base, *qv, blocks, blocks_t, bn, bk, out, seed, view_name + ", 128x128 blocks");
            check_dequant(q_base, *qv, small_blocks, small_view, 3, 7, out, seed, view_name + ", 3x7 blocks");
          }
        }
      }
    }
  }
}

// ---- requantize_with_max_scale and fnuz ----------------------------------------------------------

void check_requant(const Tensor& w_base, const Tensor& w, const std::vector<float>& scales,
                   const std::vector<int64_t>& widths, uint32_t seed, const std::string& detail) {
  const Case c{"requantize_with_max_scale",
               w.shape(),
               w.dtype(),
               w.dtype(),
               seed,
               detail + ", " + std::to_string(scales.size()) + " shards"};
  ops::RequantizeArgs a;
  a.weight_dtype = w.dtype();
  a.n = w.size(0);
  a.k = w.size(1);
  a.w_stride_n = w.stride(0);
  a.w_stride_k = w.stride(1);
  a.logical_widths = widths.data();
  a.num_shards = int64_t(scales.size());
  a.fp8_max = ops::fp8_quant_max(w.dtype());
  // The reference works in place on a copy of the whole buffer.
  Tensor base_h = w_base.clone();
  const Tensor w_h = Tensor::from_storage(base_h.storage(), w.shape(), w.strides(), w.storage_offset(), w.dtype());
  float max_h = -1.0f;
  ops::RequantizeArgs ah = a;
  ah.weight = static_cast<uint8_t*>(w_h.data_ptr());
  ah.weight_scale = scales.data();
  ah.max_scale = &max_h;
  ops::requantize_with_max_scale_ref(ah);

  const Tensor w_d = device_view(w_base, w);
  const Tensor scales_d = Tensor::from_vector(scales).to(Device::cuda(0));
  Tensor max_d = poisoned({1}, DType::kF32, Device::cuda(0), kPoisonScales);
  ops::RequantizeArgs ad = a;
  ad.weight = static_cast<uint8_t*>(w_d.data_ptr());
  ad.weight_scale = static_cast<const float*>(scales_d.data_ptr());
  ad.max_scale = static_cast<float*>(max_d.data_ptr());
  ops::requantize_with_max_scale_cuda(ad, Stream{});
  expect_same(c, "max scale", raw_bytes(max_d), raw_bytes(Tensor::from_vector(std::vector<float>{max_h})), 4);
  // The whole buffer: the view's codes, and the bytes outside the view untouched.
  expect_same(c, "weight buffer", raw_bytes(Tensor::from_storage(w_d.storage(), {w_base.numel()}, {1}, 0, DType::kU8)),
              raw_bytes(base_h.view_as(DType::kU8)), 1);
}

TEST(QuantWeightCuda, RequantizeWithMaxScale) {
  for (DType wt : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
    const uint32_t seed = next_seed();
    const int64_t n = 96, k = 200;
    Tensor base = random_codes({n * (k + 8) + 2}, seed).view_as(wt);
    const Tensor contiguous = Tensor::from_storage(base.storage(), {n, k}, {k, 1}, 0, wt);
    const Tensor strided = Tensor::from_storage(base.storage(), {n, k}, {k + 8, 1}, 2, wt);
    const Tensor transposed = Tensor::from_storage(base.storage(), {n, k}, {1, n}, 0, wt);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.001f, 0.05f);
    std::vector<float> three = {u(rng), u(rng), u(rng)};
    for (const Tensor* w : {&contiguous, &strided, &transposed}) {
      check_requant(base, *w, three, {32, 48, 16}, seed, "qkv");
      check_requant(base, *w, {u(rng)}, {n}, seed, "one shard");
      check_requant(base, *w, {three[0], three[1], -FLT_MAX}, {32, 48, 16}, seed, "not loaded");
      check_requant(base, *w, {0.0f, 0.0f}, {40, 56}, seed, "zero scales");
      check_requant(base, *w, {three[0], NAN, three[2]}, {32, 0, 64}, seed, "NaN scale, empty shard");
      std::vector<float> many(40);
      for (float& s : many) s = u(rng);
      std::vector<int64_t> widths(40, 2);
      widths[39] = n - 78;
      check_requant(base, *w, many, widths, seed, "two launches");
    }
  }
}

TEST(QuantWeightCuda, NormalizeToFnuz) {
  for (int64_t n : {0, 1, 15, 16, 17, 4096 + 7}) {
    for (int64_t offset : {0, 1}) {
      const uint32_t seed = next_seed();
      Tensor base = random_codes({n + offset}, seed);
      for (int64_t i = 0; i < n + offset; i += 5) base.data<uint8_t>()[i] = 0x80;
      const Case c{"normalize_e4m3fn_to_e4m3fnuz",    {n}, DType::kE4M3FN, DType::kE4M3FNUZ, seed,
                   "offset " + std::to_string(offset)};
      const std::vector<float> ws = {0.5f, NAN, 3e38f}, is = {0.25f};
      std::vector<uint8_t> out_h(static_cast<size_t>(n), uint8_t(0));
      std::vector<float> ws_h(3), is_h(1);
      ops::FnuzNormalizeArgs a;
      a.numel = n;
      a.weight_scale_numel = 3;
      a.input_scale_numel = 1;
      ops::FnuzNormalizeArgs ah = a;
      ah.weight = base.data<uint8_t>() + offset;
      ah.out = out_h.data();
      ah.weight_scale = ws.data();
      ah.weight_scale_out = ws_h.data();
      ah.input_scale = is.data();
      ah.input_scale_out = is_h.data();
      ops::normalize_e4m3fn_to_e4m3fnuz_ref(ah);

      // In place on the device.
      Tensor dev = base.to(Device::cuda(0));
      const Tensor ws_d = Tensor::from_vector(ws).to(Device::cuda(0)),
                   is_d = Tensor::from_vector(is).to(Device::cuda(0));
      Tensor ws_out = poisoned({3}, DType::kF32, Device::cuda(0), kPoisonScales);
      Tensor is_out = poisoned({1}, DType::kF32, Device::cuda(0), kPoisonScales);
      ops::FnuzNormalizeArgs ad = a;
      ad.weight = static_cast<const uint8_t*>(dev.data_ptr()) + offset;
      ad.out = static_cast<uint8_t*>(dev.data_ptr()) + offset;
      ad.weight_scale = static_cast<const float*>(ws_d.data_ptr());
      ad.weight_scale_out = static_cast<float*>(ws_out.data_ptr());
      ad.input_scale = static_cast<const float*>(is_d.data_ptr());
      ad.input_scale_out = static_cast<float*>(is_out.data_ptr());
      ops::normalize_e4m3fn_to_e4m3fnuz_cuda(ad, Stream{});
      std::vector<uint8_t> got = raw_bytes(dev);
      got.erase(got.begin(), got.begin() + offset);
      expect_same(c, "codes", got, out_h, 1);
      expect_same(c, "weight scales", raw_bytes(ws_out), raw_bytes(Tensor::from_vector(ws_h)), 4);
      expect_same(c, "input scale", raw_bytes(is_out), raw_bytes(Tensor::from_vector(is_h)), 4);
    }
  }
}

// ---- the public ops on a user stream --------------------------------------------------------

TEST(QuantWeightCuda, PublicOpsMatchCpu) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const Stream s{stream};
  const ForwardContext on_stream(Device::cuda(0), {}, s);
  const uint32_t seed = next_seed();
  const Tensor w = random_tensor({300, 520}, DType::kBF16, seed);
  const Tensor w_d = w.to(Device::cuda(0));
  const Case c{"weight ops (public)", w.shape(), DType::kBF16, DType::kE4M3FN, seed, ""};
  ops::WeightQuantOptions o;
  for (bool ue8m0 : {false, true}) {
    o.ue8m0_scales = ue8m0;
    auto check = [&](const ops::QuantResult& got, const ops::QuantResult& want, const std::string& what) {
      stream_synchronize(s);
      expect_same_tensor(c, what + " codes", got.q, want.q);
      expect_same_tensor(c, what + " scales", got.scale, want.scale);
    };
    poison_next_allocations({size_t(w.numel()), 512});
    check(ops::quantize_weight_per_tensor(on_stream, w_d, o), ops::quantize_weight_per_tensor(ctx_of(w), w, o), "per-tensor");
    poison_next_allocations({size_t(w.numel()), 300 * 4});
    check(ops::quantize_weight_per_channel(on_stream, w_d, o), ops::quantize_weight_per_channel(ctx_of(w), w, o), "per-channel");
    poison_next_allocations({size_t(w.numel()), 3 * 5 * 4});
    const ops::QuantResult blocks_d = ops::quantize_weight_block(on_stream, w_d, 128, 128, o);
    const ops::QuantResult blocks = ops::quantize_weight_block(ctx_of(w), w, 128, 128, o);
    check(blocks_d, blocks, "128x128 blocks");
    // Round trips through the public dequantize.
    poison_next_allocations({size_t(w.numel()) * 2});
    const Tensor deq_d = ops::dequantize_weight(on_stream, blocks_d.q, blocks_d.scale, DType::kBF16, std::make_pair(128, 128));
    const Tensor deq = ops::dequantize_weight(ctx_of(blocks.q), blocks.q, blocks.scale, DType::kBF16, std::make_pair(128, 128));
    stream_synchronize(s);
    expect_same_tensor(c, "dequantized", deq_d, deq);
  }
  // per_tensor_dequantize of a 3-D view whose leading dimensions must be copied together first.
  const Tensor q3_base = random_codes({4, 6, 50}, seed).view_as(DType::kE4M3FN);
  const Tensor q3 = q3_base.transpose(0, 1);
  const Tensor q3_d = q3_base.to(Device::cuda(0)).transpose(0, 1);
  const Tensor scale = Tensor::scalar_f32(0.37f);
  poison_next_allocations({size_t(q3.numel()) * 2});
  const Tensor pd = ops::per_tensor_dequantize(on_stream, q3_d, scale.to(Device::cuda(0)));
  stream_synchronize(s);
  expect_same_tensor(c, "per_tensor_dequantize", pd, ops::per_tensor_dequantize(ctx_of(q3), q3, scale));
  // requantize and fnuz.
  const Tensor q = random_codes({96, 64}, seed).view_as(DType::kE4M3FN);
  const std::vector<float> shard_scales = {0.01f, 0.02f, 0.015f};
  Tensor q_h = q.clone(), q_d = q.to(Device::cuda(0));
  const ops::RequantizeResult rq_d =
      ops::requantize_with_max_scale(on_stream, q_d, Tensor::from_vector(shard_scales).to(Device::cuda(0)), {32, 32, 32});
  const ops::RequantizeResult rq = ops::requantize_with_max_scale(ctx_of(q_h), q_h, Tensor::from_vector(shard_scales), {32, 32, 32});
  stream_synchronize(s);
  expect_same_tensor(c, "requantized weight", rq_d.weight, rq.weight);
  expect_same_tensor(c, "max scale", rq_d.max_scale, rq.max_scale);
  const ops::FnuzResult f_d =
      ops::normalize_e4m3fn_to_e4m3fnuz(on_stream, q_d, rq_d.max_scale, Tensor::scalar_f32(0.5f).to(Device::cuda(0)));
  const ops::FnuzResult f = ops::normalize_e4m3fn_to_e4m3fnuz(ctx_of(q_h), q_h, rq.max_scale, Tensor::scalar_f32(0.5f));
  stream_synchronize(s);
  expect_same_tensor(c, "fnuz weight", f_d.weight, f.weight);
  expect_same_tensor(c, "fnuz weight scale", f_d.weight_scale, f.weight_scale);
  expect_same_tensor(c, "fnuz input scale", f_d.input_scale, f.input_scale);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace fp8kit
