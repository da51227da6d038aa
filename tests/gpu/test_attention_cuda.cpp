// paged_attention on CUDA (src/ops/attention/attention_cuda.cu and its kernels): the benches of
// tests/cpu/paged_attention_test_util.h (random block placement, caches poisoned wherever no
// visible key lives, strided q and fused k/v rows), moved to the device, run through the public
// entry on a CUDA context whose workspace is poisoned, then checked: the cache bytes the store
// wrote against fp8.h, every output against the direct reference in double within the CPU tests'
// calibrated bound (a NaN fails it), widened for the tensor-core kernel by what it does
// differently (attention_mma.cuh: P rounded to 16 bits, f16 for an FP8 cache's decode; f32
// accumulation in the tensor cores),
// and kFp8Compute against the FP8 emulation of paged_attention_fp8_test_util.h. Each case runs on
// the kernels the plan picks and on forced ones (FP8KIT_ATTENTION_KERNEL / _SPLITS overrides).
// Failures name the problem (dtypes, heads, block size, sequences, seed), the kernel and splits,
// and the first outputs out of bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/cuda/cuda_check.h"
#include "expect_error.h"
#include "fp8kit/platform.h"
#include "gpu_test_util.h"
#include "paged_attention_fp8_test_util.h"

namespace fp8kit {
namespace {

using attention_test::Bench;
using attention_test::Problem;
using attention_test::SeqSpec;
using namespace gpu_test;
using ops::AttentionReadMode;
using ops::KvCacheDtype;

const Device kGpu = Device::cuda(0);

// The whole buffer under a view, as a flat contiguous tensor of its dtype (device_view's base).
Tensor flat(const Tensor& t) {
  return Tensor::from_storage(t.storage(), {int64_t(t.storage()->nbytes() / t.element_size())}, {1}, 0, t.dtype());
}
Tensor on_device(const Tensor& t) { return t.defined() ? device_view(flat(t), t) : Tensor(); }

// A host NHD cache [nb, B, Hkv, D] as a device HND cache (memory [nb, Hkv, B, D], the logical
// shape kept), and back.
Tensor to_device_hnd(const Tensor& nhd) {
  const int64_t nb = nhd.size(0), B = nhd.size(1), H = nhd.size(2), D = nhd.size(3);
  Tensor mem = Tensor::empty({nb, H, B, D}, nhd.dtype());
  const size_t e = nhd.element_size();
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t t = 0; t < B; ++t)
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(static_cast<uint8_t*>(mem.data_ptr()) + size_t(((b * H + h) * B + t) * D) * e,
                    static_cast<const uint8_t*>(nhd.data_ptr()) + size_t(((b * B + t) * H + h) * D) * e, size_t(D) * e);
  const Tensor dev = mem.to(kGpu);
  return Tensor::from_storage(dev.storage(), {nb, B, H, D}, {H * B * D, D, B * D, 1}, 0, nhd.dtype());
}
Tensor nhd_image(const Tensor& cache) { return to_host(cache).contiguous(); }

struct KernelRun {
  AttentionKernelOverride kernel = AttentionKernelOverride::kAuto;
  int splits = 0;
  bool hnd = false;
  bool preallocated_out = false;
  std::string str() const {
    const char* k = kernel == AttentionKernelOverride::kSimt  ? "simt"
                    : kernel == AttentionKernelOverride::kMma ? "mma"
                                                                   : "auto";
    return std::string("kernel ") + k + ", splits " + (splits ? std::to_string(splits) : "auto") +
           (hnd ? ", HND caches" : "") + (preallocated_out ? ", preallocated out" : "");
  }
};

// Whether the tensor-core kernel serves the problem (the plan's rule, attention_plan.cpp).
bool takes_mma(const Problem& p, const KernelRun& r) {
  if (r.kernel == AttentionKernelOverride::kSimt) return false;
  const bool ok = (p.dtype == DType::kBF16 || p.dtype == DType::kF16) &&
                  (p.head_size == 64 || p.head_size == 128 || p.head_size == 256) &&
                  p.options.read_mode == AttentionReadMode::kDequantize;
  return ok || r.kernel == AttentionKernelOverride::kMma;
}

attention_test::BoundOptions bound_for(const Problem& p, const KernelRun& r) {
  attention_test::BoundOptions o;
  if (takes_mma(p, r)) {
    o.dot_factor = 2.0;
    o.p_unit_roundoff = p.dtype == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    o.p_absolute = p.dtype == DType::kBF16 ? 0.0 : std::ldexp(1.0, -25);
    // The decode kernel rounds P of an FP8 cache as f16(P * 2^8) whatever q's type: below 2^-22
    // an f16 subnormal, at most 2^-25 * 2^-8 off.
    if (p.cache_dtype != KvCacheDtype::kAuto) o.p_absolute = std::max(o.p_absolute, std::ldexp(1.0, -33));
  }
  return o;
}

// The bench's call on the device: returns the outputs as floats; checks the cache bytes.
std::vector<float> run_on_device(Bench& b, const KernelRun& r) {
  Overrides o;
  o.attention_kernel = r.kernel;
  o.attention_splits = r.splits;
  const ForwardContext ctx = poisoned_context(size_t(64) << 20, o, 0xff);
  ops::PagedKvCache cache = b.cache;
  cache.key_cache = r.hnd ? to_device_hnd(b.cache.key_cache) : b.cache.key_cache.to(kGpu);
  cache.value_cache = r.hnd ? to_device_hnd(b.cache.value_cache) : b.cache.value_cache.to(kGpu);
  cache.k_scale = b.cache.k_scale.to(kGpu), cache.v_scale = b.cache.v_scale.to(kGpu);
  ops::AttentionMetadata md;
  md.query_start_loc = b.md.query_start_loc.to(kGpu);
  md.seq_lens = b.md.seq_lens.to(kGpu);
  md.block_table = on_device(b.md.block_table);
  md.slot_mapping = b.md.slot_mapping.defined() ? b.md.slot_mapping.to(kGpu) : Tensor();
  ops::PagedAttentionOptions opts = b.p.options;
  if (opts.q_scale.defined()) opts.q_scale = opts.q_scale.to(kGpu);
  if (r.preallocated_out) opts.out = poisoned({b.num_tokens(), b.p.num_heads, b.p.head_size}, b.p.dtype, kGpu, 0xff);
  const Tensor out = ops::paged_attention(ctx, on_device(b.q), on_device(b.k), on_device(b.v), cache, md, opts);
  if (r.preallocated_out) {
    EXPECT_EQ(out.data_ptr(), opts.out.data_ptr());
  }
  const Case c{"paged_attention", {b.num_tokens(), b.p.num_heads, b.p.head_size}, b.p.dtype, b.cache.key_cache.dtype(),
               b.p.seed, b.p.describe() + "; " + r.str()};
  expect_same(c, "key cache bytes", raw_bytes(nhd_image(cache.key_cache)), raw_bytes(b.expected_key_cache), 1);
  expect_same(c, "value cache bytes", raw_bytes(nhd_image(cache.value_cache)), raw_bytes(b.expected_value_cache), 1);
  return ops_test::to_floats(to_host(out));
}

// kDequantize: against the dense reference; returns the calibration (max |error| / tolerance).
attention_test::Calibration check(const Problem& p, const KernelRun& r) {
  Bench b = attention_test::build(p);
  SCOPED_TRACE(p.describe() + "; " + r.str());
  const std::vector<float> got = run_on_device(b, r);
  return attention_test::check_outputs(b, got, attention_test::dense_reference(b, bound_for(p, r)));
}

void report(const char* what, const attention_test::Calibration& c) {
  std::printf("[ calib    ] %s: max |error| / tolerance = %.3g; f32 outputs: max |error| / f32 bound = %.3g\n", what,
              c.worst, c.worst_f32);
}

const KernelRun kAuto{}, kSimt{AttentionKernelOverride::kSimt};

std::vector<SeqSpec> mixed_batch(int64_t B) {
  return {{0, 7}, {13, 1}, {B, 5}, {5, B}, {0, 1}, {2 * B - 3, B + 1}, {3, 2}, {100, 1}, {47, 33}};
}

TEST(AttentionCuda, MixedBatchEveryDtypeCacheAndKernel) {
  attention_test::Calibration mma, simt;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (KvCacheDtype cd : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2}) {
      for (const KernelRun& r : {kAuto, kSimt}) {
        Problem p;
        p.seqs = mixed_batch(16);
        p.dtype = dt, p.cache_dtype = cd;
        p.padding_rows = 3;
        p.seed = next_seed();
        (takes_mma(p, r) ? mma : simt).merge(check(p, r));
      }
    }
  }
  report("mixed batch, tensor cores", mma);
  report("mixed batch, CUDA cores", simt);
}

