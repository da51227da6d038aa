// Overrides::parse: defaults, every knob's accepted values, and the error text of a bad value.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "expect_error.h"
#include "core/parallel.h"
#include "fp8kit/runtime/overrides.h"

namespace fp8kit {
namespace {

using testing::expect_invalid;

Overrides parse(const std::map<std::string, std::string>& env) {
  return Overrides::parse([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(Overrides, DefaultsWhenNothingIsSet) {
  const Overrides o = parse({});
  EXPECT_EQ(o.num_threads, 0);
  EXPECT_TRUE(o.pin_threads);
  EXPECT_EQ(o.cpu_backend, CpuBackend::kAuto);
  EXPECT_FALSE(o.debug_sync);
  EXPECT_TRUE(o.pdl);
  EXPECT_EQ(o.gemm_backend, GemmBackendOverride::kAuto);
  EXPECT_EQ(o.decode_k_splits, 0);
  EXPECT_EQ(o.weight_only_gemm, WeightOnlyGemmOverride::kAuto);
  EXPECT_FALSE(o.force_weight_only);
  EXPECT_EQ(o.fused_moe_chunk_size, 32768);
  EXPECT_EQ(o.moe_gemm, MoeGemmOverride::kAuto);
  EXPECT_EQ(o.moe_block_m, 0);
  EXPECT_FALSE(o.moe_fast_accum);
  EXPECT_EQ(o.moe_k_splits, 0);
  EXPECT_EQ(o.q_scale_constant, 200);
  EXPECT_EQ(o.k_scale_constant, 200);
  EXPECT_EQ(o.v_scale_constant, 100);
}

TEST(Overrides, EmptyValuesKeepTheDefaults) {
  const Overrides o = parse({{"FP8KIT_NUM_THREADS", ""}, {"FP8KIT_FUSED_MOE_CHUNK_SIZE", ""}, {"FP8KIT_PDL", ""}});
  EXPECT_EQ(o.num_threads, 0);
  EXPECT_EQ(o.fused_moe_chunk_size, 32768);
  EXPECT_TRUE(o.pdl);
}

TEST(Overrides, EveryKnobParses) {
  const Overrides o = parse({{"FP8KIT_NUM_THREADS", "3"},
                             {"FP8KIT_PIN_THREADS", "0"},
                             {"FP8KIT_CPU_BACKEND", "reference"},
                             {"FP8KIT_DEBUG_SYNC", "1"},
                             {"FP8KIT_PDL", "0"},
                             {"FP8KIT_GEMM_BACKEND", "wgmma"},
                             {"FP8KIT_DECODE_K_SPLITS", "64"},
                             {"FP8KIT_WEIGHT_ONLY_GEMM", "tiled"},
                             {"FP8KIT_FORCE_WEIGHT_ONLY", "1"},
                             {"FP8KIT_FUSED_MOE_CHUNK_SIZE", "7"},
                             {"FP8KIT_MOE_GEMM", "simt"},
                             {"FP8KIT_MOE_BLOCK_M", "64"},
                             {"FP8KIT_MOE_FAST_ACCUM", "1"},
                             {"FP8KIT_MOE_K_SPLITS", "1"},
                             {"FP8KIT_ATTENTION_KERNEL", "mma"},
                             {"FP8KIT_ATTENTION_SPLITS", "7"},
                             {"FP8KIT_Q_SCALE_CONSTANT", "1"},
                             {"FP8KIT_K_SCALE_CONSTANT", "300"},
                             {"FP8KIT_V_SCALE_CONSTANT", "50"}});
  EXPECT_EQ(o.num_threads, 3);
  EXPECT_FALSE(o.pin_threads);
  EXPECT_EQ(o.cpu_backend, CpuBackend::kReference);
  EXPECT_TRUE(o.debug_sync);
  EXPECT_FALSE(o.pdl);
  EXPECT_EQ(o.gemm_backend, GemmBackendOverride::kWgmma);
  EXPECT_EQ(o.decode_k_splits, 64);
  EXPECT_EQ(o.weight_only_gemm, WeightOnlyGemmOverride::kTiled);
  EXPECT_TRUE(o.force_weight_only);
  EXPECT_EQ(o.fused_moe_chunk_size, 7);
  EXPECT_EQ(o.moe_gemm, MoeGemmOverride::kSimt);
  EXPECT_EQ(o.moe_block_m, 64);
  EXPECT_TRUE(o.moe_fast_accum);
  EXPECT_EQ(o.moe_k_splits, 1);
  EXPECT_EQ(o.attention_kernel, AttentionKernelOverride::kMma);
  EXPECT_EQ(o.attention_splits, 7);
  EXPECT_EQ(o.q_scale_constant, 1);
  EXPECT_EQ(o.k_scale_constant, 300);
  EXPECT_EQ(o.v_scale_constant, 50);
}

TEST(Overrides, BadValuesNameTheVariableAndWhatItAccepts) {
  // FP8KIT_NUM_THREADS goes through the thread pool's parse_thread_count (tests/cpu/test_parallel.cpp).
  const std::string most = std::to_string(max_threads());
  for (const char* bad : {"0", "abc", "100000", "99999999999999999999", " 2", "-1", "1e6"}) {
    expect_invalid([&] { parse({{"FP8KIT_NUM_THREADS", bad}}); },
                   "FP8KIT_NUM_THREADS must be an integer from 1 to " + most + ", got '" + bad + "'");
  }
  expect_invalid([] { parse({{"FP8KIT_GEMM_BACKEND", "cutlass"}}); },
                 "FP8KIT_GEMM_BACKEND='cutlass': expected one of decode, wgmma, cublaslt, fallback");
  expect_invalid([] { parse({{"FP8KIT_PDL", "yes"}}); }, "FP8KIT_PDL='yes': expected 0 or 1");
  expect_invalid([] { parse({{"FP8KIT_PIN_THREADS", "on"}}); }, "FP8KIT_PIN_THREADS='on': expected 0 or 1");
  expect_invalid([] { parse({{"FP8KIT_MOE_BLOCK_M", "32"}}); }, "FP8KIT_MOE_BLOCK_M='32': expected 16, 64 or 128");
  expect_invalid([] { parse({{"FP8KIT_DECODE_K_SPLITS", "65"}}); },
                 "FP8KIT_DECODE_K_SPLITS='65': expected an integer from 1 to 64");
  expect_invalid([] { parse({{"FP8KIT_FUSED_MOE_CHUNK_SIZE", "-5"}}); },
                 "FP8KIT_FUSED_MOE_CHUNK_SIZE='-5': expected an integer from 1 to 1099511627776");
  expect_invalid([] { parse({{"FP8KIT_CPU_BACKEND", "avx"}}); },
                 "FP8KIT_CPU_BACKEND='avx': expected one of auto, reference, fast");
  expect_invalid([] { parse({{"FP8KIT_ATTENTION_KERNEL", "flash"}}); },
                 "FP8KIT_ATTENTION_KERNEL='flash': expected one of simt, mma");
  expect_invalid([] { parse({{"FP8KIT_ATTENTION_SPLITS", "0"}}); },
                 "FP8KIT_ATTENTION_SPLITS='0': expected an integer from 1 to 64");
}

TEST(Overrides, VariableNamesListEveryKnob) {
  const auto& names = override_variable_names();
  EXPECT_EQ(names.size(), 19u);
  EXPECT_EQ(names.front(), "FP8KIT_NUM_THREADS");
  EXPECT_NE(std::find(names.begin(), names.end(), "FP8KIT_MOE_K_SPLITS"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "FP8KIT_PIN_THREADS"), names.end());
}

}  // namespace
}  // namespace fp8kit
