#include "ops/gemm/gemm_config.h"

#include <algorithm>
#include <limits>
#include <string_view>

#include "core/check.h"
#include "core/checked_math.h"

namespace fp8kit::ops {

const char* gemm_backend_name(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::kDecode: return "decode";
    case GemmBackend::kWgmma: return "wgmma";
    case GemmBackend::kCublasLt: return "cublaslt";
    case GemmBackend::kFallback: return "fallback";
  }
  return "unknown";
}

GemmDesc describe(const ScaledMmArgs& args, int arch) {
  GemmDesc d;
  d.m = args.m;
  d.n = args.n;
  d.k = args.k;
  d.scale_a = args.scale_a_kind;
  d.scale_b = args.scale_b_kind;
  d.block_n = args.scale_a_kind == ScaleKind::kBlock ? args.block_n : 0;
  d.block_k = args.scale_a_kind == ScaleKind::kBlock ? args.block_k : 0;
  d.out_dtype = args.out_dtype;
  d.bias = args.bias != nullptr;
  d.arch = arch;
  d.lda = args.lda;
  d.ldb = args.ldb;
  d.ldc = args.ldc;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  d.pointers_16b_aligned = aligned(args.a) && aligned(args.b) && aligned(args.out) && (!args.bias || aligned(args.bias));
  // Column-major with a padded leading dimension (the TMA-aligned layout) counts too: the CUDA
  // entry compacts those few scales before calling cuBLASLt.
  d.scale_a_column_major = args.sa_row_stride == 1 && args.sa_group_stride >= args.m;
  return d;
}

std::string cublaslt_rejects(const GemmDesc& d) {
  if (d.arch < 89) return "no FP8 tensor cores before sm_89";
  // FP8 matmul needs 16-byte aligned rows and bases; K, lda and ldb count bytes here.
  if (d.k % 16 != 0) return "K is not a multiple of 16";
  if (d.lda % 16 != 0 || d.ldb % 16 != 0) return "a row stride is not a multiple of 16 bytes";
  const int64_t out_bytes = d.out_dtype == DType::kF32 ? 4 : 2;
  if ((d.ldc * out_bytes) % 16 != 0) return "the output row stride is not a multiple of 16 bytes";
  if (!d.pointers_16b_aligned) return "an operand is not 16-byte aligned";
  const bool block = d.scale_a == ScaleKind::kBlock;
  if (block) {
    if (d.arch != 90) return "cuBLASLt's 128x128 block modes are used on sm_90 only";
    if (d.block_n != 128 || d.block_k != 128) return "cuBLASLt's block modes are 1x128 x 128x128 only";
    if (!d.scale_a_column_major) return "block activation scales must be [K/128, M] with M contiguous";
    // Measured on the H200 with CUDA 13.0: with K/128 = 2 (N = 256 and N = 320 alike) cuBLASLt
    // read wrong weight scales for the columns past the first 128 (it seems to expect the rows of
    // the [N/128, K/128] scales padded to 16 bytes); with K/128 a multiple of 4 and N a multiple
    // of 128 its results were right. Anything else goes to another backend.
    if (d.n % 128 != 0) return "N is not a multiple of 128 (block mode)";
    if ((d.k / 128) % 4 != 0) return "K/128 is not a multiple of 4 (block mode: weight scale rows of 16 bytes)";
  }
  return "";
}

std::string decode_rejects(const GemmDesc& d) {
  if (d.arch != 90) return "the decode kernel runs wgmma (sm_90, built for sm_90a)";
  if (d.m > kDecodeMaxM) return "M > 64 (a weight stream pays off for decode sizes only)";
  // TMA reads rows at 16-byte aligned addresses; K itself may be ragged (zero-filled).
  if (d.lda % 16 != 0 || d.ldb % 16 != 0) return "a row stride is not a multiple of 16 bytes";
  if (!d.pointers_16b_aligned) return "an operand is not 16-byte aligned";
  if (d.k <= 0) return "K is 0";
  if (d.n > 0x7fffffff || d.k > 0x7fffffff) return "a dimension past the TMA coordinate range";
  // One 128-wide K tile is the unit of the scale promotion.
  if (d.scale_a == ScaleKind::kBlock && d.block_k != kDecodeChunkK) return "block_k is not 128";
  return "";
}

bool decode_beats_cublaslt(const GemmDesc& d) {
  if (d.scale_a == ScaleKind::kBlock) return d.m < 16;
  return (d.scale_a == ScaleKind::kRow || d.scale_b == ScaleKind::kRow) && d.m <= kDecodePerRowMaxM;
}