TEST(AttentionCuda, DecodeLongContextsSplitAndCombine) {
  attention_test::Calibration worst;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (KvCacheDtype cd : {KvCacheDtype::kFp8E4M3, KvCacheDtype::kAuto}) {
      // 40 and 64 splits: the combine's second split a lane (kCombineSplitsPerLane), and splits
      // that see no key of the short sequences.
      for (KernelRun r : {KernelRun{}, KernelRun{AttentionKernelOverride::kAuto, 1}, KernelRun{AttentionKernelOverride::kAuto, 7},
                    KernelRun{AttentionKernelOverride::kSimt, 5}, KernelRun{AttentionKernelOverride::kAuto, 64},
                    KernelRun{AttentionKernelOverride::kSimt, 40}}) {
        Problem p;
        p.seqs = {{1000, 1}, {3000, 1}, {37, 1}, {4095, 1}, {0, 1}, {1, 1}};
        p.num_heads = 32, p.num_kv_heads = 8, p.head_size = 128;  // Llama-3-8B
        p.dtype = dt, p.cache_dtype = cd;
        p.seed = next_seed();
        worst.merge(check(p, r));
      }
    }
  }
  report("decode, long contexts", worst);
}

// An FP8 cache's decode kernel multiplies f16 operands: a bf16 q row is scaled by a power of two
// into f16's range (clamped to 2^+-100) and its logit scale by the inverse. Queries from 2^-90 to
// 2^60 (the softmax scale compensating, so the logits keep their spread) against the reference,
// decode and a short prefill, both FP8 formats, GQA and head sizes 64 and 128, split and not.
TEST(AttentionCuda, Fp8CacheDecodeQueriesOfAnyMagnitude) {
  attention_test::Calibration worst;
  for (int e : {-90, -40, 0, 30, 60}) {
    for (KvCacheDtype cd : {KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2}) {
      for (int64_t d : {64, 128}) {
        for (const KernelRun& r : {kAuto, KernelRun{AttentionKernelOverride::kAuto, 3}}) {
          Problem p;
          p.seqs = {{700, 1}, {33, 1}, {0, 1}, {95, 2}};
          p.num_heads = 32, p.num_kv_heads = 8, p.head_size = d;
          p.dtype = DType::kBF16, p.cache_dtype = cd;
          p.q_sigma = std::ldexp(1.0f, e);
          p.options.scale = float(std::ldexp(1.0 / std::sqrt(double(d)), -e));
          p.seed = next_seed();
          SCOPED_TRACE("q sigma 2^" + std::to_string(e));
          worst.merge(check(p, r));
        }
      }
    }
  }
  report("FP8 cache, queries 2^-90 to 2^60", worst);
}

