// reshape_and_cache_flash on the CPU (src/ops/kv_cache/): hand-computed bytes of the store
// formula (division, not a reciprocal multiply; saturation, NaN, signed zeros; e4m3 and e5m2),
// every byte of NHD / HND / interleaved caches against a scalar loop written here with its own
// index math, padding slots and trailing key rows left alone, per-head scales, the auto copy, and
// the argument errors with their texts.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "expect_error.h"
#include "fp8kit/fp8.h"
#include "fp8kit/ops/kv_cache.h"
#include "ops_test_util.h"

namespace fp8kit {
namespace {

using ops::KvCacheDtype;
using ops_test::make_tensor;
using testing::expect_error;
using testing::expect_invalid;

constexpr uint8_t kPoison = 0xA5;  // bytes of cache slots nothing may write
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

struct Caches {
  Tensor k, v;
};

// Zero-filled u8 NHD caches [blocks, block_size, heads, head_size] poisoned with kPoison.
Caches poisoned_caches(int64_t blocks, int64_t block_size, int64_t heads, int64_t head_size, DType dtype = DType::kU8) {
  Caches c{Tensor::empty({blocks, block_size, heads, head_size}, dtype),
           Tensor::empty({blocks, block_size, heads, head_size}, dtype)};
  c.k.fill_bytes_(kPoison);
  c.v.fill_bytes_(kPoison);
  return c;
}

// Stores one token of one head (values `xs`) with per-tensor scale `s` into slot 0 and returns
// the bytes.
std::vector<uint8_t> store_one(const std::vector<float>& xs, float s, KvCacheDtype dtype, DType src = DType::kF32) {
  ForwardContext ctx;
  const int64_t d = int64_t(xs.size());
  Tensor key = make_tensor(xs, {1, 1, d}, src);
  Caches c = poisoned_caches(1, 1, 1, d);
  ops::reshape_and_cache_flash(ctx, key, key, c.k, c.v, Tensor::from_vector<int64_t>({0}), dtype,
                               Tensor::from_vector<float>({s}), Tensor::from_vector<float>({s}));
  const auto* p = c.k.data<uint8_t>();
  std::vector<uint8_t> bytes(p, p + d);
  EXPECT_EQ(bytes, std::vector<uint8_t>(c.v.data<uint8_t>(), c.v.data<uint8_t>() + d));
  return bytes;
}

TEST(KvCacheDtype, ParsesVllmStrings) {
  EXPECT_EQ(ops::parse_kv_cache_dtype("auto"), KvCacheDtype::kAuto);
  EXPECT_EQ(ops::parse_kv_cache_dtype("fp8"), KvCacheDtype::kFp8E4M3);
  EXPECT_EQ(ops::parse_kv_cache_dtype("fp8_e4m3"), KvCacheDtype::kFp8E4M3);
  EXPECT_EQ(ops::parse_kv_cache_dtype("fp8_e5m2"), KvCacheDtype::kFp8E5M2);
  expect_invalid([] { ops::parse_kv_cache_dtype("fp8_inc"); }, "Unsupported data type of kv cache: fp8_inc");
  expect_invalid([] { ops::parse_kv_cache_dtype("int8"); }, "Unsupported data type of kv cache: int8");
}

TEST(ReshapeAndCacheFlash, HandComputedE4m3Bytes) {
  // scale 0.5: x / 0.5 = 2x.  1 -> 2 = 1.0 * 2^1: exponent 8, mantissa 0 -> 0 1000 000 = 0x40.
  // -2 -> -4 = 1.0 * 2^2 -> 1 1001 000 = 0xC8.  0.3 -> 0.6 = 1.2 * 2^-1: mantissa 0.2 * 8 = 1.6
  // rounds to 2 -> 0 0110 010 = 0x32 (0.625).  448 -> 896 saturates to 448 = 0x7E; -inf -> -448
  // = 0xFE; NaN -> 0x7F; +0 -> 0x00; -0 -> 0x80; -1e-4 -> -2e-4, below 2^-10 -> -0 = 0x80;
  // 0.00390625 -> 2^-7 = 4 * 2^-9, a subnormal -> 0 0000 100 = 0x04.
  const std::vector<float> xs = {1.0f, -2.0f, 0.3f, 448.0f, -kInf, kNaN, 0.0f, -0.0f, -1e-4f, 0.00390625f};
  const std::vector<uint8_t> expected = {0x40, 0xC8, 0x32, 0x7E, 0xFE, 0x7F, 0x00, 0x80, 0x80, 0x04};
  EXPECT_EQ(store_one(xs, 0.5f, KvCacheDtype::kFp8E4M3), expected);
  // "fp8" is e4m3: same bytes; scale 1.0 saturates 1000 to 448.
  EXPECT_EQ(store_one({1000.0f, -1000.0f}, 1.0f, ops::parse_kv_cache_dtype("fp8")), (std::vector<uint8_t>{0x7E, 0xFE}));
}

TEST(ReshapeAndCacheFlash, TrueDivisionNotReciprocal) {
  // x = 1.8750001f (bits 0x3FF00001), s = 0.3f: x / s = 6.25 exactly, a tie between 6 and 6.5
  // that rounds to even: 6 = 1.5 * 2^2 -> 0 1001 100 = 0x4C. x * (1 / s) = 6.2500005 would give
  // 6.5 = 0x4D (found by a search with numpy and ml_dtypes).
  const float x = std::bit_cast<float>(0x3FF00001u);
  ASSERT_EQ(x / 0.3f, 6.25f);
  ASSERT_EQ(float_to_e4m3fn_bits(x * (1.0f / 0.3f)), 0x4D);
  EXPECT_EQ(store_one({x}, 0.3f, KvCacheDtype::kFp8E4M3), std::vector<uint8_t>{0x4C});
}

TEST(ReshapeAndCacheFlash, HandComputedE5m2Bytes) {
  // scale 0.5: 1 -> 2 = 2^1: exponent 16 = 10000, mantissa 00 -> 0x40; -3 -> -6 = 1.5 * 2^2
  // -> 1 10001 10 = 0xC6; 1e6 -> 2e6 saturates to 57344 = 0x7B; -inf -> 0xFB; NaN -> 0x7F;
  // 2^-18 -> 2^-17, half the smallest subnormal 2^-16, a tie to even -> 0.
  const std::vector<float> xs = {1.0f, -3.0f, 1e6f, -kInf, kNaN, std::ldexp(1.0f, -18)};
  const std::vector<uint8_t> expected = {0x40, 0xC6, 0x7B, 0xFB, 0x7F, 0x00};
  EXPECT_EQ(store_one(xs, 0.5f, KvCacheDtype::kFp8E5M2), expected);
}

TEST(ReshapeAndCacheFlash, SixteenBitSourcesWidenExactly) {
  // bf16 0.3 is 0.30078125; / 0.5 = 0.6015625 -> 0x32 as before. f16 0.3 = 0.2999878 -> 0x32.
  EXPECT_EQ(store_one({0.3f, -2.0f}, 0.5f, KvCacheDtype::kFp8E4M3, DType::kBF16), (std::vector<uint8_t>{0x32, 0xC8}));
  EXPECT_EQ(store_one({0.3f, -2.0f}, 0.5f, KvCacheDtype::kFp8E4M3, DType::kF16), (std::vector<uint8_t>{0x32, 0xC8}));
}

// One store problem: token rows in a fused qkv buffer (strided), caches in one of three layouts,
// checked byte for byte against a loop with its own address arithmetic.
enum class Layout { kNHD, kHND, kInterleaved };

struct StoreCase {
  Layout layout = Layout::kNHD;
  DType src = DType::kBF16;
  KvCacheDtype cache_dtype = KvCacheDtype::kFp8E4M3;
  bool per_head_scales = false;
};

void run_store_case(const StoreCase& sc) {
  const int64_t blocks = 5, bs = 4, hkv = 3, d = 8, num_q_heads = 6;
  const int64_t key_rows = 9;  // rows of the qkv buffer; slot_mapping covers 7 of them
  const std::vector<int64_t> slots = {0, 19, -1, 7, 3, -1, 12};  // 19: the last slot of the last block
  const int64_t num_tokens = int64_t(slots.size());
  const bool fp8 = sc.cache_dtype != KvCacheDtype::kAuto;
  const DType cache_type = fp8 ? DType::kU8 : sc.src;
  const size_t esize = dtype_size(cache_type);

  // qkv [key_rows, (H + 2 Hkv) * D]: key = columns [H D, (H + Hkv) D), value the next Hkv D.
  const int64_t width = (num_q_heads + 2 * hkv) * d;
  std::vector<float> qkv_values = ops_test::normal_values(size_t(key_rows * width), 7, 3.0f);
  qkv_values[size_t(1 * width + num_q_heads * d + 2)] = kNaN;           // token 1, key head 0
  qkv_values[size_t(3 * width + (num_q_heads + hkv) * d + 5)] = -kInf;  // token 3, value head 0
  for (int64_t i = num_tokens * width; i < key_rows * width; ++i) qkv_values[size_t(i)] = kNaN;  // trailing rows
  Tensor qkv = make_tensor(qkv_values, {key_rows, width}, sc.src);
  // The key and value heads of each row, as [key_rows, hkv, d] views with row stride `width`.
  Tensor k3 = Tensor::from_storage(qkv.storage(), {key_rows, hkv, d}, {width, d, 1}, num_q_heads * d, sc.src);
  Tensor v3 = Tensor::from_storage(qkv.storage(), {key_rows, hkv, d}, {width, d, 1}, (num_q_heads + hkv) * d, sc.src);

  // Caches: NHD [blocks, bs, hkv, d]; HND memory [blocks, hkv, bs, d] seen transposed; interleaved
  // memory [blocks, 2, bs, hkv, d] (K and V of a block side by side, block_stride 2 bs hkv d).
  Tensor storage_k, storage_v, kc, vc;
  int64_t block_stride = 0, page_stride = 0, head_stride = 0;
  if (sc.layout == Layout::kInterleaved) {
    storage_k = Tensor::empty({blocks, 2, bs, hkv, d}, cache_type);
    storage_k.fill_bytes_(kPoison);
    storage_v = storage_k;
    kc = storage_k.select(1, 0);
    vc = storage_k.select(1, 1);
    block_stride = 2 * bs * hkv * d, page_stride = hkv * d, head_stride = d;
  } else if (sc.layout == Layout::kHND) {
    storage_k = Tensor::empty({blocks, hkv, bs, d}, cache_type);
    storage_v = Tensor::empty({blocks, hkv, bs, d}, cache_type);
    storage_k.fill_bytes_(kPoison);
    storage_v.fill_bytes_(kPoison);
    kc = storage_k.transpose(1, 2);
    vc = storage_v.transpose(1, 2);
    block_stride = hkv * bs * d, page_stride = d, head_stride = bs * d;
  } else {
    storage_k = Tensor::empty({blocks, bs, hkv, d}, cache_type);
    storage_v = Tensor::empty({blocks, bs, hkv, d}, cache_type);
    storage_k.fill_bytes_(kPoison);
    storage_v.fill_bytes_(kPoison);
    kc = storage_k, vc = storage_v;
    block_stride = bs * hkv * d, page_stride = hkv * d, head_stride = d;
  }
  ASSERT_EQ(kc.shape(), (Shape{blocks, bs, hkv, d}));
  ASSERT_EQ(kc.stride(0), block_stride);

  std::vector<float> ks = {0.05f}, vs = {0.02f};
  if (sc.per_head_scales) ks = {0.05f, 0.5f, 0.003f}, vs = {0.02f, 1.0f, 0.25f};
  const Tensor k_scale = Tensor::from_vector(ks), v_scale = Tensor::from_vector(vs);

  // The expected image of the cache memory: poison, then each kept token's bytes.
  const Tensor expected_k_mem = storage_k.clone(), expected_v_mem = storage_v.clone();
  auto* ek = static_cast<uint8_t*>(expected_k_mem.data_ptr());
  auto* ev = static_cast<uint8_t*>(expected_v_mem.data_ptr());
  const int64_t v_base = sc.layout == Layout::kInterleaved ? bs * hkv * d : 0;  // V's offset in the shared storage
  for (int64_t t = 0; t < num_tokens; ++t) {
    if (slots[size_t(t)] < 0) continue;
    const int64_t b = slots[size_t(t)] / bs, p = slots[size_t(t)] % bs;
    for (int64_t h = 0; h < hkv; ++h) {
      for (int64_t e = 0; e < d; ++e) {
        const float kx = ops_test::get_element(qkv, t * width + num_q_heads * d + h * d + e);
        const float vx = ops_test::get_element(qkv, t * width + (num_q_heads + hkv) * d + h * d + e);
        const int64_t at = b * block_stride + p * page_stride + h * head_stride + e;
        uint8_t* kdst = ek + at * int64_t(esize);
        uint8_t* vdst = (sc.layout == Layout::kInterleaved ? ek : ev) + (at + v_base) * int64_t(esize);
        if (!fp8) {
          const auto* ksrc =
              static_cast<const uint8_t*>(qkv.data_ptr()) + (t * width + num_q_heads * d + h * d + e) * int64_t(esize);
          const auto* vsrc = ksrc + hkv * d * int64_t(esize);
          std::memcpy(kdst, ksrc, esize);
          std::memcpy(vdst, vsrc, esize);
          continue;
        }
        const float sk = ks[ks.size() == 1 ? 0 : size_t(h)], sv = vs[vs.size() == 1 ? 0 : size_t(h)];
        const bool e5m2 = sc.cache_dtype == KvCacheDtype::kFp8E5M2;
        *kdst = e5m2 ? float_to_e5m2_bits(kx / sk) : float_to_e4m3fn_bits(kx / sk);
        *vdst = e5m2 ? float_to_e5m2_bits(vx / sv) : float_to_e4m3fn_bits(vx / sv);
      }
    }
  }

  ForwardContext ctx;
  ops::reshape_and_cache_flash(ctx, k3, v3, kc, vc, Tensor::from_vector(slots), sc.cache_dtype, k_scale, v_scale);
  const size_t nbytes = storage_k.nbytes();
  EXPECT_EQ(std::memcmp(storage_k.data_ptr(), expected_k_mem.data_ptr(), nbytes), 0);
  if (sc.layout != Layout::kInterleaved) {
    EXPECT_EQ(std::memcmp(storage_v.data_ptr(), expected_v_mem.data_ptr(), nbytes), 0);
  }
  // The NaN key and the -inf value landed as 0x7F and -max.
  if (fp8 && sc.layout == Layout::kNHD) {
    const bool e5m2 = sc.cache_dtype == KvCacheDtype::kFp8E5M2;
    EXPECT_EQ(kc.data<uint8_t>()[(19 / bs) * block_stride + (19 % bs) * page_stride + 2], 0x7F);
    EXPECT_EQ(vc.data<uint8_t>()[(7 / bs) * block_stride + (7 % bs) * page_stride + 5], e5m2 ? 0xFB : 0xFE);
  }
  // Untouched slots keep the poison: slot 1 of block 0, for instance.
  EXPECT_EQ(static_cast<const uint8_t*>(kc.data_ptr())[1 * page_stride * int64_t(esize)], kPoison);
}

TEST(ReshapeAndCacheFlash, NhdLayoutEveryDtype) {
  for (DType src : ops_test::kFloatDTypes) {
    for (KvCacheDtype cd : {KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2, KvCacheDtype::kAuto}) {
      SCOPED_TRACE(std::string(dtype_name(src)) + " -> " + ops::kv_cache_dtype_name(cd));
      run_store_case({Layout::kNHD, src, cd, false});
    }
  }
}

TEST(ReshapeAndCacheFlash, HndLayoutWithPerHeadScales) {
  for (DType src : ops_test::kFloatDTypes) {
    SCOPED_TRACE(dtype_name(src));
    run_store_case({Layout::kHND, src, KvCacheDtype::kFp8E4M3, true});
    run_store_case({Layout::kHND, src, KvCacheDtype::kAuto, false});
  }
}

TEST(ReshapeAndCacheFlash, InterleavedBlocksBlockStrideNotDense) {
  run_store_case({Layout::kInterleaved, DType::kBF16, KvCacheDtype::kFp8E4M3, true});
  run_store_case({Layout::kInterleaved, DType::kF16, KvCacheDtype::kFp8E5M2, false});
  run_store_case({Layout::kInterleaved, DType::kF32, KvCacheDtype::kAuto, false});
}

TEST(ReshapeAndCacheFlash, FP8DtypedCachesAndEmptySlotMapping) {
  ForwardContext ctx;
  Tensor key = make_tensor({2.0f, -1.0f}, {1, 1, 2}, DType::kBF16);
  Caches c = poisoned_caches(1, 2, 1, 2, DType::kE4M3FN);
  const Tensor one = Tensor::from_vector<float>({1.0f});
  ops::reshape_and_cache_flash(ctx, key, key, c.k, c.v, Tensor::from_vector<int64_t>({1}), KvCacheDtype::kFp8E4M3, one,
                               one);
  EXPECT_EQ(c.k.data<Float8E4M3FN>()[2].bits, 0x40);  // slot 1, element 0: 2.0
  EXPECT_EQ(c.k.data<Float8E4M3FN>()[3].bits, 0xB8);  // -1.0
  EXPECT_EQ(c.k.data<Float8E4M3FN>()[0].bits, kPoison);
  // No tokens: nothing written, no error (even with more key rows).
  ops::reshape_and_cache_flash(ctx, key, key, c.k, c.v, Tensor::from_vector<int64_t>({}), KvCacheDtype::kFp8E4M3, one,
                               one);
  EXPECT_EQ(c.k.data<Float8E4M3FN>()[0].bits, kPoison);
}

TEST(ReshapeAndCacheFlash, Errors) {
  ForwardContext ctx;
  const std::string op = "reshape_and_cache_flash: ";
  Tensor key = make_tensor(std::vector<float>(12, 1.0f), {2, 2, 3}, DType::kBF16);
  Caches c = poisoned_caches(2, 4, 2, 3);
  const Tensor slots = Tensor::from_vector<int64_t>({0, 5});
  const Tensor s1 = Tensor::from_vector<float>({1.0f});
  const auto fp8 = KvCacheDtype::kFp8E4M3;
  auto call = [&](const Tensor& k, const Tensor& v, const Tensor& kc, const Tensor& vc, const Tensor& sm,
                  KvCacheDtype dt, const Tensor& ks, const Tensor& vs) {
    return [=, &ctx] { ops::reshape_and_cache_flash(ctx, k, v, kc, vc, sm, dt, ks, vs); };
  };
  expect_invalid(call(key, make_tensor(std::vector<float>(12), {2, 2, 3}, DType::kF16), c.k, c.v, slots, fp8, s1, s1),
                 op + "`value` must have the dtype of `key` (bf16), got f16[2, 2, 3] on cpu");
  expect_invalid(call(key, make_tensor(std::vector<float>(6), {1, 2, 3}, DType::kBF16), c.k, c.v, slots, fp8, s1, s1),
                 op + "`key` [2, 2, 3] and `value` [1, 2, 3] must have one shape");
  Tensor key4 = make_tensor(std::vector<float>(16), {2, 2, 4}, DType::kBF16);
  expect_invalid(
      call(key4, key4, c.k, c.v, slots, fp8, s1, s1),
      op + "`key` must be [num_tokens, 2, 3] to match the caches (num_kv_heads, head_size), got bf16[2, 2, 4] on cpu");
  Caches small = poisoned_caches(1, 4, 2, 3);
  expect_invalid(call(key, key, c.k, small.v, slots, fp8, s1, s1),
                 op + "`key_cache` [2, 4, 2, 3] and `value_cache` [1, 4, 2, 3] must have one shape [num_blocks, "
                      "block_size, num_kv_heads, head_size]");
  expect_invalid(
      call(key, key, c.k, c.v, slots, KvCacheDtype::kAuto, s1, s1),
      op + "with kv_cache_dtype auto, `key_cache` must be bf16 (the dtype of the keys), got u8[2, 4, 2, 3] on cpu");
  Caches bf = poisoned_caches(2, 4, 2, 3, DType::kBF16);
  expect_invalid(call(key, key, bf.k, bf.v, slots, fp8, s1, s1),
                 op + "with kv_cache_dtype fp8_e4m3, `key_cache` must be u8 or e4m3fn, got bf16[2, 4, 2, 3] on cpu");
  Caches e4 = poisoned_caches(2, 4, 2, 3, DType::kE4M3FN);
  expect_invalid(call(key, key, e4.k, e4.v, slots, KvCacheDtype::kFp8E5M2, s1, s1),
                 op + "with kv_cache_dtype fp8_e5m2, `key_cache` must be u8 or e5m2, got e4m3fn[2, 4, 2, 3] on cpu");
  const Tensor s3 = Tensor::from_vector<float>({1, 1, 1}), s2 = Tensor::from_vector<float>({1, 1});
  expect_invalid(call(key, key, c.k, c.v, slots, fp8, s3, s3),
                 op + "k_scale and v_scale must be of shape [1] or [num_heads] (num_heads = 2), got [3] and [3]");
  expect_invalid(call(key, key, c.k, c.v, slots, fp8, s1, s2),
                 op + "k_scale and v_scale must be of shape [1] or [num_heads] (num_heads = 2), got [1] and [2]");
  expect_invalid(call(key, key, c.k, c.v, slots, fp8, Tensor(), s1), op + "`k_scale` is an undefined tensor");
  expect_invalid(call(key, key, c.k, c.v, slots, fp8, make_tensor({1.0f}, {1}, DType::kBF16),
                      make_tensor({1.0f}, {1}, DType::kBF16)),
                 op + "`k_scale` must be f32, got bf16[1] on cpu");
  expect_invalid(call(key, key, c.k, c.v, Tensor::from_vector<int64_t>({0, 8}), fp8, s1, s1),
                 op + "slot_mapping[1] = 8 is beyond the cache (2 blocks of 4 = 8 slots)");
  expect_invalid(call(key, key, c.k, c.v, Tensor::from_vector<int32_t>({0, 1}), fp8, s1, s1),
                 op + "`slot_mapping` must be a contiguous i64 tensor, got i32[2] on cpu");
  expect_invalid(call(key, key, c.k, c.v, Tensor::from_vector<int64_t>({0, 1, 2}), fp8, s1, s1),
                 op + "`slot_mapping` has 3 tokens but `key` only 2 rows");
  expect_invalid(
      call(key, key, c.k.narrow(3, 1, 2), c.v.narrow(3, 1, 2), slots, fp8, s1, s1),
      op + "`key` must be [num_tokens, 2, 2] to match the caches (num_kv_heads, head_size), got bf16[2, 2, 3] on cpu");
  Tensor wide = Tensor::empty({2, 4, 2, 6}, DType::kU8);
  Tensor strided = Tensor::from_storage(wide.storage(), {2, 4, 2, 3}, {48, 12, 6, 2}, 0, DType::kU8);
  expect_invalid(call(key, key, strided, strided, slots, fp8, s1, s1),
                 op + "the last dimension of `key_cache` must be contiguous, got strides [48, 12, 6, 2]");
  expect_error(call(ops_test::fake_cuda_tensor({2, 2, 3}, DType::kBF16), key, c.k, c.v, slots, fp8, s1, s1),
               ErrorCode::kInvalidArgument, op + "`key` is on cuda:0 but the context is on cpu");
}

TEST(ReshapeAndCacheFlash, CudaTensorsHaveNoKernelYet) {
  ForwardContext ctx(Device::cuda(0));
  auto cu = [](const Shape& s, DType d) { return ops_test::fake_cuda_tensor(s, d); };
  expect_error(
      [&] {
        ops::reshape_and_cache_flash(ctx, cu({2, 2, 3}, DType::kBF16), cu({2, 2, 3}, DType::kBF16),
                                     cu({2, 4, 2, 3}, DType::kU8), cu({2, 4, 2, 3}, DType::kU8), cu({2}, DType::kI64),
                                     KvCacheDtype::kFp8E4M3, cu({1}, DType::kF32), cu({1}, DType::kF32));
      },
      ErrorCode::kUnsupported, "reshape_and_cache_flash: no CUDA kernel yet");
}

}  // namespace
}  // namespace fp8kit
