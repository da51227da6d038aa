// safetensors round trips (every dtype, zero-rank and empty tensors, metadata, strided input, any
// write order), the writer's layout (alignment, padding, exact bytes of a small file), writer
// errors and atomicity. Malformed files are in test_safetensors_errors.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "fp8kit/safetensors.h"
#include "io_test_util.h"

namespace fp8kit {
namespace {

using testing::error_message;
using testing::exists;
using testing::fresh_dir;
using testing::read_bytes;

constexpr int kNumDTypes = static_cast<int>(DType::kBool) + 1;

// A CPU tensor whose bytes are a pattern that depends on `seed`.
Tensor patterned(const Shape& shape, DType dtype, uint32_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(seed * 131 + i * 37 + 11);
  return t;
}

std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

std::string tmp_name(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

TEST(SafetensorsRoundTrip, EveryDTypeAndShape) {
  const std::string path = fresh_dir("roundtrip_dtypes") + "/all.safetensors";
  const std::vector<Shape> shapes = {{}, {0}, {3, 0}, {1}, {5}, {2, 3}, {3, 1, 4}};
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dtype = static_cast<DType>(d);
    for (size_t s = 0; s < shapes.size(); ++s) {
      tensors.emplace_back(fmt::format("{}.s{}", dtype_name(dtype), s),
                           patterned(shapes[s], dtype, static_cast<uint32_t>(d * 10 + s)));
    }
  }
  save_safetensors(path, tensors, {{"note", "round trip"}});

  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "round trip"}}));
  ASSERT_EQ(file->tensors().size(), tensors.size());
  for (const auto& [name, expected] : tensors) {
    SCOPED_TRACE(name);
    const TensorInfo* info = file->find(name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, expected.dtype());
    EXPECT_EQ(info->shape, expected.shape());
    EXPECT_EQ(info->data_begin % dtype_size(info->dtype), 0u);
    const Tensor t = file->tensor(name);
    EXPECT_EQ(t.dtype(), expected.dtype());
    EXPECT_EQ(t.shape(), expected.shape());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % dtype_size(t.dtype()), 0u);
    EXPECT_EQ(bytes_of(t), bytes_of(expected));
  }
  EXPECT_FALSE(exists(tmp_name(path)));
}

TEST(SafetensorsRoundTrip, LayoutIsAlignedAndPadded) {
  const std::string path = fresh_dir("layout") + "/layout.safetensors";
  // Names chosen so that name order and alignment order disagree.
  save_safetensors(path, {{"a.u8", patterned({3}, DType::kU8, 1)},
                          {"b.f64", patterned({1}, DType::kF64, 2)},
                          {"c.bf16", patterned({5}, DType::kBF16, 3)},
                          {"d.f32", patterned({}, DType::kF32, 4)},
                          {"e.i64", patterned({2}, DType::kI64, 5)}});
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  const auto file = SafetensorsFile::open(path);
  std::vector<std::string> order;
  for (const TensorInfo& t : file->tensors()) {
    order.push_back(t.name);
    EXPECT_EQ((8 + n + t.data_begin) % dtype_size(t.dtype), 0u) << t.name;
  }
  EXPECT_EQ(order, (std::vector<std::string>{"e.i64", "b.f64", "d.f32", "c.bf16", "a.u8"}));
  EXPECT_EQ(file->file_size(), bytes.size());
}

TEST(SafetensorsRoundTrip, SameSizeDTypesInTheReferenceWriterOrder) {
  const std::string path = fresh_dir("dtype_order") + "/order.safetensors";
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dtype = static_cast<DType>(d);
    tensors.emplace_back(std::string("t.") + dtype_safetensors_name(dtype), patterned({1}, dtype, 0));
  }
  save_safetensors(path, tensors);
  std::vector<std::string> order;
  const auto file = SafetensorsFile::open(path);
  for (const TensorInfo& t : file->tensors()) order.push_back(dtype_safetensors_name(t.dtype));
  // The order safetensors 0.8 (Python over the Rust writer) gives the same tensors.
  EXPECT_EQ(order, (std::vector<std::string>{"U64", "I64", "F64", "F32", "U32", "I32", "BF16", "F16", "U16", "I16",
                                             "F8_E5M2FNUZ", "F8_E4M3FNUZ", "F8_E8M0", "F8_E4M3", "F8_E5M2", "I8", "U8",
                                             "BOOL"}));
}