// Decode batches of at most 8 packed rows a sequence take 8-row items, which the decode kernel runs
// with the operands swapped (attention_mma_decode.cuh): GQA ratios 1 to 8 (3: a token's heads
// across two items; 1 and 2: several tokens of a step in one item), head sizes 64 and 128, block
// sizes 16, 32 and 5, every cache kind, NHD and HND, split and not; and next to them the 16-row
// items (G 16, or a batch of 12 to 16 rows a sequence).
TEST(AttentionCuda, DecodeEightRowItemsGqaBlockSizesAndSplits) {
  attention_test::Calibration worst;
  struct Gqa {
    int64_t h, hkv;
    std::vector<SeqSpec> seqs;
  };
  const std::vector<Gqa> gqas = {
      {8, 8, {{0, 1}, {40, 8}, {300, 1}, {1000, 1}, {5, 3}}},     // G 1: 2.8 rows a sequence
      {16, 8, {{0, 1}, {33, 4}, {700, 1}, {16, 1}}},              // G 2: 3.5
      {32, 8, {{1, 1}, {95, 2}, {1000, 1}, {31, 1}, {0, 1}}},     // G 4: 4.8
      {12, 4, {{17, 3}, {500, 1}, {63, 1}}},                      // G 3: 5 (9 rows: items of 8 and 1)
      {32, 4, {{0, 1}, {257, 1}, {999, 1}, {32, 1}}},             // G 8: 8
      {32, 2, {{0, 1}, {257, 1}, {999, 1}}},                      // G 16: 16-row items
      {32, 8, {{64, 4}, {300, 3}, {5, 4}}},                       // G 4, 14.7 rows a sequence: 16-row items
  };
  struct CacheCase {
    int64_t block_size;
    KvCacheDtype cache;
    DType dtype;
    bool hnd;
  };
  const CacheCase caches[] = {{16, KvCacheDtype::kFp8E4M3, DType::kBF16, false},
                              {32, KvCacheDtype::kFp8E4M3, DType::kBF16, true},
                              {16, KvCacheDtype::kFp8E5M2, DType::kF16, false},
                              {5, KvCacheDtype::kFp8E4M3, DType::kF16, false},
                              {16, KvCacheDtype::kAuto, DType::kBF16, false},
                              {32, KvCacheDtype::kAuto, DType::kF16, true},
                              {5, KvCacheDtype::kAuto, DType::kBF16, false}};
  for (const Gqa& gq : gqas) {
    for (int64_t d : {64, 128}) {
      for (const CacheCase& cc : caches) {
        for (int splits : {0, 3}) {
          Problem p;
          p.seqs = gq.seqs;
          p.num_heads = gq.h, p.num_kv_heads = gq.hkv, p.head_size = d, p.block_size = cc.block_size;
          p.dtype = cc.dtype, p.cache_dtype = cc.cache;
          p.per_head_scales = cc.cache != KvCacheDtype::kAuto && splits == 3;
          p.padding_rows = splits == 0 && d == 64 ? 2 : 0;
          p.seed = next_seed();
          KernelRun r{AttentionKernelOverride::kAuto, splits};
          r.hnd = cc.hnd;
          worst.merge(check(p, r));
        }
      }
    }
  }
  report("decode, 8-row and 16-row items", worst);
}

