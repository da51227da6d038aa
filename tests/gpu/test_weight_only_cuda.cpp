// weight_only_mm on the GPU against the CPU reference: every weight scaling, both activation
// dtypes, bias, ragged shapes, poisoned outputs; the default kernels (decode M = 1, streaming
// tensor-core M <= 32, tiled M > 32, K split where its tiles are few), the tiled kernel at every M
// (FP8KIT_WEIGHT_ONLY_GEMM=tiled), and with
// FP8KIT_WEIGHT_ONLY_GEMM=cuda_core the CUDA-core decode (M <= 8) and generic kernels.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cpu/gemm_test_util.h"
#include "fp8kit/ops/gemm.h"
#include "gpu_test_util.h"

namespace fp8kit {
namespace {

using namespace gemm_test;

void check_against_reference(const char* kernels, WeightOnlyGemmOverride forced = WeightOnlyGemmOverride::kAuto) {
  Overrides overrides;
  overrides.weight_only_gemm = forced;
  const ForwardContext gpu_ctx(Device::cuda(0), overrides);
  std::mt19937 rng(31);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Device gpu = Device::cuda(0);
  for (DType act : {DType::kBF16, DType::kF16}) {
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {1, 256, 512}, {7, 129, 300}, {64, 384, 1024},
             // decode kernel (M <= 8, K % 16 == 0): ragged N, K tails of its 2048-wide steps
             {1, 4096, 4096}, {2, 200, 2064}, {3, 33, 16}, {5, 1000, 1536}, {8, 129, 4112},
             // tensor-core kernel: 2, 4 and 8 token tiles, K slices of uneven length, N tails
             {16, 256, 640}, {33, 130, 2048}, {20, 64, 128},
             // tiled kernel (M > 32): row and column tails, odd N (single stores), K tails of its
             // 32-wide tiles, several tiles each way, K split in 4 and 8
             {65, 129, 336}, {200, 520, 1040}, {300, 257, 2064}}) {
      Tensor x = Tensor::empty({m, k}, act);
      for (int64_t i = 0; i < m * k; ++i) {
        if (act == DType::kBF16) x.data<BFloat16>()[i] = float_to_bf16(nd(rng));
        else x.data<Float16>()[i] = float_to_f16(nd(rng));
      }
      const Tensor w = random_e4m3(n, k, rng);
      // Scaling 3: 16 x 64 blocks, which the tiled kernel does not take (block_n % 32 != 0): the
      // streaming kernel up to 64 rows, the generic one above.
      for (int scaling = 0; scaling < 4; ++scaling) {
        ops::WeightOnlyMmOptions o;
        Tensor scale;
        if (scaling == 0) scale = random_scales({}, rng);
        if (scaling == 1) scale = random_scales({n}, rng);
        if (scaling == 2) {
          scale = random_scales({(n + 127) / 128, (k + 127) / 128}, rng);
          o.block = std::make_pair(128, 128);
        }
        if (scaling == 3) {
          scale = random_scales({(n + 15) / 16, (k + 63) / 64}, rng);
          o.block = std::make_pair(16, 64);
        }
        Tensor bias = Tensor::empty({n}, act);
        for (int64_t j = 0; j < n; ++j) {
          if (act == DType::kBF16) bias.data<BFloat16>()[j] = float_to_bf16(nd(rng));
          else bias.data<Float16>()[j] = float_to_f16(nd(rng));
        }
        o.bias = bias;
        const Tensor want = ops::weight_only_mm(gpu_test::ctx_of(x), x, w, scale, o);
        ops::WeightOnlyMmOptions og = o;
        og.bias = bias.to(gpu);
        og.output = Tensor::empty({m, n}, act, gpu);
        og.output.fill_bytes_(0xff);  // NaN
        const Tensor got = ops::weight_only_mm(gpu_ctx, x.to(gpu), w.to(gpu), scale.to(gpu), og).to(Device::cpu());
        const double unit = act == DType::kBF16 ? 8e-3 : 1e-3;
        int64_t bad = 0;
        for (int64_t i = 0; i < m * n; ++i) {
          const double g = read_out(got, i), r = read_out(want, i);
          bad += std::abs(g - r) <= 2 * unit * std::abs(r) + 1e-3 ? 0 : 1;  // NaN counts as bad
        }
        EXPECT_EQ(bad, 0) << kernels << " kernels, " << dtype_name(act) << " scaling " << scaling << " m,n,k " << m
                          << "," << n << "," << k;
      }
    }
  }
}

TEST(WeightOnlyCuda, MatchesTheReference) { check_against_reference("default"); }

TEST(WeightOnlyCuda, TiledKernelMatchesTheReferenceAtEveryM) {
  check_against_reference("tiled", WeightOnlyGemmOverride::kTiled);
}

// The kernel choice is plan_weight_only_mm's (tests/cpu/test_gemm_config.cpp), its knob parsed by
// Overrides::parse (tests/cpu/test_overrides.cpp); a CPU context on a CUDA tensor is an error.
TEST(WeightOnlyCuda, ContextOfAnotherDeviceIsAnError) {
  const Device gpu = Device::cuda(0);
  const Tensor x = Tensor::zeros({2, 16}, DType::kBF16, gpu);
  const Tensor w = Tensor::zeros({16, 16}, DType::kE4M3FN, gpu);
  const Tensor scale = Tensor::scalar_f32(1.0f).to(gpu);
  EXPECT_THROW(ops::weight_only_mm(ForwardContext(), x, w, scale, {}), Error);
}

TEST(WeightOnlyCuda, CudaCoreKernelsMatchTheReference) {
  check_against_reference("CUDA-core", WeightOnlyGemmOverride::kCudaCore);
}

}  // namespace
}  // namespace fp8kit
