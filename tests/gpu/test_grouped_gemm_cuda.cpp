// The fused MoE's grouped FP8 GEMMs alone (src/ops/moe/grouped_gemm_*.cu: wgmma, mma.sync, CUDA
// cores) against expert_gemm_ref, with f32 output so that no output rounding hides a difference.
//
// Integer grid (codes +-1, +-2; power-of-two scales and routed weights): every partial sum is a
// small integer times a power of two, exact in any accumulator: bit-exact for every kernel.
//
// Random codes (every finite e4m3 value, random scales): the error of each output is measured
// against the sum of the magnitudes of its terms, S = sum_k |a_k b_k| * scales * |w| (the scale
// an accumulation error is proportional to), err = |got - want| / S.
//  - f32 accumulation (mma.sync, CUDA cores): err <= (k + 8) * 2^-24 (k f32 additions, a few
//    epilogue roundings).
//  - wgmma: the FP8 tensor cores align the products of one instruction to the largest and keep
//    a limited number of bits while they add (DeepSeek-V3 report, 3.3.2: "around 14 bits"). The
//    kernel promotes every 128-wide K tile into f32 registers, so the error is bounded per tile
//    by the alignment of 4 instructions of 32 products: err <= kWgmmaTileBound = 2^-10 (four
//    instructions of 2^-12, slack for the accumulator's own truncation). Measured on the H200:
//    see docs/numerics.md. A wrong K chunk, row or scale moves err to O(1).
// The test prints the largest err of each kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/fp8.h"
#include "fp8kit/ops/moe_routing.h"
#include "gpu_test_util.h"
#include "ops/moe/fused_experts_gemm_ref.h"
#include "ops/moe/grouped_gemm_cuda.h"