// The 8-row items' masks: windows, a soft-cap, non-causal rows and a step of two tokens in one
// item (rows that see different keys of a tile), split and not.
TEST(AttentionCuda, DecodeEightRowItemsWindowsAndSoftcap) {
  attention_test::Calibration worst;
  struct Opt {
    int64_t left, right;
    bool causal;
    float softcap;
  };
  for (const Opt& o : {Opt{3, 0, true, 0.0f}, Opt{32, 0, true, 0.0f}, Opt{-1, -1, true, 5.0f},
                       Opt{4, 2, false, 2.0f}, Opt{100, 0, true, 30.0f}, Opt{-1, -1, false, 0.0f}}) {
    for (KvCacheDtype cd : {KvCacheDtype::kFp8E4M3, KvCacheDtype::kAuto}) {
      for (int splits : {0, 4}) {
        Problem p;
        p.seqs = {{40, 2}, {0, 1}, {200, 1}, {17, 1}, {600, 1}};
        p.num_heads = 16, p.num_kv_heads = 4, p.head_size = 128;
        p.cache_dtype = cd;
        p.options.window_left = o.left, p.options.window_right = o.right, p.options.causal = o.causal;
        p.options.softcap = o.softcap;
        p.q_sigma = 3.0f;
        p.seed = next_seed();
        worst.merge(check(p, KernelRun{AttentionKernelOverride::kAuto, splits}));
      }
    }
  }
  report("decode, 8-row items, windows and soft-cap", worst);
}

