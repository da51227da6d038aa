// reshape_and_cache_flash on CUDA against the CPU reference (src/ops/kv_cache/kv_cache_ref.cpp),
// byte for byte over the whole cache memory: every source dtype into auto / e4m3 / e5m2 caches,
// NHD, HND and block-interleaved layouts (K and V in one buffer), per-tensor and per-head scales,
// the 16-byte and the element path (odd head sizes, misaligned rows), strided source rows,
// padding slots and slots past the cache (skipped on CUDA; the CPU entry refuses them), FP8
// rounding ties, NaN / inf / overflow / signed zeros; the cache is poisoned first, so a byte
// written outside the named slots shows. Also a large batch and a CUDA-graph capture.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/cuda/cuda_check.h"
#include "fp8kit/ops/kv_cache.h"
#include "fp8kit/platform.h"
#include "gpu_test_util.h"

namespace fp8kit {
namespace {

using namespace gpu_test;
using ops::KvCacheDtype;

enum class Layout { kNhd, kHnd, kInterleaved };
const char* layout_name(Layout l) { return l == Layout::kNhd ? "NHD" : l == Layout::kHnd ? "HND" : "interleaved"; }

struct StoreCase {
  DType src = DType::kBF16;
  KvCacheDtype cache = KvCacheDtype::kFp8E4M3;
  Layout layout = Layout::kNhd;
  bool per_head = false;
  bool power_of_two_scales = false;  // ties of the FP8 grid stay ties after the division
  int64_t tokens = 37, extra_key_rows = 3, num_kv_heads = 4, head_size = 128, block_size = 16, num_blocks = 13;
  int64_t src_offset = 0;  // elements the key rows start into their buffer (1: misaligned rows)
  bool fused_rows = true;  // key and value rows inside one wider qkv-like buffer
  uint32_t seed = 0;
  std::string str() const {
    return std::string(dtype_name(src)) + " -> " + ops::kv_cache_dtype_name(cache) + " " + layout_name(layout) +
           (per_head ? " per-head" : " per-tensor") + (power_of_two_scales ? " pow2" : "") + " tokens " +
           std::to_string(tokens) + " Hkv " + std::to_string(num_kv_heads) + " D " + std::to_string(head_size) +
           " B " + std::to_string(block_size) + " offset " + std::to_string(src_offset) + " seed " +
           std::to_string(seed);
  }
};

// FP8 values at and between codes (ties), times the scale, so the division lands on them; and the
// special values of the store's contract.
void fill_values(Tensor& t, const StoreCase& c, const std::vector<float>& scales, int64_t row_width) {
  std::mt19937 rng(c.seed + 17);
  std::uniform_int_distribution<int> pick(0, 31);
  std::uniform_int_distribution<int> code(0, 0x7d);
  const bool e5m2 = c.cache == KvCacheDtype::kFp8E5M2;
  const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 0.0f, -0.0f, -1e-30f, 1e-30f};
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int p = pick(rng);
    const int64_t head = (i % row_width) / c.head_size % c.num_kv_heads;
    const float s = scales[scales.size() == 1 ? 0 : size_t(head)];
    if (p == 0) {
      store_float(t, i, specials[size_t(i) % std::size(specials)]);
    } else if (p <= 4) {
      const int k = code(rng);
      const float lo = e5m2 ? e5m2_bits_to_float(uint8_t(k % 0x7b)) : e4m3fn_bits_to_float(uint8_t(k));
      const float hi = e5m2 ? e5m2_bits_to_float(uint8_t(k % 0x7b + 1)) : e4m3fn_bits_to_float(uint8_t(k + 1));
      float x = p <= 2 ? 0.5f * (lo + hi) : lo;
      if (p % 2) x = -x;
      store_float(t, i, x * s);
    } else {
      std::normal_distribution<float> normal(0.0f, 200.0f * s);
      store_float(t, i, normal(rng));
    }
  }
}