TEST(SafetensorsRoundTrip, ExactBytesOfASmallFile) {
  const std::string path = fresh_dir("exact") + "/small.safetensors";
  Tensor c = Tensor::from_vector(std::vector<uint8_t>{7, 8, 9});
  Tensor a = Tensor::from_vector(std::vector<float>{1.0f}, Shape{});
  Tensor s = Tensor::from_vector(std::vector<int64_t>{5});
  Tensor b = Tensor::from_vector(std::vector<uint16_t>{0x0201, 0x0403});
  save_safetensors(path, {{"c", c}, {"a", a}, {"s", s}, {"b", b}});
  // The bytes the reference Python/Rust writer produces for the same tensors.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("s":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"F32","shape":[],"data_offsets":[8,12]},)"
      R"("b":{"dtype":"U16","shape":[2],"data_offsets":[12,16]},)"
      R"("c":{"dtype":"U8","shape":[3],"data_offsets":[16,19]}} )";
  ASSERT_EQ(header.size(), 248u);
  const std::string data("\x05\0\0\0\0\0\0\0" "\0\0\x80\x3f" "\x01\x02\x03\x04" "\x07\x08\x09", 19);
  EXPECT_EQ(read_bytes(path), testing::le64(248) + header + data);
}

TEST(SafetensorsRoundTrip, MetadataFormatIsKeptWhenGiven) {
  const std::string path = fresh_dir("metadata") + "/m.safetensors";
  save_safetensors(path, {{"x", patterned({2}, DType::kF16, 1)}}, {{"format", "mlx"}, {"k", "v \"quoted\"\n"}});
  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->metadata(), (std::map<std::string, std::string>{{"format", "mlx"}, {"k", "v \"quoted\"\n"}}));
}

TEST(SafetensorsRoundTrip, NoTensorsAtAll) {
  const std::string path = fresh_dir("no_tensors") + "/empty.safetensors";
  save_safetensors(path, {});
  const auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_EQ(file->metadata().at("format"), "pt");
}

TEST(SafetensorsRoundTrip, StridedInput) {
  const std::string path = fresh_dir("strided") + "/strided.safetensors";
  std::vector<float> values(6 * 4);
  std::iota(values.begin(), values.end(), 0.0f);
  const Tensor base = Tensor::from_vector(values, {6, 4});
  const Tensor transposed = base.t();               // [4, 6], strides [1, 4]
  const Tensor narrowed = base.narrow(1, 1, 2);     // [6, 2], strides [4, 1]
  const Tensor picked = base.select(1, 3);          // [6], stride 4
  // Larger than the writer's copy buffer, so the copy goes chunk by chunk: by rows of a
  // transposed matrix, and by pieces of a single strided row.
  const Tensor big = patterned({1536, 2048}, DType::kF32, 9).t();
  const Tensor long_rows = patterned({9 << 20, 2}, DType::kU8, 10).t();  // [2, 9 Mi], row stride 1, col stride 2
  SafetensorsWriter writer(path, {{"transposed", DType::kF32, transposed.shape()},
                                  {"narrowed", DType::kF32, narrowed.shape()},
                                  {"picked", DType::kF32, picked.shape()},
                                  {"big", DType::kF32, big.shape()},
                                  {"long_rows", DType::kU8, long_rows.shape()}});
  writer.write("transposed", transposed);
  writer.write("narrowed", narrowed);
  writer.write("picked", picked);
  writer.write("big", big);
  writer.write("long_rows", long_rows);
  writer.finish();
  const auto file = SafetensorsFile::open(path);
  for (const auto& [name, expected] : std::vector<std::pair<std::string, Tensor>>{
           {"transposed", transposed}, {"narrowed", narrowed}, {"picked", picked}, {"big", big},
           {"long_rows", long_rows}}) {
    EXPECT_EQ(file->tensor(name).shape(), expected.shape()) << name;
    EXPECT_TRUE(bytes_of(file->tensor(name)) == bytes_of(expected)) << name;
  }
}

TEST(SafetensorsRoundTrip, AnyWriteOrderGivesTheSameFile) {
  const std::string dir = fresh_dir("write_order");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (int i = 0; i < 7; ++i) {
    const auto dtype = static_cast<DType>((i * 5) % kNumDTypes);
    tensors.emplace_back("t" + std::to_string(i), patterned({i + 1, 3}, dtype, static_cast<uint32_t>(i)));
  }
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : tensors) specs.push_back({name, t.dtype(), t.shape()});
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(42);
  std::string first;
  for (int trial = 0; trial < 4; ++trial) {
    if (trial == 1) std::reverse(order.begin(), order.end());
    if (trial > 1) std::shuffle(order.begin(), order.end(), rng);
    const std::string path = dir + "/order" + std::to_string(trial) + ".safetensors";
    SafetensorsWriter writer(path, specs);
    for (size_t i : order) writer.write(tensors[i].first, tensors[i].second);
    writer.finish();
    if (trial == 0) {
      first = read_bytes(path);
    } else {
      EXPECT_TRUE(read_bytes(path) == first) << "trial " << trial;
    }
  }
  const auto file = SafetensorsFile::open(dir + "/order3.safetensors");
  for (const auto& [name, t] : tensors) EXPECT_EQ(bytes_of(file->tensor(name)), bytes_of(t)) << name;
}