TEST(AttentionCuda, PrefillAndChunkedPrefillShapes) {
  attention_test::Calibration worst;
  for (int64_t B : {16, 3, 1}) {
    for (auto [h, hkv] : {std::pair<int64_t, int64_t>{8, 8}, {16, 4}, {16, 2}}) {
      Problem p;
      p.seqs = {{0, 130}, {5, 65}, {16, 64}, {33, 17}, {0, 1}, {7, 16}};
      p.num_heads = h, p.num_kv_heads = hkv, p.head_size = 128, p.block_size = B;
      p.cache_dtype = B == 3 ? KvCacheDtype::kAuto : KvCacheDtype::kFp8E4M3;
      p.seed = next_seed();
      worst.merge(check(p, kAuto));
      if (B == 16) worst.merge(check(p, KernelRun{AttentionKernelOverride::kAuto, 3}));
    }
  }
  report("prefill and chunked prefill", worst);
}

TEST(AttentionCuda, HeadSizes) {
  attention_test::Calibration worst;
  for (int64_t d : {64, 128, 256, 5, 80, 96, 192, 512}) {
    for (const KernelRun& r : {kAuto, kSimt}) {
      if (r.kernel == AttentionKernelOverride::kSimt && (d == 5 || d == 80 || d == 96 || d == 192 || d == 512)) {
        continue;  // those take CUDA cores anyway
      }
      Problem p;
      p.seqs = {{9, 3}, {0, 70}, {20, 1}};
      p.num_heads = 8, p.num_kv_heads = 2, p.head_size = d;
      p.cache_dtype = d % 2 ? KvCacheDtype::kAuto : KvCacheDtype::kFp8E4M3;
      p.seed = next_seed();
      worst.merge(check(p, r));
    }
  }
  report("head sizes", worst);
}

TEST(AttentionCuda, GqaRatiosPerHeadScalesAndHndCaches) {
  attention_test::Calibration worst;
  for (auto [h, hkv] : {std::pair<int64_t, int64_t>{8, 8}, {32, 8}, {32, 4}}) {
    for (bool hnd : {false, true}) {
      for (KvCacheDtype cd : {KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2, KvCacheDtype::kAuto}) {
        Problem p;
        p.seqs = {{9, 3}, {0, 5}, {200, 1}, {64, 40}};
        p.num_heads = h, p.num_kv_heads = hkv, p.head_size = 64;
        p.cache_dtype = cd;
        p.per_head_scales = cd != KvCacheDtype::kAuto;
        p.dtype = cd == KvCacheDtype::kFp8E5M2 ? DType::kF16 : DType::kBF16;
        p.seed = next_seed();
        KernelRun r;
        r.hnd = hnd;
        worst.merge(check(p, r));
        r.kernel = AttentionKernelOverride::kSimt;
        worst.merge(check(p, r));
      }
    }
  }
  report("GQA, per-head scales, HND", worst);
}

TEST(AttentionCuda, WindowsSoftcapScaleAndNonCausal) {
  attention_test::Calibration worst;
  struct Opt {
    int64_t left, right;
    bool causal;
    float softcap;
    std::optional<float> scale;
  };
  for (const Opt& o : {Opt{0, 0, true, 0.0f, {}}, Opt{3, 0, true, 0.0f, {}}, Opt{32, 0, true, 0.0f, {}},
                       Opt{-1, -1, true, 5.0f, {}}, Opt{-1, -1, true, 0.0f, 0.3f}, Opt{-1, -1, false, 0.0f, {}},
                       Opt{4, 2, false, 2.0f, 0.05f}, Opt{100, 0, true, 30.0f, {}}}) {
    for (const KernelRun& r : {kAuto, kSimt, KernelRun{AttentionKernelOverride::kAuto, 4}}) {
      Problem p;
      p.seqs = {{40, 9}, {0, 70}, {200, 1}, {17, 3}};
      p.num_heads = 8, p.num_kv_heads = 2, p.head_size = 128;
      p.cache_dtype = KvCacheDtype::kFp8E4M3;
      p.options.window_left = o.left, p.options.window_right = o.right, p.options.causal = o.causal;
      p.options.softcap = o.softcap, p.options.scale = o.scale;
      p.q_sigma = 3.0f;
      p.seed = next_seed();
      worst.merge(check(p, r));
    }
  }
  report("windows, soft-cap, scale, non-causal", worst);
}