std::string wgmma_rejects(const GemmDesc& d) {
  if (d.arch != 90) return "wgmma needs sm_90 (built for sm_90a)";
  // TMA reads rows at 16-byte aligned addresses; K itself may be ragged (zero-filled).
  if (d.lda % 16 != 0 || d.ldb % 16 != 0) return "a row stride is not a multiple of 16 bytes";
  if (!d.pointers_16b_aligned) return "an operand is not 16-byte aligned";
  if (d.k <= 0) return "K is 0";
  if (d.m > 0x7fffffff || d.n > 0x7fffffff || d.k > 0x7fffffff) return "a dimension past the TMA coordinate range";
  if (((d.m + 127) / 128) * ((d.n + 127) / 128) > 0x7fffffff) return "more than 2^31 output tiles";
  if (d.scale_a == ScaleKind::kBlock && (d.block_n != 128 || d.block_k != 128)) {
    return "block scales other than 1x128 x 128x128";
  }
  return "";
}

namespace {

// The decode kernel's cost model (plan_decode_gemm), measured on the H200 with its K splits forced
// (1, 2, 4 and 8 on the 11 shapes of bench_gemm at M = 1 and 16): the weights stream at ~3.9 TB/s
// when enough CTAs pull, one CTA streams ~40 GB/s (its ring of K tiles in flight), and a split
// costs ~1.5 us (the reduction kernel after the main one) plus its partial sums' traffic.
constexpr double kDecodeBytesPerUs = 3.9e6;
constexpr double kDecodeCtaBytesPerUs = 4.0e4;
constexpr double kDecodeSplitUs = 1.5;

}  // namespace

DecodeGemmPlan plan_decode_gemm(int64_t m, int64_t n, int64_t k, int num_sms, int forced_k_splits) {
  DecodeGemmPlan p;
  p.token_tile = decode_token_tile(m);
  p.n_tiles = ceil_div(n, kDecodeTileN);
  p.chunks = ceil_div(k, kDecodeChunkK);
  const int64_t slots = int64_t(std::max(num_sms, 1)) * kDecodeCtasPerSm;
  if (forced_k_splits > 0) {
    const int64_t splits = forced_k_splits;
    p.chunks_per_split = ceil_div(p.chunks, std::min(splits, p.chunks));
    p.splits = ceil_div(p.chunks, p.chunks_per_split);  // no empty split
    p.ctas = std::min(p.n_tiles * p.splits, slots);
    return p;
  }
  const double tile_bytes = double(kDecodeTileN * kDecodeChunkK);
  const double weight_us = double(p.n_tiles * p.chunks) * tile_bytes / kDecodeBytesPerUs;
  double best = std::numeric_limits<double>::infinity();
  for (int64_t per = p.chunks; per >= 1; --per) {
    const int64_t splits = ceil_div(p.chunks, per);
    if (per > 1 && ceil_div(p.chunks, per - 1) == splits) continue;  // as many splits, shorter ones
    const int64_t items = p.n_tiles * splits, ctas = std::min(items, slots);
    // The busiest CTA streams ceil(items / ctas) items of `per` K tiles, unless the memory is slower.
    const double cta_us = double(ceil_div(items, ctas) * per) * tile_bytes / kDecodeCtaBytesPerUs;
    double us = std::max(weight_us, cta_us);
    if (splits > 1) us += kDecodeSplitUs + 2.0 * double(splits) * double(m) * double(n) * 4.0 / kDecodeBytesPerUs;
    if (us < best) {  // ties keep fewer splits (the loop counts splits up)
      best = us;
      p.splits = splits;
      p.chunks_per_split = per;
    }
  }
  p.ctas = std::min(p.n_tiles * p.splits, slots);
  return p;
}

WeightOnlyTiledPlan plan_weight_only_tiled(int64_t m, int64_t n, int64_t k, int num_sms) {
  WeightOnlyTiledPlan p;
  p.tiles = ceil_div(m, kWeightOnlyTileM) * ceil_div(n, kWeightOnlyTileN);
  p.k_tiles = ceil_div(k, kWeightOnlyTileK);
  p.k_tiles_per_split = p.k_tiles;
  const int64_t sms = std::max(num_sms, 1);
  if (p.tiles >= sms || p.tiles == 0) return p;
  const int64_t wanted = ceil_div(sms * kWeightOnlyCtasPerSm, p.tiles);
  const int64_t most = std::max<int64_t>(p.k_tiles / kWeightOnlyMinKTilesPerSplit, 1);
  p.k_tiles_per_split = ceil_div(p.k_tiles, std::min(wanted, most));
  p.splits = ceil_div(p.k_tiles, p.k_tiles_per_split);  // no empty split
  return p;
}