TEST(SafetensorsRoundTrip, ViewsOutliveTheFileObjectAndTheDirectoryEntry) {
  const std::string path = fresh_dir("lifetime") + "/x.safetensors";
  const Tensor expected = patterned({64, 3}, DType::kBF16, 3);
  save_safetensors(path, {{"x", expected}});
  Tensor view;
  {
    const auto file = SafetensorsFile::open(path);
    view = file->tensor("x");
  }
  std::filesystem::remove(path);
  EXPECT_EQ(bytes_of(view), bytes_of(expected));
}

TEST(SafetensorsRoundTrip, ReleaseDropsPagesButDataComesBack) {
  const std::string path = fresh_dir("release") + "/r.safetensors";
  const Tensor a = patterned({3000}, DType::kF32, 1);
  const Tensor b = patterned({5}, DType::kU8, 2);
  const Tensor e = patterned({0, 4}, DType::kF32, 3);
  save_safetensors(path, {{"a", a}, {"b", b}, {"e", e}});
  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(bytes_of(file->tensor("a")), bytes_of(a));
  file->release("a");
  file->release("b");
  file->release("e");
  EXPECT_EQ(bytes_of(file->tensor("a")), bytes_of(a));
  EXPECT_EQ(bytes_of(file->tensor("b")), bytes_of(b));
  EXPECT_EQ(error_message([&] { file->release("zz"); }), path + ": no tensor named 'zz'");
}

TEST(SafetensorsRoundTrip, ManyTensors) {
  const std::string path = fresh_dir("many") + "/many.safetensors";
  constexpr int kCount = 100'000;
  std::vector<TensorSpec> specs;
  specs.reserve(kCount);
  for (int i = 0; i < kCount; ++i) specs.push_back({fmt::format("model.layers.{}.weight", i), DType::kU8, {1}});
  {
    SafetensorsWriter writer(path, specs);
    for (int i = 0; i < kCount; ++i) {
      writer.write(specs[i].name, Tensor::from_vector(std::vector<uint8_t>{static_cast<uint8_t>(i)}));
    }
    writer.finish();
  }
  const auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file->tensors().size(), static_cast<size_t>(kCount));
  const Tensor t = file->tensor("model.layers.12345.weight");
  EXPECT_EQ(static_cast<const uint8_t*>(t.data_ptr())[0], static_cast<uint8_t>(12345));
}

// ---- writer errors ----

TEST(SafetensorsWriter, RejectsBadPlans) {
  const std::string path = fresh_dir("writer_plans") + "/w.safetensors";
  const auto code = ErrorCode::kInvalidArgument;
  EXPECT_EQ(error_message([&] { SafetensorsWriter w(path, {{"a", DType::kF32, {1}}, {"a", DType::kF16, {2}}}); },
                          code),
            path + ": duplicate tensor name 'a'");
  EXPECT_EQ(error_message([&] { SafetensorsWriter w(path, {{"", DType::kF32, {1}}}); }, code),
            path + ": empty tensor name");
  EXPECT_EQ(error_message([&] { SafetensorsWriter w(path, {{"__metadata__", DType::kF32, {1}}}); }, code),
            path + ": \"__metadata__\" cannot name a tensor");
  EXPECT_EQ(error_message([&] { SafetensorsWriter w(path, {{"neg", DType::kF32, {2, -1}}}); }, code),
            path + ": tensor 'neg' has a negative dimension in shape [2, -1]");
  EXPECT_EQ(error_message([&] { SafetensorsWriter w(path, {{"big", DType::kF32, {1 << 30, 1 << 30, 1 << 30}}}); },
                          code),
            path + ": tensor 'big' has too many elements in shape [1073741824, 1073741824, 1073741824]");
  EXPECT_EQ(error_message([&] { SafetensorsWriter w(path, {{"a", DType::kF64, {1 << 30, 1 << 30}},
                                                           {"b", DType::kF64, {1 << 30, 1 << 30}},
                                                           {"c", DType::kF64, {1 << 30, 1 << 30}}}); }, code),
            path + ": the tensors hold more bytes than a file can");
  EXPECT_EQ(error_message([&] { SafetensorsWriter w(path, {{"bad\xff", DType::kF32, {1}}}); }, code),
            path + ": tensor name 'bad\\xff' is not valid UTF-8");
  EXPECT_FALSE(exists(path));
  EXPECT_FALSE(exists(tmp_name(path)));
}