TEST(AttentionCuda, PreallocatedOutputPaddingRowsAndEmptyBatches) {
  Problem p;
  p.seqs = {{5, 3}, {0, 1}};
  p.padding_rows = 5;
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  p.seed = next_seed();
  KernelRun r;
  r.preallocated_out = true;
  check(p, r);
  r.kernel = AttentionKernelOverride::kSimt;
  check(p, r);
  Problem empty;  // no sequences: every row is padding, zeros
  empty.padding_rows = 4;
  empty.seed = next_seed();
  check(empty, KernelRun{});
  Problem none;  // a sequence with no new tokens next to one with
  none.seqs = {{7, 0}, {3, 2}};
  none.seed = next_seed();
  check(none, KernelRun{});
}

// kFp8Compute against the emulation (the op's exp2f is within 2 ulp: 4u, plus margin).
TEST(AttentionCuda, Fp8ComputeMatchesTheEmulation) {
  double worst = 0;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (bool per_head : {false, true}) {
      for (auto [h, hkv, d] : {std::tuple<int64_t, int64_t, int64_t>{8, 2, 64}, {8, 1, 128}, {4, 2, 5}}) {
        Problem p;
        p.seqs = {{0, 7}, {13, 1}, {16, 5}, {5, 16}, {0, 1}, {29, 17}, {300, 1}};
        p.num_heads = h, p.num_kv_heads = hkv, p.head_size = d;
        p.dtype = dt;
        p.cache_dtype = KvCacheDtype::kFp8E4M3;
        p.per_head_scales = per_head;
        p.options.read_mode = AttentionReadMode::kFp8Compute;
        const std::vector<float> qs =
            per_head ? std::vector<float>(size_t(hkv), 0.011f) : std::vector<float>{0.01f};
        p.options.q_scale = Tensor::from_vector(qs);
        if (d == 5) p.options.softcap = 3.0f, p.options.window_left = 4, p.options.window_right = 0;
        p.seed = next_seed();
        Bench b = attention_test::build(p);
        SCOPED_TRACE(p.describe() + " fp8 compute");
        const std::vector<float> got = run_on_device(b, KernelRun{});
        const attention_test::Emulated e = attention_test::emulate(b, qs, 8.0);
        int64_t failures = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const double err = std::fabs(double(got[i]) - e.out[i]);
          if (!(err <= e.tol[i]) && failures++ < 5) {
            ADD_FAILURE() << "out[" << i << "] = " << got[i] << ", emulation " << e.out[i] << " +- " << e.tol[i];
          }
          if (e.tol[i] > 0) worst = std::max(worst, err / e.tol[i]);
        }
        EXPECT_EQ(failures, 0);
      }
    }
  }
  std::printf("[ calib    ] fp8 compute on CUDA vs the emulation: max |error| / tolerance = %.3g\n", worst);
}

// NaN and inf: never read where no query sees them; where visible, they reach the outputs the
// reference sends them to (the cases of tests/cpu/test_paged_attention_edges.cpp, on both kernels).
TEST(AttentionCuda, NaNAndInfInTheCache) {
  const float nan = std::nanf(""), inf = INFINITY;
  for (const KernelRun& r : {kAuto, kSimt}) {
    for (KvCacheDtype cd : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3}) {
      Problem p;
      p.seqs = {{10, 3}, {7, 1}};
      p.cache_dtype = cd;
      p.options.window_left = 3, p.options.window_right = 0;
      p.seed = next_seed();
      Bench b = attention_test::build(p);
      for (int64_t d = 0; d < p.head_size; ++d) {
        for (int64_t h = 0; h < p.num_kv_heads; ++h) {
          for (int64_t j = 0; j < 4; ++j) attention_test::set_cached(b, 0, j, h, d, nan, nan);
          attention_test::set_cached(b, 1, 0, h, d, inf, -inf);
        }
      }
      SCOPED_TRACE(p.describe() + "; " + r.str());
      for (float x : run_on_device(b, r)) ASSERT_TRUE(std::isfinite(x));
    }
    Problem p;
    p.seqs = {{6, 2}, {5, 1}};
    p.seed = next_seed();
    Bench b = attention_test::build(p);
    attention_test::set_cached(b, 0, 2, 0, 3, 0.5f, nan);
    SCOPED_TRACE(p.describe() + " NaN value; " + r.str());
    const std::vector<float> out = run_on_device(b, r);
    attention_test::check_outputs(b, out, attention_test::dense_reference(b, bound_for(p, r)));
    for (int64_t t = 0; t < 3; ++t) {
      for (int64_t h = 0; h < p.num_heads; ++h) {
        for (int64_t d = 0; d < p.head_size; ++d) {
          const bool sees = t < 2 && h < 4 && d == 3;
          EXPECT_EQ(std::isnan(out[size_t((t * p.num_heads + h) * p.head_size + d)]), sees) << t << " " << h << " " << d;
        }
      }
    }
    Problem pk;
    pk.seqs = {{6, 2}};
    pk.cache_dtype = KvCacheDtype::kFp8E5M2;
    pk.seed = next_seed();
    Bench bk = attention_test::build(pk);
    attention_test::set_cached(bk, 0, 5, 1, 0, nan, 1.0f);
    const std::vector<float> outk = run_on_device(bk, r);
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t h = 0; h < pk.num_heads; ++h) {
        EXPECT_EQ(std::isnan(outk[size_t((t * pk.num_heads + h) * pk.head_size)]), h >= 4) << t << " " << h;
      }
    }
  }
}

