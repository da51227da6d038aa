// Which implementation serves a scaled_mm problem, decided as data by host code (DeepGEMM's habit:
// a plain function of the problem, unit-tested on the CPU): GemmDesc -> GemmConfig. Each backend
// states the problems it can serve; the first that can, in order of preference, is chosen, and the
// reason for every rejection is kept for diagnostics.
#pragma once

#include <cstdint>
#include <string>

#include "ops/gemm/gemm_args.h"

namespace fp8kit::ops {

enum class GemmBackend : uint8_t {
  kDecode,    // sm90_e4m3_gemm_decode: weight-streaming wgmma kernel for M <= 64 on sm_90
  kWgmma,     // sm90_e4m3_gemm_wgmma: TMA + wgmma tiles with K-block promotion, prefill sizes on sm_90
  kCublasLt,  // cuBLASLt FP8 matmul: per-tensor, outer-vector (token x channel), 128x128 block modes
  kFallback,  // fp8kit's generic CUDA kernel: any shape, stride, scaling and block size (slow)
};
const char* gemm_backend_name(GemmBackend backend);

struct GemmDesc {
  int64_t m = 0, n = 0, k = 0;
  ScaleKind scale_a = ScaleKind::kTensor, scale_b = ScaleKind::kTensor;
  int64_t block_n = 0, block_k = 0;
  DType out_dtype = DType::kBF16;
  bool bias = false;
  int arch = 0;  // compute capability, e.g. 90
  // Strides in elements and base addresses modulo 16 bytes, as cuBLASLt requires them aligned.
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool pointers_16b_aligned = true;
  // Block scaling: whether the activation scales are [K/bk, M] with M contiguous (the layout
  // cuBLASLt's VEC128 mode reads, after removing any padding of the leading dimension).
  bool scale_a_column_major = false;
};

GemmDesc describe(const ScaledMmArgs& args, int arch);

struct GemmConfig {
  GemmBackend backend = GemmBackend::kFallback;
  std::string reason;  // why the preferred backends were passed over ("" when cuBLASLt serves it)
};

// scaled_mm's plan on CUDA. overrides.gemm_backend (FP8KIT_GEMM_BACKEND) forces a backend (tests,
// benchmarks); a forced backend that cannot serve the problem is an error naming why.
GemmConfig plan_scaled_mm(const GemmDesc& desc, const Overrides& overrides);

// "" when cuBLASLt can serve `desc`, otherwise why not.
std::string cublaslt_rejects(const GemmDesc& desc);

// sm90_e4m3_gemm_wgmma: "" when it can serve `desc`, otherwise why not.
std::string wgmma_rejects(const GemmDesc& desc);

// Below this many rows of a, cuBLASLt serves problems the wgmma kernel could (tiles of 128 rows
// would be mostly padding).
inline constexpr int64_t kWgmmaMinM = 128;

// The kernel's persistent grid: one CTA a multiprocessor (no more than tiles) walks the output
// tiles of 128 rows by tile_n columns (128; 256 with fast accumulation).
struct WgmmaGemmPlan {
  int64_t tiles = 0;
  int64_t ctas = 0;
  int tile_n = 128;
};
WgmmaGemmPlan plan_wgmma_gemm(int64_t m, int64_t n, int num_sms, bool fast_accum = false);

// sm90_e4m3_gemm_decode: the weights stream through wgmma as its M side (kDecodeTileN rows of b a
// CTA) and the tokens are its N side (a token tile of 8, 16, 32 or 64), over K ranges of whole
// kDecodeChunkK-wide K tiles (the 128-wide K-blocks of block scaling). A persistent grid of
// kDecodeCtasPerSm CTAs a multiprocessor walks the (tile, K split) items; K splits write f32
// partials that a second kernel sums in split order.
inline constexpr int64_t kDecodeMaxM = 64;
inline constexpr int64_t kDecodeTileN = 64;
inline constexpr int64_t kDecodeChunkK = 128;
inline constexpr int kDecodeCtasPerSm = 2;

// The token tile (wgmma's N) for M rows of a.
constexpr int decode_token_tile(int64_t m) { return m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : 64; }

// "" when the decode kernel can serve `desc`, otherwise why not.
std::string decode_rejects(const GemmDesc& desc);

// Whether the decode kernel measured faster than cuBLASLt for problems like `desc` (plan_scaled_mm).
inline constexpr int64_t kDecodePerRowMaxM = 32;
bool decode_beats_cublaslt(const GemmDesc& desc);

struct DecodeGemmPlan {
  int token_tile = 16;
  int64_t n_tiles = 0;           // ceil(N / kDecodeTileN)
  int64_t chunks = 0;            // ceil(K / kDecodeChunkK)
  int64_t splits = 1;            // K ranges, none empty
  int64_t chunks_per_split = 0;  // split s covers chunks [s * chunks_per_split, min(chunks, (s + 1) * ...))
  int64_t ctas = 0;              // the persistent grid: min(n_tiles * splits, resident CTAs)
};

// Tiles and K-splits for an M x N x K problem on `num_sms` SMs, from a cost model in time: the
// weights over the memory bandwidth, or the busiest CTA's K tiles over one CTA's stream rate if
// slower (few tiles over a long K), plus each split's reduction (gemm_config.cpp has the measured
// constants).
// `forced_k_splits` (Overrides::decode_k_splits, 1 to 64; 0: the model's choice) replaces the
// model's choice (benchmarks).
DecodeGemmPlan plan_decode_gemm(int64_t m, int64_t n, int64_t k, int num_sms, int forced_k_splits = 0);

// weight_only_mm's tiled tensor-core kernel (weight_only_tiled.cu): 128 x 128 output tiles, K in
// tiles of 32, two CTAs a multiprocessor.
inline constexpr int64_t kWeightOnlyTileM = 128, kWeightOnlyTileN = 128, kWeightOnlyTileK = 32;
inline constexpr int kWeightOnlyCtasPerSm = 2;
inline constexpr int64_t kWeightOnlyMinKTilesPerSplit = 8;

struct WeightOnlyTiledPlan {
  int64_t tiles = 0;              // grid.x: output tiles
  int64_t k_tiles = 0;            // ceil(K / kWeightOnlyTileK)
  int64_t splits = 1;             // grid.y: K ranges, none empty
  int64_t k_tiles_per_split = 0;  // split s covers K tiles [s * k_tiles_per_split, ...)
};

// K splits only when the output tiles cannot give every multiprocessor a CTA: then about
// kWeightOnlyCtasPerSm CTAs a multiprocessor, each at least kWeightOnlyMinKTilesPerSplit K tiles
// (a lone CTA a multiprocessor runs latency-bound, and the f32 partials cost a write and a read
// of M x N x 4 bytes a split).
WeightOnlyTiledPlan plan_weight_only_tiled(int64_t m, int64_t n, int64_t k, int num_sms);

// weight_only_mm's kernels on CUDA (weight_only_cuda.cu) and which of them can serve a problem
// (each kernel's own `*_serves`, asked by the launcher on the device).
enum class WeightOnlyKernel : uint8_t {
  kTiled,     // weight_only_tiled.cu: 128 x 128 tensor-core tiles, K split when the tiles are few
  kMma,       // weight_only_mma.cu: the streaming tensor-core kernel (16-row token tiles)
  kDecode,    // weight_only_decode.cu: CUDA cores, one pass over the weights (M = 1)
  kGeneric,   // weight_only_cuda.cu's CUDA-core kernel: any shape
};
struct WeightOnlyDesc {
  int64_t m = 0;
  bool tiled_serves = false, mma_serves = false, decode_serves = false;
};
// From 33 rows the tiled kernel beats the streaming one, whose token tiles re-read the activations
// for every 16 weight rows (H200: 1.0-1.6x at M = 64, 0.6-1.1x at M = 32); one row streams faster
// through the CUDA-core decode kernel on large weights (1.73x vs 1.27x a BF16 GEMM at 57344 x
// 8192), from two rows the tensor cores win. overrides.weight_only_gemm: kCudaCore keeps CUDA
// cores, kTiled the tiled kernel at every M where it serves.
WeightOnlyKernel plan_weight_only_mm(const WeightOnlyDesc& desc, const Overrides& overrides);

}  // namespace fp8kit::ops
