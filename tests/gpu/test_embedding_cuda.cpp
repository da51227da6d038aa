// embedding on CUDA against the CPU reference (src/ops/embedding/embedding_ref.cpp), bit for bit:
// every dtype, i32 and i64 ids of any shape, the 16-byte and the element path (odd widths,
// strided and misaligned tables), the vocab-parallel mask of another rank's ids, ids outside the
// vocabulary (zeros on CUDA; the CPU entry refuses them), NaN payloads, poisoned outputs.
#include <gtest/gtest.h>

#include <random>

#include "fp8kit/ops/embedding.h"
#include "gpu_test_util.h"

namespace fp8kit {
namespace {

using namespace gpu_test;

const Device kGpu = Device::cuda(0);

void check_embedding(DType dt, DType id_type, int64_t rows, int64_t hidden, int64_t ld, int64_t offset,
                     int64_t vocab_start, int64_t n, uint32_t seed) {
  Tensor base = random_tensor({rows * ld + offset + 1}, dt, seed);
  if (dt == DType::kBF16) base.data<BFloat16>()[offset] = BFloat16{0x7FC1};  // a NaN payload is copied as is
  const Tensor table = Tensor::from_storage(base.storage(), {rows, hidden}, {ld, 1}, offset, dt);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> id(0, vocab_start + rows + rows / 2);  // this rank's and others'
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (auto& v : ids) v = id(rng);
  Tensor ids_t = Tensor::empty({n}, id_type);
  for (int64_t i = 0; i < n; ++i) {
    if (id_type == DType::kI32) {
      ids_t.data<int32_t>()[i] = int32_t(ids[size_t(i)]);
    } else {
      ids_t.data<int64_t>()[i] = ids[size_t(i)];
    }
  }
  ops::EmbeddingOptions o;
  o.vocab_start = vocab_start;
  o.vocab_size = vocab_start + rows + rows / 2 + 1;
  const Tensor want = ops::embedding(ctx_of(table), ids_t, table, o);
  ops::EmbeddingOptions od = o;
  od.out = poisoned({n, hidden}, dt, kGpu, 0xff);
  const Tensor got = ops::embedding(cuda_ctx(), ids_t.to(kGpu), device_view(base, table), od);
  const Case c{"embedding", {rows, hidden}, dt, dt, seed,
               std::string(dtype_name(id_type)) + " ids, row stride " + std::to_string(ld) + ", offset " +
                   std::to_string(offset) + ", vocab_start " + std::to_string(vocab_start)};
  expect_same_tensor(c, "rows", got, want);
}

TEST(EmbeddingCuda, BitExactEveryDtypeIdTypeAndLayout) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (DType id_type : {DType::kI32, DType::kI64}) {
      for (auto [hidden, ld, offset] : {std::tuple<int64_t, int64_t, int64_t>{4096, 4096, 0},
                                        {4096, 4104, 0},
                                        {4096, 4096, 1},
                                        {3, 5, 0},
                                        {129, 129, 0}}) {
        check_embedding(dt, id_type, 300, hidden, ld, offset, 0, 77, next_seed());
        check_embedding(dt, id_type, 300, hidden, ld, offset, 1000, 77, next_seed());  // rank 1's shard
      }
    }
  }
}

TEST(EmbeddingCuda, IdsOutsideTheVocabularyGiveZeroRowsOnCuda) {
  // The CPU entry refuses them; the kernel cannot report and writes zeros, as for another rank's id.
  const Tensor table = random_tensor({8, 64}, DType::kBF16, 3);
  const Tensor ids = Tensor::from_vector<int64_t>({-5, 2, 8, 1 << 30, 7});
  const Tensor got = to_host(ops::embedding(cuda_ctx(), ids.to(kGpu), table.to(kGpu)));
  const std::vector<float> g = to_floats(got), t = to_floats(table);
  for (int64_t d = 0; d < 64; ++d) {
    EXPECT_EQ(g[size_t(d)], 0.0f);
    EXPECT_EQ(g[size_t(64 + d)], t[size_t(2 * 64 + d)]);
    EXPECT_EQ(g[size_t(2 * 64 + d)], 0.0f);
    EXPECT_EQ(g[size_t(3 * 64 + d)], 0.0f);
    EXPECT_EQ(g[size_t(4 * 64 + d)], t[size_t(7 * 64 + d)]);
  }
  EXPECT_EQ(ops::embedding(cuda_ctx(), Tensor::empty({0}, DType::kI64, kGpu), table.to(kGpu)).numel(), 0);
}

}  // namespace
}  // namespace fp8kit