// Metadata the host does not check on CUDA: block ids outside the cache, seq_lens beyond the
// block table or below q_len, query_start_loc out of order or past q. Nothing may be read or
// written out of bounds (compute-sanitizer's memcheck run of gpu-check sees it); the sequences
// with good metadata keep their exact results; bad ones give finite outputs or zeros.
TEST(AttentionCuda, BadMetadataIsSkippedNotReadOutOfBounds) {
  Problem p;
  p.seqs = {{20, 2}, {9, 1}, {30, 3}};
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  p.seed = next_seed();
  for (int variant = 0; variant < 4; ++variant) {
    Bench b = attention_test::build(p);
    const attention_test::Expected want = attention_test::dense_reference(b, bound_for(p, KernelRun{}));
    Tensor table = b.md.block_table.clone();
    std::vector<int32_t> lens = {22, 10, 33}, qsl = {0, 2, 3, 6};
    if (variant == 0) table.data<int32_t>()[1] = 1 << 30, table.data<int32_t>()[0] = -7;  // sequence 0's blocks
    if (variant == 1) lens[0] = 1 << 20;  // beyond its block table: sequence 0 sees nothing
    if (variant == 2) lens[0] = 1;        // below its 2 query tokens
    if (variant == 3) qsl = {0, 2, 1 << 20, 6};  // sequence 1 runs past q: clamped
    b.md.block_table = table;
    b.md.seq_lens = Tensor::from_vector(lens);
    b.md.query_start_loc = Tensor::from_vector(qsl);
    b.md.slot_mapping = Tensor();  // the cache already holds every token (the store needs good slots)
    b.k = Tensor(), b.v = Tensor();
    b.cache.key_cache.copy_(b.expected_key_cache), b.cache.value_cache.copy_(b.expected_value_cache);
    for (const KernelRun& r : {kAuto, kSimt, KernelRun{AttentionKernelOverride::kAuto, 3}}) {
      SCOPED_TRACE("variant " + std::to_string(variant) + "; " + r.str());
      const std::vector<float> got = run_on_device(b, r);
      const int64_t row = p.num_heads * p.head_size;
      for (size_t i = 0; i < got.size(); ++i) {
        const int64_t t = int64_t(i) / row;
        const bool good = variant == 3 ? t < 2 : t >= 2;  // tokens of sequences with good metadata
        if (good) {
          EXPECT_TRUE(std::fabs(double(got[i]) - want.out[i]) <= want.tol[i]) << "out[" << i << "] = " << got[i];
        } else {
          EXPECT_TRUE(std::isfinite(got[i])) << "out[" << i << "] = " << got[i];
        }
      }
    }
  }
}

