// main() of the GPU tests: without a CUDA device the suite is skipped (exit code 77, which ctest
// reports as skipped), never passed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "fp8kit/platform.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (fp8kit::cuda_device_count() == 0 && !::testing::GTEST_FLAG(list_tests)) {
    std::printf("fp8kit_gpu_tests: no CUDA device: skipped\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