void check_store(const StoreCase& c) {
  SCOPED_TRACE(c.str());
  const int64_t T = c.tokens, rows = c.tokens + c.extra_key_rows, H = c.num_kv_heads, D = c.head_size;
  const int64_t B = c.block_size, NB = c.num_blocks;
  const bool fp8 = c.cache != KvCacheDtype::kAuto;
  std::mt19937 rng(c.seed);

  // Scales (dequantization multipliers).
  std::vector<float> scales;
  std::uniform_real_distribution<float> u(0.004f, 0.05f);
  for (int64_t h = 0; h < (c.per_head ? H : 1); ++h) {
    scales.push_back(c.power_of_two_scales ? std::ldexp(1.0f, -int(h % 5) - 3) : u(rng));
  }
  std::vector<float> v_scales = scales;
  for (float& s : v_scales) s *= c.power_of_two_scales ? 2.0f : 1.37f;
  const Tensor k_scale = Tensor::from_vector(scales), v_scale = Tensor::from_vector(v_scales);

  // Key and value rows: [rows, H, D] views of one buffer (a fused qkv output) or two.
  const int64_t width = c.fused_rows ? 3 * H * D + 8 : H * D;
  Tensor buf = Tensor::empty({rows * width + c.src_offset + H * D}, c.src);
  fill_values(buf, c, scales, width);
  const Tensor key = Tensor::from_storage(buf.storage(), {rows, H, D}, {width, D, 1}, c.src_offset, c.src);
  Tensor vbuf = c.fused_rows ? buf : Tensor::empty({rows * width + c.src_offset}, c.src);
  if (!c.fused_rows) fill_values(vbuf, c, v_scales, width);
  const Tensor value = Tensor::from_storage(vbuf.storage(), {rows, H, D}, {width, D, 1},
                                            c.src_offset + (c.fused_rows ? H * D : 0), c.src);

  // Caches: one poisoned buffer each (interleaved: K and V blocks alternate in one buffer).
  const DType cache_type = fp8 ? (c.cache == KvCacheDtype::kFp8E5M2 ? DType::kE5M2 : DType::kE4M3FN) : c.src;
  const int64_t block = B * H * D;
  const int64_t cache_elems = c.layout == Layout::kInterleaved ? 2 * NB * block : NB * block;
  Tensor kbase = poisoned({cache_elems}, cache_type, Device::cpu(), kPoisonCodes);
  Tensor vbase = c.layout == Layout::kInterleaved ? kbase : poisoned({cache_elems}, cache_type, Device::cpu(), 0x5A);
  Shape strides = {block, H * D, D, 1};
  if (c.layout == Layout::kHnd) strides = {block, D, B * D, 1};
  if (c.layout == Layout::kInterleaved) strides = {2 * block, H * D, D, 1};
  auto cache_view = [&](const Tensor& base, int64_t offset) {
    return Tensor::from_storage(base.storage(), {NB, B, H, D}, strides, offset, cache_type);
  };
  const int64_t v_offset = c.layout == Layout::kInterleaved ? block : 0;

  // Slots: distinct, shuffled, every 8th token padding (-1); on CUDA one slot past the cache.
  std::vector<int64_t> all(size_t(NB * B));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int64_t> slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) slots[size_t(t)] = t % 8 == 5 ? -1 : all[size_t(t)];
  std::vector<int64_t> device_slots = slots;
  if (T > 2) device_slots[2] = NB * B + 3;  // skipped by the kernel
  std::vector<int64_t> host_slots = slots;
  if (T > 2) host_slots[2] = -1;

  // Reference on the host image.
  Tensor want_k = kbase.clone();
  Tensor want_v = c.layout == Layout::kInterleaved ? want_k : vbase.clone();
  ops::reshape_and_cache_flash(ctx_of(key), key, value, cache_view(want_k, 0), cache_view(want_v, v_offset),
                               Tensor::from_vector(host_slots), c.cache, k_scale, v_scale);

  // CUDA on device copies of the same images.
  const Tensor kbase_d = kbase.to(Device::cuda(0));
  const Tensor vbase_d = c.layout == Layout::kInterleaved ? kbase_d : vbase.to(Device::cuda(0));
  ops::reshape_and_cache_flash(cuda_ctx(), device_view(buf, key), device_view(vbuf, value), cache_view(kbase_d, 0),
                               cache_view(vbase_d, v_offset), Tensor::from_vector(device_slots).to(Device::cuda(0)),
                               c.cache, k_scale.to(Device::cuda(0)), v_scale.to(Device::cuda(0)));
  const Case kc{"reshape_and_cache_flash", {T, H, D}, c.src, cache_type, c.seed, c.str()};
  expect_same(kc, "key cache memory", raw_bytes(kbase_d), raw_bytes(want_k), 1);
  if (c.layout != Layout::kInterleaved) expect_same(kc, "value cache memory", raw_bytes(vbase_d), raw_bytes(want_v), 1);
}