WgmmaGemmPlan plan_wgmma_gemm(int64_t m, int64_t n, int num_sms, bool fast_accum) {
  WgmmaGemmPlan p;
  p.tile_n = fast_accum ? 256 : 128;
  p.tiles = ceil_div(m, 128) * ceil_div(n, p.tile_n);
  p.ctas = std::min<int64_t>(p.tiles, std::max(num_sms, 1));
  return p;
}

WeightOnlyKernel plan_weight_only_mm(const WeightOnlyDesc& d, const Overrides& overrides) {
  constexpr int64_t kTiledMinM = 33;
  const bool cuda_core = overrides.weight_only_gemm == WeightOnlyGemmOverride::kCudaCore;
  const bool tiled_forced = overrides.weight_only_gemm == WeightOnlyGemmOverride::kTiled;
  if (!cuda_core && (d.m >= kTiledMinM || tiled_forced) && d.tiled_serves) return WeightOnlyKernel::kTiled;
  const bool mma = !cuda_core && d.mma_serves;
  if (mma && d.m >= 2) return WeightOnlyKernel::kMma;
  if (d.decode_serves) return WeightOnlyKernel::kDecode;
  if (mma) return WeightOnlyKernel::kMma;
  return WeightOnlyKernel::kGeneric;
}

GemmConfig plan_scaled_mm(const GemmDesc& d, const Overrides& overrides) {
  const GemmBackendOverride forced = overrides.gemm_backend;
  const std::string why_not_decode = decode_rejects(d);
  const std::string why_not_cublaslt = cublaslt_rejects(d);
  if (forced == GemmBackendOverride::kFallback) return {GemmBackend::kFallback, "forced"};
  if (forced == GemmBackendOverride::kDecode) {
    FP8KIT_CHECK(why_not_decode.empty(), ErrorCode::kUnsupported,
                 "FP8KIT_GEMM_BACKEND=decode cannot serve M={} N={} K={}: {}", d.m, d.n, d.k, why_not_decode);
    return {GemmBackend::kDecode, ""};
  }
  const std::string why_not_wgmma = wgmma_rejects(d);
  if (forced == GemmBackendOverride::kWgmma) {
    FP8KIT_CHECK(why_not_wgmma.empty(), ErrorCode::kUnsupported,
                 "FP8KIT_GEMM_BACKEND=wgmma cannot serve M={} N={} K={}: {}", d.m, d.n, d.k, why_not_wgmma);
    return {GemmBackend::kWgmma, ""};
  }
  if (forced == GemmBackendOverride::kCublasLt) {
    FP8KIT_CHECK(why_not_cublaslt.empty(), ErrorCode::kUnsupported,
                 "FP8KIT_GEMM_BACKEND=cublaslt cannot serve M={} N={} K={}: {}", d.m, d.n, d.k, why_not_cublaslt);
    return {GemmBackend::kCublasLt, ""};
  }
  // The decode kernel where it measured faster than cuBLASLt on the H200 (docs/PERFORMANCE.md):
  // per-row scales up to kDecodePerRowMaxM rows (cuBLASLt's outer-vector mode, padded to 16 rows
  // below that: the decode kernel ran 1.2-3.1x faster at M <= 16, 1.1-1.8x at M = 32), block
  // scales below 16 rows (the padded 16-row cuBLASLt problem: 1.2-2.4x), and every decode size
  // cuBLASLt cannot serve (the wgmma kernel's 128-row tiles are mostly padding there). Per-tensor
  // scales stay on cuBLASLt (the decode kernel measured 0.84-1.07x it), as do larger M. The wgmma
  // kernel measured 0.75-0.9x cuBLASLt where both can serve, so it takes what cuBLASLt cannot:
  // ragged N or output strides, block scales whose shapes or layouts cuBLASLt's block modes reject.
  if (why_not_decode.empty() && (decode_beats_cublaslt(d) || !why_not_cublaslt.empty())) {
    return {GemmBackend::kDecode, why_not_cublaslt.empty() ? "" : "cublaslt: " + why_not_cublaslt};
  }
  if (why_not_cublaslt.empty()) return {GemmBackend::kCublasLt, ""};
  if (why_not_wgmma.empty()) return {GemmBackend::kWgmma, "cublaslt: " + why_not_cublaslt};
  return {GemmBackend::kFallback, "cublaslt: " + why_not_cublaslt + "; wgmma: " + why_not_wgmma};
}

}  // namespace fp8kit::ops