TEST(AttentionCuda, UnsupportedHeadSizeAndForcedKernelErrors) {
  Problem p;
  p.seqs = {{3, 1}};
  p.num_heads = 2, p.num_kv_heads = 1, p.head_size = 640;
  p.seed = next_seed();
  Bench b = attention_test::build(p);
  testing::expect_error([&] { run_on_device(b, KernelRun{}); }, ErrorCode::kUnsupported,
                        "paged_attention: head_size 640 is not supported on CUDA (1 to 512)");
  Problem f = p;
  f.head_size = 64, f.dtype = DType::kF32;
  Bench bf = attention_test::build(f);
  testing::expect_error([&] { run_on_device(bf, KernelRun{AttentionKernelOverride::kMma}); }, ErrorCode::kUnsupported,
                        "paged_attention: FP8KIT_ATTENTION_KERNEL=mma cannot serve this call: the query dtype is not "
                        "f16 or bf16");
}

// A decode step (store of the new K/V, then attention) captured once in a CUDA graph and replayed
// over new queries and keys: no host synchronization and no allocation inside the op.
TEST(AttentionCuda, DecodeStepCapturesIntoACudaGraph) {
  if (cuda::debug_sync_enabled()) GTEST_SKIP() << "FP8KIT_DEBUG_SYNC synchronizes inside the capture";
  Problem p;
  p.seqs = {{500, 1}, {37, 1}, {2000, 1}};
  p.num_heads = 32, p.num_kv_heads = 8, p.head_size = 128;
  p.cache_dtype = KvCacheDtype::kFp8E4M3;
  p.seed = next_seed();
  Bench b0 = attention_test::build(p);
  // The stream outlives the context, whose workspace synchronizes it when destroyed.
  struct StreamGuard {
    cudaStream_t stream = nullptr;
    ~StreamGuard() { cudaStreamDestroy(stream); }
  } guard;
  FP8KIT_CUDA_CHECK(cudaStreamCreateWithFlags(&guard.stream, cudaStreamNonBlocking));
  cudaStream_t stream = guard.stream;
  const Stream s{stream};
  ForwardContext ctx(kGpu, {}, s);
  // Device tensors the graph reads and writes; refilled before each replay.
  Tensor q = b0.q.contiguous().to(kGpu), k = b0.k.contiguous().to(kGpu), v = b0.v.contiguous().to(kGpu);
  ops::PagedKvCache cache = b0.cache;
  cache.key_cache = b0.cache.key_cache.to(kGpu), cache.value_cache = b0.cache.value_cache.to(kGpu);
  cache.k_scale = b0.cache.k_scale.to(kGpu), cache.v_scale = b0.cache.v_scale.to(kGpu);
  ops::AttentionMetadata md;
  md.query_start_loc = b0.md.query_start_loc.to(kGpu), md.seq_lens = b0.md.seq_lens.to(kGpu);
  md.block_table = b0.md.block_table.contiguous().to(kGpu), md.slot_mapping = b0.md.slot_mapping.to(kGpu);
  Tensor out = ops::paged_attention(ctx, q, k, v, cache, md);  // warm-up: workspace and kernels ready
  stream_synchronize(s);
  ctx.workspace().reset();
  ctx.workspace().freeze(true);
  FP8KIT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  ops::PagedAttentionOptions o;
  o.out = out;
  ops::paged_attention(ctx, q, k, v, cache, md, o);
  cudaGraph_t graph = nullptr;
  FP8KIT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  ctx.workspace().reset();
  cudaGraphExec_t exec = nullptr;
  FP8KIT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    Problem pr = p;
    pr.seed = next_seed();
    Bench b = attention_test::build(pr);  // same shapes and block placement rule, new values
    q.copy_(b.q.contiguous(), s), k.copy_(b.k.contiguous(), s), v.copy_(b.v.contiguous(), s);
    cache.key_cache.copy_(b.cache.key_cache, s), cache.value_cache.copy_(b.cache.value_cache, s);
    md.block_table.copy_(b.md.block_table.contiguous(), s), md.slot_mapping.copy_(b.md.slot_mapping, s);
    out.fill_bytes_(0xff, s);
    FP8KIT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    stream_synchronize(s);
    SCOPED_TRACE(pr.describe() + " graph replay " + std::to_string(replay));
    attention_test::check_outputs(b, ops_test::to_floats(to_host(out)), attention_test::dense_reference(b, bound_for(pr, KernelRun{})));
  }
  FP8KIT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  FP8KIT_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
}  // namespace fp8kit