namespace fp8kit {
namespace {

using ops::GroupedGemmArgs;

enum class Kernel { kWgmma, kMma, kSimt };
const char* kernel_name(Kernel k) { return k == Kernel::kWgmma ? "wgmma" : (k == Kernel::kMma ? "mma.sync" : "simt"); }

constexpr double kWgmmaTileBound = 1.0 / 1024;

struct GemmCase {
  std::string name;
  int64_t rows = 33, top_k = 2, e = 8, n = 256, k = 256, block_m = 16;
  bool block = false;  // 128 x 128 weight blocks, 1 x 128 activation groups
  bool grid = false;
  bool weights = true;  // routed weights multiplied in
  int64_t ep_local = 0;  // > 0: an expert map keeping only the first ep_local experts
  int64_t k_splits = 1;  // wgmma: split K, the f32 partial sums added here in split order
  std::string str(Kernel kern, uint32_t seed) const {
    return name + " [" + kernel_name(kern) + " k_splits " + std::to_string(k_splits) + " rows " + std::to_string(rows) + " top_k " + std::to_string(top_k) + " E " +
           std::to_string(e) + " n " + std::to_string(n) + " k " + std::to_string(k) + " block_m " +
           std::to_string(block_m) + (block ? " block" : " per-tensor") + "] seed " + std::to_string(seed);
  }
};

uint8_t random_code(std::mt19937& rng, bool grid) {
  if (grid) {
    const uint8_t choices[] = {0x38, 0x40, 0xB8, 0xC0};  // 1, 2, -1, -2
    return choices[rng() % 4];
  }
  for (;;) {
    const uint8_t c = uint8_t(rng());
    if ((c & 0x7F) != 0x7F) return c;  // every finite e4m3fn code, zeros and subnormals included
  }
}

std::vector<float> random_scales(size_t count, std::mt19937& rng, bool grid) {
  std::uniform_real_distribution<float> u(0.5f, 2.0f);
  const float pow2[] = {0.25f, 0.5f, 1.0f, 2.0f};
  std::vector<float> s(count);
  for (float& v : s) v = grid ? pow2[rng() % 4] : u(rng);
  return s;
}

struct Problem {
  int64_t experts_local = 0, kb = 1, nb = 1;
  std::vector<uint8_t> a, b;          // [rows, k], [E_local, n, k] codes
  std::vector<float> a_scale, b_scale, weights;
  std::vector<int32_t> ids, expert_map, slot_expert;  // slot_expert: local expert of each slot or -1
};

Problem make_problem(const GemmCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.experts_local = c.ep_local > 0 ? c.ep_local : c.e;
  p.kb = c.block ? (c.k + 127) / 128 : 1;
  p.nb = c.block ? (c.n + 127) / 128 : 1;
  p.a.resize(size_t(c.rows * c.k));
  for (uint8_t& v : p.a) v = random_code(rng, c.grid);
  p.b.resize(size_t(p.experts_local * c.n * c.k));
  for (uint8_t& v : p.b) v = random_code(rng, c.grid);
  p.a_scale = random_scales(c.block ? size_t(c.rows * p.kb) : 1, rng, c.grid);
  p.b_scale = random_scales(c.block ? size_t(p.experts_local * p.nb * p.kb) : size_t(p.experts_local), rng, c.grid);
  const int64_t slots = c.rows * c.top_k;
  p.weights = random_scales(size_t(slots), rng, c.grid);
  std::vector<int32_t> perm(size_t(c.e));
  for (int32_t i = 0; i < int32_t(c.e); ++i) perm[size_t(i)] = i;
  for (int64_t r = 0; r < c.rows; ++r) {
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t j = 0; j < c.top_k; ++j) p.ids.push_back(perm[size_t(j)]);
  }
  if (c.ep_local > 0) {
    p.expert_map.assign(size_t(c.e), -1);
    for (int32_t i = 0; i < int32_t(c.ep_local); ++i) p.expert_map[size_t(i)] = i;
  }
  for (const int32_t id : p.ids) p.slot_expert.push_back(c.ep_local > 0 ? p.expert_map[size_t(id)] : id);
  return p;
}

std::vector<float> decode(const std::vector<uint8_t>& codes) {
  std::vector<float> v(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) v[i] = e4m3fn_bits_to_float(codes[i]);
  return v;
}

// expert_gemm_ref's output and, per output, the magnitude S of its terms.
void reference(const GemmCase& c, const Problem& p, std::vector<float>& want, std::vector<double>& magnitude) {
  const int64_t slots = c.rows * c.top_k;
  const std::vector<float> a = decode(p.a), b = decode(p.b);
  want.assign(size_t(slots * c.n), 0.0f);
  ops::ExpertGemmArgs r;
  r.num_slots = slots, r.n = c.n, r.k = c.k, r.slots_per_row = c.top_k;
  r.a = a.data(), r.b = b.data();
  r.slot_expert = p.slot_expert.data();
  r.slot_weight = c.weights ? p.weights.data() : nullptr;
  r.scaling = c.block ? ops::ExpertGemmScaling::kBlock : ops::ExpertGemmScaling::kPerTensor;
  r.a_scale = p.a_scale.data(), r.b_scale = p.b_scale.data();
  r.block_n = c.block ? 128 : 0, r.block_k = c.block ? 128 : 0;
  r.out = want.data();
  r.out_dtype = DType::kF32;
  ops::expert_gemm_ref(r);

  magnitude.assign(size_t(slots * c.n), 0.0);
  for (int64_t s = 0; s < slots; ++s) {
    const int32_t e = p.slot_expert[size_t(s)];
    if (e < 0) continue;
    const int64_t row = s / c.top_k;
    const double w = c.weights ? std::fabs(double(p.weights[size_t(s)])) : 1.0;
    for (int64_t j = 0; j < c.n; ++j) {
      double total = 0;
      for (int64_t kb = 0; kb < p.kb; ++kb) {
        double sum = 0;
        const int64_t k_end = c.block ? std::min(c.k, (kb + 1) * 128) : c.k;
        for (int64_t kk = c.block ? kb * 128 : 0; kk < k_end; ++kk) {
          sum += std::fabs(double(a[size_t(row * c.k + kk)]) * double(b[size_t((e * c.n + j) * c.k + kk)]));
        }
        const double scale = c.block ? double(p.a_scale[size_t(row * p.kb + kb)]) *
                                           double(p.b_scale[size_t((e * p.nb + j / 128) * p.kb + kb)])
                                     : double(p.a_scale[0]) * double(p.b_scale[size_t(e)]);
        total += sum * scale;
      }
      magnitude[size_t(s * c.n + j)] = total * w;
    }
  }
}

Tensor gpu_i32(const std::vector<int32_t>& v) { return Tensor::from_vector(v).to(Device::cuda(0)); }
Tensor gpu_f32(const std::vector<float>& v) { return Tensor::from_vector(v).to(Device::cuda(0)); }
Tensor gpu_codes(const std::vector<uint8_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kE4M3FN);
  std::copy(v.begin(), v.end(), static_cast<uint8_t*>(t.data_ptr()));
  return t.to(Device::cuda(0));
}

