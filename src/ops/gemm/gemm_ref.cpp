#include "ops/gemm/gemm_ref.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"

namespace fp8kit::ops {
namespace {

float load_bias(const ScaledMmArgs& a, int64_t j) {
  if (a.bias == nullptr) return 0.0f;
  switch (a.out_dtype) {
    case DType::kBF16: return bf16_to_float(static_cast<const BFloat16*>(a.bias)[j]);
    case DType::kF16: return f16_to_float(static_cast<const Float16*>(a.bias)[j]);
    default: return static_cast<const float*>(a.bias)[j];
  }
}

void store(const ScaledMmArgs& a, int64_t i, int64_t j, float v) {
  switch (a.out_dtype) {
    case DType::kBF16: static_cast<BFloat16*>(a.out)[i * a.ldc + j] = float_to_bf16(v); break;
    case DType::kF16: static_cast<Float16*>(a.out)[i * a.ldc + j] = float_to_f16(v); break;
    default: static_cast<float*>(a.out)[i * a.ldc + j] = v; break;
  }
}

float row_scale(const float* s, ScaleKind kind, int64_t index) { return kind == ScaleKind::kTensor ? s[0] : s[index]; }

// Exact sum of products of decoded e4m3 values over [k0, k1) in double.
double dot(const float* a_row, const float* b_row, int64_t k0, int64_t k1) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t kk = k0;
  for (; kk + 4 <= k1; kk += 4) {
    s0 += double(a_row[kk]) * b_row[kk];
    s1 += double(a_row[kk + 1]) * b_row[kk + 1];
    s2 += double(a_row[kk + 2]) * b_row[kk + 2];
    s3 += double(a_row[kk + 3]) * b_row[kk + 3];
  }
  for (; kk < k1; ++kk) s0 += double(a_row[kk]) * b_row[kk];
  return (s0 + s1) + (s2 + s3);
}

// The operand rows decoded to float once, so the inner loop is plain multiply-adds.
std::vector<float> decode_rows(const uint8_t* p, int64_t rows, int64_t k, int64_t ld) {
  std::vector<float> table(256);
  for (int c = 0; c < 256; ++c) table[c] = e4m3fn_bits_to_float(uint8_t(c));
  std::vector<float> out(size_t(rows * k));
  parallel_for(rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t kk = 0; kk < k; ++kk) out[size_t(r * k + kk)] = table[p[r * ld + kk]];
    }
  });
  return out;
}

}  // namespace

void scaled_mm_ref(const ScaledMmArgs& args) {
  // a decoded once; b a block of rows at a time on each thread (decoding all of b would take 4
  // bytes per weight of scratch on every call), with the same sums.
  constexpr int64_t kRowsPerBlock = 32;
  const std::vector<float> a = decode_rows(args.a, args.m, args.k, args.lda);
  const bool block = args.scale_a_kind == ScaleKind::kBlock;
  FP8KIT_CHECK(block == (args.scale_b_kind == ScaleKind::kBlock), ErrorCode::kInternal,
               "scaled_mm_ref: block scaling must apply to both operands");
  const int64_t blocks = (args.n + kRowsPerBlock - 1) / kRowsPerBlock;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t nb = b0; nb < b1; ++nb) {
      const int64_t j0 = nb * kRowsPerBlock, rows = std::min(kRowsPerBlock, args.n - j0);
      const std::vector<float> b = decode_rows(args.b + j0 * args.ldb, rows, args.k, args.ldb);
      for (int64_t i = 0; i < args.m; ++i) {
        const float* a_row = a.data() + i * args.k;
        for (int64_t j = j0; j < j0 + rows; ++j) {
          const float* b_row = b.data() + (j - j0) * args.k;
          float y;
          if (block) {
            float acc = 0.0f;
            for (int64_t kb = 0; kb * args.block_k < args.k; ++kb) {
              const int64_t k0 = kb * args.block_k, k1 = std::min(args.k, k0 + args.block_k);
              const float partial = float(dot(a_row, b_row, k0, k1));
              const float sa = args.scale_a[i * args.sa_row_stride + kb * args.sa_group_stride];
              const float sb = args.scale_b[(j / args.block_n) * args.sb_row_stride + kb * args.sb_group_stride];
              acc += (partial * sa) * sb;
            }
            y = acc + load_bias(args, j);
          } else {
            const float acc = float(dot(a_row, b_row, 0, args.k));
            const float sa = row_scale(args.scale_a, args.scale_a_kind, i);
            const float sb = row_scale(args.scale_b, args.scale_b_kind, j);
            y = std::fmaf(sa, sb * acc, load_bias(args, j));
          }
          store(args, i, j, y);
        }
      }
    }
  });
}

}  // namespace fp8kit::ops