TEST(KvCacheCuda, BitExactEveryDtypeCacheLayoutAndScale) {
  for (DType src : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (KvCacheDtype cache : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2}) {
      for (Layout layout : {Layout::kNhd, Layout::kHnd, Layout::kInterleaved}) {
        for (bool per_head : {false, true}) {
          for (bool pow2 : {false, true}) {
            if (cache == KvCacheDtype::kAuto && (per_head || pow2)) continue;  // scales are ignored
            StoreCase c;
            c.src = src, c.cache = cache, c.layout = layout, c.per_head = per_head, c.power_of_two_scales = pow2;
            c.seed = next_seed();
            check_store(c);
          }
        }
      }
    }
  }
}

TEST(KvCacheCuda, ElementPathOddHeadSizesAndMisalignedRows) {
  for (KvCacheDtype cache : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2}) {
    for (int64_t d : {1, 5, 8, 24, 72, 128}) {
      for (int64_t offset : {0, 1}) {
        StoreCase c;
        c.cache = cache, c.head_size = d, c.src_offset = offset, c.num_kv_heads = 3, c.block_size = 5;
        c.layout = d == 72 ? Layout::kHnd : Layout::kNhd;
        c.fused_rows = offset == 1;
        c.seed = next_seed();
        check_store(c);
      }
    }
  }
}

TEST(KvCacheCuda, LargeBatchAndEmptySlots) {
  StoreCase c;
  c.tokens = 8192, c.num_kv_heads = 8, c.head_size = 128, c.block_size = 16, c.num_blocks = 520;
  c.seed = next_seed();
  check_store(c);
  c.tokens = 0, c.extra_key_rows = 2, c.num_blocks = 2;
  check_store(c);
}

// Captured once on a user stream and replayed over new rows and slots: nothing on the host.
TEST(KvCacheCuda, CapturesIntoACudaGraph) {
  if (cuda::debug_sync_enabled()) GTEST_SKIP() << "FP8KIT_DEBUG_SYNC synchronizes inside the capture";
  cudaStream_t stream = nullptr;
  FP8KIT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Stream s{stream};
  const ForwardContext on_stream(Device::cuda(0), {}, s);
  const int64_t T = 16, H = 8, D = 128, B = 16, NB = 8;
  const Device gpu = Device::cuda(0);
  Tensor key = Tensor::empty({T, H, D}, DType::kBF16, gpu), value = Tensor::empty({T, H, D}, DType::kBF16, gpu);
  Tensor kc = Tensor::empty({NB, B, H, D}, DType::kU8, gpu), vc = Tensor::empty({NB, B, H, D}, DType::kU8, gpu);
  Tensor slots = Tensor::empty({T}, DType::kI64, gpu);
  const Tensor ks = Tensor::from_vector(std::vector<float>{0.02f}).to(gpu);
  const Tensor vs = Tensor::from_vector(std::vector<float>{0.03f}).to(gpu);
  FP8KIT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  ops::reshape_and_cache_flash(on_stream, key, value, kc, vc, slots, KvCacheDtype::kFp8E4M3, ks, vs);
  cudaGraph_t graph = nullptr;
  FP8KIT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  FP8KIT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    const uint32_t seed = next_seed();
    const Tensor k_h = random_tensor({T, H, D}, DType::kBF16, seed), v_h = random_tensor({T, H, D}, DType::kBF16, seed + 1);
    std::vector<int64_t> sl(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) sl[size_t(t)] = (t * 7 + replay * 3) % (NB * B);
    const Tensor sl_h = Tensor::from_vector(sl);
    key.copy_(k_h, s), value.copy_(v_h, s), slots.copy_(sl_h, s);
    kc.fill_bytes_(kPoisonCodes, s), vc.fill_bytes_(kPoisonCodes, s);
    FP8KIT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    stream_synchronize(s);
    Tensor want_k = poisoned({NB, B, H, D}, DType::kU8, Device::cpu(), kPoisonCodes);
    Tensor want_v = poisoned({NB, B, H, D}, DType::kU8, Device::cpu(), kPoisonCodes);
    ops::reshape_and_cache_flash(ctx_of(k_h), k_h, v_h, want_k, want_v, sl_h, KvCacheDtype::kFp8E4M3,
                                 Tensor::from_vector(std::vector<float>{0.02f}),
                                 Tensor::from_vector(std::vector<float>{0.03f}));
    const Case c{"reshape_and_cache_flash in a CUDA graph", {T, H, D}, DType::kBF16, DType::kU8, seed,
                 "replay " + std::to_string(replay)};
    expect_same_tensor(c, "key cache", kc, want_k);
    expect_same_tensor(c, "value cache", vc, want_v);
  }
  FP8KIT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  FP8KIT_CUDA_CHECK(cudaGraphDestroy(graph));
  FP8KIT_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace fp8kit