std::vector<float> run_gpu(const GemmCase& c, const Problem& p, Kernel kern) {
  const int64_t slots = c.rows * c.top_k;
  const Tensor ids = Tensor::from_vector(p.ids, Shape{c.rows, c.top_k}).to(Device::cuda(0));
  const Tensor map = c.ep_local > 0 ? gpu_i32(p.expert_map) : Tensor();
  const ops::MoeAlignResult align = ops::moe_align_block_size(gpu_test::ctx_of(ids), ids, c.block_m, c.e, map);
  const Tensor a = gpu_codes(p.a, Shape{c.rows, c.k});
  const Tensor b = gpu_codes(p.b, Shape{p.experts_local, c.n, c.k});
  const Tensor a_scale = gpu_f32(p.a_scale), b_scale = gpu_f32(p.b_scale), weights = gpu_f32(p.weights);
  const Tensor out = gpu_test::poisoned({slots, c.n}, DType::kF32, Device::cuda(0), 0xFF);

  GroupedGemmArgs g;
  g.n = c.n, g.k = c.k, g.num_slots = slots, g.a_slots_per_row = c.top_k, g.block_m = c.block_m;
  g.grid_m_blocks = align.expert_ids.size(0);
  g.sorted_ids = static_cast<const int32_t*>(align.sorted_token_ids.data_ptr());
  g.expert_ids = static_cast<const int32_t*>(align.expert_ids.data_ptr());
  g.num_post_pad = static_cast<const int32_t*>(align.num_tokens_post_padded.data_ptr());
  g.a = a.data_ptr(), g.lda = c.k;
  g.b = b.data_ptr(), g.b_expert_stride = c.n * c.k, g.ldb = c.k, g.num_experts = p.experts_local;
  g.quant = ops::ExpertQuant::kFp8W8A8;
  g.block = c.block, g.block_n = c.block ? 128 : 0, g.block_k = c.block ? 128 : 0;
  g.a_scale = static_cast<const float*>(a_scale.data_ptr());
  g.b_scale = static_cast<const float*>(b_scale.data_ptr());
  g.slot_weight = c.weights ? static_cast<const float*>(weights.data_ptr()) : nullptr;
  g.c = out.data_ptr(), g.c_dtype = DType::kF32, g.ldc = c.n;
  const Tensor partials =
      gpu_test::poisoned({c.k_splits, slots, c.n}, DType::kF32, Device::cuda(0), 0xFF);  // every split writes every slot
  if (c.k_splits > 1) {
    EXPECT_EQ(kern, Kernel::kWgmma);
    g.k_splits = c.k_splits;
    g.partials = static_cast<float*>(partials.data_ptr());
  }
  switch (kern) {
    case Kernel::kWgmma:
      EXPECT_EQ(ops::grouped_gemm_sm90_wgmma_rejects(g, 0), "");
      ops::grouped_gemm_sm90_wgmma(g, nullptr);
      break;
    case Kernel::kMma:
      EXPECT_EQ(ops::grouped_gemm_sm90_e4m3_rejects(g, 0), "");
      ops::grouped_gemm_sm90_e4m3(g, nullptr);
      break;
    case Kernel::kSimt: ops::grouped_gemm_simt(g, nullptr); break;
  }
  if (c.k_splits > 1) {
    const Tensor host = partials.to(Device::cpu());
    const float* v = static_cast<const float*>(host.data_ptr());
    std::vector<float> sum(size_t(slots * c.n), 0.0f);
    for (int64_t sp = 0; sp < c.k_splits; ++sp) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[size_t(sp) * sum.size() + i];
    }
    return sum;
  }
  const Tensor host = out.to(Device::cpu());
  const float* v = static_cast<const float*>(host.data_ptr());
  return std::vector<float>(v, v + slots * c.n);
}

