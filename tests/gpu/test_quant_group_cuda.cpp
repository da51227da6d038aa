// per_token_group_quant on CUDA against the CPU reference on the same args struct, bit-exact on
// codes and scales: g = 64 and 128 on the lane-per-8-elements kernel, other group sizes and
// misaligned rows on the generic one; row-major, column-major and TMA-aligned column-major
// scales (the padding of the latter must stay untouched); ue8m0; the eps floor underflowing.
#include <cuda_runtime_api.h>

#include "fp8kit/ops/quant.h"
#include "gpu_test_util.h"
#include "ops/quant/quant_cuda.h"
#include "ops/quant/quant_ref.h"

namespace fp8kit {
namespace {

using namespace gpu_test;
using ops::PerTokenGroupQuantArgs;

enum class ScaleLayout { kRowMajor, kColumnMajor, kTmaAligned };

const char* layout_name(ScaleLayout l) {
  return l == ScaleLayout::kRowMajor ? "row-major" : l == ScaleLayout::kColumnMajor ? "column-major" : "TMA-aligned";
}

struct GroupCase {
  int64_t group_size = 128;
  DType out = DType::kE4M3FN;
  ScaleLayout layout = ScaleLayout::kRowMajor;
  bool ue8m0 = false;
  float eps = 1e-10f;
};

void check_group(const Tensor& base, const Tensor& x, const GroupCase& gc, uint32_t seed,
                 const std::string& detail = "") {
  const int64_t rows = x.size(0), k = x.size(1), groups = k / gc.group_size;
  const int64_t m_pad = gc.layout == ScaleLayout::kTmaAligned ? (rows + 3) / 4 * 4 : rows;
  const int64_t scale_elems = gc.layout == ScaleLayout::kRowMajor ? rows * groups : groups * m_pad;
  const Case c{"per_token_group_quant g=" + std::to_string(gc.group_size),
               {rows, k},
               x.dtype(),
               gc.out,
               seed,
               std::string(layout_name(gc.layout)) + (gc.ue8m0 ? ", ue8m0" : "") + ", row stride " +
                   std::to_string(x.stride(0)) + (detail.empty() ? "" : ", " + detail)};
  PerTokenGroupQuantArgs a;
  a.in_dtype = x.dtype();
  a.rows = rows;
  a.k = k;
  a.input_row_stride = x.stride(0);
  a.out_dtype = gc.out;
  a.out_row_stride = k;
  a.scale_row_stride = gc.layout == ScaleLayout::kRowMajor ? groups : 1;
  a.scale_group_stride = gc.layout == ScaleLayout::kRowMajor ? 1 : m_pad;
  a.group_size = gc.group_size;
  a.eps = gc.eps;
  a.fp8_max = ops::fp8_quant_max(gc.out);
  a.use_ue8m0 = gc.ue8m0;

  // Both scale buffers start poisoned, so TMA padding must stay poison on both sides.
  Tensor out_h = Tensor::empty({rows, k}, DType::kU8);
  Tensor scale_h = Tensor::empty({scale_elems}, DType::kF32);
  scale_h.fill_bytes_(kPoisonScales);
  PerTokenGroupQuantArgs ah = a;
  ah.input = x.data_ptr();
  ah.out = out_h.data_ptr();
  ah.scale = scale_h.data<float>();
  ops::per_token_group_quant_ref(ah);

  const Tensor x_d = device_view(base, x);
  Tensor out_d = poisoned({rows, k}, DType::kU8, Device::cuda(0), kPoisonCodes);
  Tensor scale_d = poisoned({scale_elems}, DType::kF32, Device::cuda(0), kPoisonScales);
  PerTokenGroupQuantArgs ad = a;
  ad.input = x_d.data_ptr();
  ad.out = out_d.data_ptr();
  ad.scale = static_cast<float*>(scale_d.data_ptr());
  ops::per_token_group_quant_cuda(ad, Stream{});

  expect_same_tensor(c, "scales", scale_d, scale_h);
  expect_same_tensor(c, "codes", out_d, out_h);
}

// [rows, k] CPU view: contiguous, or rows `pad` elements longer starting `offset` in.
std::pair<Tensor, Tensor> make_rows(int64_t rows, int64_t k, DType dtype, int64_t pad, int64_t offset, uint32_t seed) {
  const int64_t ld = k + pad;
  Tensor base = random_tensor({rows * ld + offset}, dtype, seed);
  return {base, Tensor::from_storage(base.storage(), {rows, k}, {ld, 1}, offset, dtype)};
}

TEST(QuantGroupCuda, EveryLayoutDTypeAndGroupSize) {
  struct Shape2 {
    int64_t rows, k;
  };
  const Shape2 shapes[] = {{1, 128}, {3, 384}, {64, 1024}, {65, 7168}, {1, 7168}, {3, 8192}, {4096, 512}, {65536, 128}};
  for (const Shape2& s : shapes) {
    for (int64_t g : {64, 128}) {
      for (DType in : {DType::kF32, DType::kF16, DType::kBF16}) {
        // Contiguous, 16-byte aligned strided rows, and misaligned rows (the generic kernel).
        for (auto [pad, offset] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {64, 0}, {3, 1}}) {
          if (s.rows * s.k > (1 << 20) && pad != 0) continue;
          const uint32_t seed = next_seed();
          const auto [base, x] = make_rows(s.rows, s.k, in, pad, offset, seed);
          for (DType out : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
            for (ScaleLayout layout : {ScaleLayout::kRowMajor, ScaleLayout::kColumnMajor, ScaleLayout::kTmaAligned}) {
              for (bool ue8m0 : {false, true}) {
                if (s.rows * s.k > (1 << 20) && (out == DType::kE4M3FNUZ || layout == ScaleLayout::kColumnMajor)) {
                  continue;
                }
                GroupCase gc;
                gc.group_size = g;
                gc.out = out;
                gc.layout = layout;
                gc.ue8m0 = ue8m0;
                check_group(base, x, gc, seed);
              }
            }
          }
        }
      }
    }
  }
}

TEST(QuantGroupCuda, OtherGroupSizesTakeTheGenericKernel) {
  for (int64_t g : {1, 3, 8, 32, 96, 256, 512}) {
    for (DType in : {DType::kF32, DType::kBF16}) {
      const uint32_t seed = next_seed();
      const auto [base, x] = make_rows(5, g * 7, in, 0, 0, seed);
      for (ScaleLayout layout : {ScaleLayout::kRowMajor, ScaleLayout::kTmaAligned}) {
        GroupCase gc;
        gc.group_size = g;
        gc.layout = layout;
        gc.ue8m0 = g == 96;
        check_group(base, x, gc, seed);
        gc.out = DType::kE4M3FNUZ;
        check_group(base, x, gc, seed);
      }
    }
  }
}

TEST(QuantGroupCuda, EdgeCases) {
  // NaN, infinities, zeros, an all-zero group (eps floor), ties, big values.
  const std::vector<float> specials = {NAN, 1.0f, -0.0f, 448.0f, 0.0f, -3.0f, 1e30f, 0x1p-10f};
  for (DType in : {DType::kF32, DType::kF16, DType::kBF16}) {
    Tensor x = Tensor::empty({4, 256}, in);
    for (int64_t i = 0; i < 4 * 256; ++i) {
      float v = specials[size_t(i) % specials.size()];
      if (i / 128 == 2) v = 0.0f;                                               // a zero group
      if (i == 3 * 128 + 5) v = INFINITY;                                       // an infinite group
      if (i / 128 == 7) v = (i % 2 ? -1.0f : 1.0f) * 0.5f * (448.0f + 416.0f);  // ties at 432
      store_float(x, i, v);
    }
    for (int64_t g : {64, 128}) {
      for (DType out : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
        for (bool ue8m0 : {false, true}) {
          GroupCase gc;
          gc.group_size = g;
          gc.out = out;
          gc.ue8m0 = ue8m0;
          check_group(x, x, gc, 0, "specials");
          gc.eps = 1e-45f;  // the floor underflows: s = 0 for zero groups, zero codes
          check_group(x, x, gc, 0, "specials, tiny eps");
        }
      }
    }
  }
}

// The public op on CUDA, on a user stream: the TMA-aligned layout's shape and strides, leading
// dimensions that need a copy first, a preallocated output.
TEST(QuantGroupCuda, PublicOpMatchesCpu) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const ForwardContext on_stream(Device::cuda(0), {}, Stream{stream});
  const uint32_t seed = next_seed();
  const Tensor x = random_tensor({5, 3, 512}, DType::kBF16, seed);
  const Tensor x_d = x.to(Device::cuda(0));
  for (bool transposed : {false, true}) {
    const Tensor xh = transposed ? x.transpose(0, 1) : x;  // [3, 5, 512] that does not collapse
    const Tensor xd = transposed ? x_d.transpose(0, 1) : x_d;
    ops::PerTokenGroupQuantOptions o;
    const ops::QuantResult want = ops::per_token_group_quant(ctx_of(xh), xh, o);
    poison_next_allocations({size_t(xh.numel()), size_t(xh.numel() / 128 * 4)});
    const ops::QuantResult got = ops::per_token_group_quant(on_stream, xd, o);
    stream_synchronize(on_stream.stream());
    const Case c{"per_token_group_quant (public)",
                 xh.shape(),
                 DType::kBF16,
                 DType::kE4M3FN,
                 seed,
                 transposed ? "copied leading dimensions" : ""};
    expect_same_tensor(c, "codes", got.q, want.q);
    expect_same_tensor(c, "scales", got.scale, want.scale);
  }
  for (int64_t m : {1, 5, 8}) {
    const Tensor x2 = random_tensor({m, 384}, DType::kF16, seed + uint32_t(m));
    ops::PerTokenGroupQuantOptions o;
    o.column_major_scales = true;
    o.tma_aligned_scales = true;
    o.output = poisoned({m, 384}, DType::kE4M3FN, Device::cuda(0), kPoisonCodes);
    const ops::QuantResult got = ops::per_token_group_quant(on_stream, x2.to(Device::cuda(0)), o);
    stream_synchronize(on_stream.stream());
    o.output = Tensor();
    const ops::QuantResult want = ops::per_token_group_quant(ctx_of(x2), x2, o);
    const Case c{"per_token_group_quant (public, TMA-aligned)", {m, 384}, DType::kF16, DType::kE4M3FN, seed, ""};
    EXPECT_EQ(got.scale.strides(), want.scale.strides());
    EXPECT_EQ(got.scale.strides(), (Shape{1, (m + 3) / 4 * 4}));
    expect_same_tensor(c, "codes", got.q, want.q);
    expect_same_tensor(c, "scales", got.scale, want.scale);
  }
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace fp8kit