TEST(SafetensorsWriter, CannotCreateNamesTheTemporaryFile) {
  const std::string path = fresh_dir("writer_create") + "/missing_dir/w.safetensors";
  EXPECT_EQ(error_message([&] { SafetensorsWriter w(path, {{"a", DType::kF32, {1}}}); }),
            tmp_name(path) + ": cannot create: No such file or directory");
}

TEST(SafetensorsWriter, RejectsBadWrites) {
  const std::string path = fresh_dir("writer_writes") + "/w.safetensors";
  const auto code = ErrorCode::kInvalidArgument;
  SafetensorsWriter writer(path, {{"a", DType::kF32, {2}}, {"b", DType::kBF16, {2, 2}}});
  EXPECT_EQ(error_message([&] { writer.write("zz", patterned({2}, DType::kF32, 0)); }, code),
            path + ": tensor 'zz' is not in the planned tensors");
  EXPECT_EQ(error_message([&] { writer.write("a", patterned({2}, DType::kBF16, 0)); }, code),
            path + ": tensor 'a' was planned as f32[2] but got bf16[2] on cpu");
  EXPECT_EQ(error_message([&] { writer.write("a", patterned({3}, DType::kF32, 0)); }, code),
            path + ": tensor 'a' was planned as f32[2] but got f32[3] on cpu");
  EXPECT_EQ(error_message([&] { writer.write("a", Tensor()); }, code), path + ": tensor 'a': undefined tensor");
  writer.write("a", patterned({2}, DType::kF32, 0));
  EXPECT_EQ(error_message([&] { writer.write("a", patterned({2}, DType::kF32, 0)); }, code),
            path + ": tensor 'a' was already written");
  EXPECT_EQ(error_message([&] { writer.finish(); }, code),
            path + ": finish() before every tensor was written: 1 missing, e.g. 'b'");
  writer.write("b", patterned({2, 2}, DType::kBF16, 1));
  writer.finish();
  EXPECT_EQ(error_message([&] { writer.finish(); }, code), path + ": finish() called twice");
  EXPECT_EQ(error_message([&] { writer.write("b", patterned({2, 2}, DType::kBF16, 1)); }, code),
            path + ": write('b') after finish()");
  EXPECT_TRUE(exists(path));
}

TEST(SafetensorsWriter, SaveRejectsDuplicateNames) {
  const std::string path = fresh_dir("save_dup") + "/w.safetensors";
  EXPECT_EQ(error_message([&] { save_safetensors(path, {{"x", patterned({1}, DType::kU8, 0)},
                                                        {"x", patterned({1}, DType::kU8, 1)}}); },
                          ErrorCode::kInvalidArgument),
            path + ": duplicate tensor name 'x'");
  EXPECT_FALSE(exists(path));
}

// ---- atomicity ----

TEST(SafetensorsWriter, UnfinishedWriterLeavesNoFile) {
  const std::string path = fresh_dir("atomic_unfinished") + "/w.safetensors";
  {
    SafetensorsWriter writer(path, {{"a", DType::kF32, {2}}, {"b", DType::kF32, {2}}});
    EXPECT_TRUE(exists(tmp_name(path)));
    writer.write("a", patterned({2}, DType::kF32, 0));
  }
  EXPECT_FALSE(exists(path));
  EXPECT_FALSE(exists(tmp_name(path)));
}

TEST(SafetensorsWriter, FailedSaveLeavesNoFile) {
  const std::string path = fresh_dir("atomic_failed") + "/w.safetensors";
  EXPECT_THROW(save_safetensors(path, {{"a", patterned({1}, DType::kF32, 0)}, {"b", Tensor()}}), Error);
  EXPECT_FALSE(exists(path));
  EXPECT_FALSE(exists(tmp_name(path)));
}

TEST(SafetensorsWriter, ExistingTargetIsUntouchedUntilFinish) {
  const std::string path = fresh_dir("atomic_existing") + "/w.safetensors";
  testing::write_bytes(path, "previous contents");
  {
    SafetensorsWriter writer(path, {{"a", DType::kF32, {2}}});
    writer.write("a", patterned({2}, DType::kF32, 0));
    EXPECT_EQ(read_bytes(path), "previous contents");
  }
  EXPECT_EQ(read_bytes(path), "previous contents");
  SafetensorsWriter writer(path, {{"a", DType::kF32, {2}}});
  writer.write("a", patterned({2}, DType::kF32, 0));
  EXPECT_EQ(read_bytes(path), "previous contents");
  writer.finish();
  EXPECT_FALSE(exists(tmp_name(path)));
  EXPECT_EQ(bytes_of(SafetensorsFile::open(path)->tensor("a")), bytes_of(patterned({2}, DType::kF32, 0)));
}

}  // namespace
}  // namespace fp8kit