void check(const GemmCase& c, Kernel kern) {
  if (kern == Kernel::kMma && c.block_m == 128) return;  // the mma.sync kernel tiles 16 or 64
  const uint32_t seed = gpu_test::next_seed();
  SCOPED_TRACE(c.str(kern, seed));
  const Problem p = make_problem(c, seed);
  std::vector<float> want;
  std::vector<double> magnitude;
  reference(c, p, want, magnitude);
  const std::vector<float> got = run_gpu(c, p, kern);
  const double bound = kern == Kernel::kWgmma ? kWgmmaTileBound : double(c.k + 8) * std::ldexp(1.0, -24);
  int64_t bad = 0, first_bad = -1;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = 0;
    if (c.grid) {
      err = got[i] == want[i] ? 0.0 : 1.0;
    } else if (magnitude[i] == 0) {
      err = got[i] == 0.0f ? 0.0 : 1.0;
    } else {
      err = std::fabs(double(got[i]) - double(want[i])) / magnitude[i];
    }
    if (!(err <= (c.grid ? 0.0 : bound))) {  // NaN counts as bad
      if (bad++ == 0) first_bad = int64_t(i);
    }
    worst = std::isnan(err) || std::isnan(double(got[i])) ? NAN : std::max(worst, err);
  }
  EXPECT_EQ(bad, 0) << c.str(kern, seed) << ": " << bad << " of " << got.size() << " outputs off (bound "
                    << (c.grid ? 0.0 : bound) << " of the term magnitude); first at slot "
                    << (first_bad >= 0 ? first_bad / c.n : -1) << " col " << (first_bad >= 0 ? first_bad % c.n : -1)
                    << (first_bad >= 0 ? ": got " + std::to_string(got[size_t(first_bad)]) + " want " +
                                             std::to_string(want[size_t(first_bad)])
                                       : "");
  EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](float v) { return v != 0; })) << "vacuous";
  if (!c.grid) std::printf("  %-44s %-8s largest err / term magnitude %.3g\n", c.name.c_str(), kernel_name(kern), worst);
}

void check_all_kernels(const GemmCase& c) {
  for (const Kernel k : {Kernel::kWgmma, Kernel::kMma, Kernel::kSimt}) check(c, k);
}

TEST(GroupedGemmCuda, IntegerGridIsExact) {
  for (const int64_t block_m : {16, 64, 128}) {
    for (const bool block : {false, true}) {
      GemmCase c;
      c.grid = true, c.block_m = block_m, c.block = block;
      c.name = "grid";
      check_all_kernels(c);
      c.name = "grid, K and N tails, many experts";
      c.rows = 300, c.top_k = 8, c.e = 64, c.n = 336, c.k = 400;
      check_all_kernels(c);
      c.name = "grid, expert parallel (experts of other ranks write zeros)";
      c.rows = 100, c.top_k = 4, c.e = 16, c.ep_local = 6, c.n = 128, c.k = 640;
      check_all_kernels(c);
    }
  }
}

TEST(GroupedGemmCuda, RandomWithinAccumulationBounds) {
  for (const int64_t block_m : {16, 64, 128}) {
    for (const bool block : {false, true}) {
      GemmCase c;
      c.block_m = block_m, c.block = block;
      c.name = "random";
      c.rows = 200, c.top_k = 2, c.e = 8, c.n = 384, c.k = 1024;
      check_all_kernels(c);
      c.name = "random, long K, no routed weights";
      c.rows = 64, c.top_k = 1, c.e = 4, c.n = 128, c.k = 4096, c.weights = false;
      check_all_kernels(c);
    }
  }
}

// Split K (the fused MoE's decode GEMM2): every split's partial sums, added in order, give the
// unsplit result: exact on the integer grid, within the same bound on random codes. 5 splits of
// 8 K tiles leave the last split without a tile (its partial sums must be zeros).
TEST(GroupedGemmCuda, SplitKPartialSums) {
  for (const int64_t block_m : {16}) {
    for (const bool block : {false, true}) {
      for (const int64_t splits : {2, 3, 5}) {
        GemmCase c;
        c.block_m = block_m, c.block = block, c.k_splits = splits;
        c.grid = true, c.name = "grid, split K";
        c.rows = 40, c.top_k = 2, c.e = 8, c.n = 320, c.k = 1024;
        check(c, Kernel::kWgmma);
        c.name = "grid, split K, expert parallel";
        c.e = 16, c.ep_local = 6, c.top_k = 4;
        check(c, Kernel::kWgmma);
        c.grid = false, c.ep_local = 0, c.e = 8, c.top_k = 2, c.name = "random, split K";
        check(c, Kernel::kWgmma);
      }
    }
  }
}

}  // namespace
}  // namespace fp8kit
