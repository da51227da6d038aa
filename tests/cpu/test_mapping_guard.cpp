// A safetensors file that shrinks after it was opened (the probe's F5: SIGBUS, no message): its
// views read zeros past the new end instead of crashing, on any thread, and verify / release /
// prefetch report the truncation naming the file and tensor; quantize stops with that error and
// leaves nothing. A SIGBUS outside a registered mapping still kills the process.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "convert/synthetic_checkpoint.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"
#include "io/mapping_guard.h"
#include "io_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

namespace fs = std::filesystem;
using testing::error_message;

constexpr int64_t kRows = 512, kCols = 1024;  // 1 MiB of BF16

// Under AddressSanitizer (scripts/test-san), the handler the guard passes a foreign SIGBUS on to
// is ASan's: it reports the fault and exits with 1 instead of the default action's death.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
constexpr bool kAsan = __has_feature(address_sanitizer);
#else
constexpr bool kAsan = false;
#endif

std::shared_ptr<const SafetensorsFile> one_big_tensor(const std::string& path) {
  Tensor t = Tensor::empty({kRows, kCols}, DType::kBF16);
  t.fill_bytes_(0x3f);
  save_safetensors(path, {{"w", t}});
  return SafetensorsFile::open(path);
}

std::string shrank(const std::string& path, uint64_t from) {
  return path + ": the file shrank from " + std::to_string(from) +
         " to 4096 bytes while tensor 'w' was read: it must not change while fp8kit reads it";
}

TEST(MappingGuard, ViewOfATruncatedFileReadsZerosAndVerifyNamesTheFile) {
  const std::string path = testing::fresh_dir("guard_truncated") + "/model.safetensors";
  const auto file = one_big_tensor(path);
  const uint64_t size = file->file_size();
  file->verify("w");  // intact
  fs::resize_file(path, 4096);
  const Tensor view = file->tensor("w");
  const Tensor copy = view.clone();  // touches every page: SIGBUS past 4096 without the guard
  const auto* bytes = static_cast<const uint8_t*>(copy.data_ptr());
  EXPECT_EQ(bytes[0], 0x3f);
  EXPECT_EQ(bytes[copy.nbytes() - 1], 0);
  EXPECT_EQ(error_message([&] { file->verify("w"); }), shrank(path, size));
  EXPECT_EQ(error_message([&] { file->release("w"); }), shrank(path, size));
}

TEST(MappingGuard, PrefetchReportsTheTruncation) {
  const std::string path = testing::fresh_dir("guard_prefetch") + "/model.safetensors";
  const auto file = one_big_tensor(path);
  const uint64_t size = file->file_size();
  fs::resize_file(path, 4096);
  EXPECT_EQ(error_message([&] { file->prefetch("w"); }), shrank(path, size));
}

TEST(MappingGuard, ReadsOnOtherThreadsSurviveToo) {
  const std::string path = testing::fresh_dir("guard_threads") + "/model.safetensors";
  const auto file = one_big_tensor(path);
  fs::resize_file(path, 4096);
  const Tensor view = file->tensor("w");
  std::vector<std::thread> readers;
  std::vector<uint64_t> sums(4, 0);
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&, i] {
      const auto* p = static_cast<const uint8_t*>(view.data_ptr());
      for (size_t j = size_t(i); j < view.nbytes(); j += 4) sums[size_t(i)] += p[j];
    });
  }
  for (std::thread& t : readers) t.join();
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  EXPECT_LT(total, uint64_t{0x3f} * 4096);  // only the first page (less its header) still holds data
  EXPECT_NE(error_message([&] { file->verify("w"); }).find("the file shrank"), std::string::npos);
}

TEST(MappingGuardDeathTest, ASigbusElsewhereStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = testing::fresh_dir("guard_elsewhere") + "/plain.bin";
  testing::write_bytes(path, std::string(8192, 'x'));
  one_big_tensor(testing::fresh_dir("guard_elsewhere_installs") + "/m.safetensors");  // the handler is installed
  EXPECT_EXIT(
      {
        const int fd = ::open(path.c_str(), O_RDONLY);
        auto* p = static_cast<volatile const char*>(::mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE, fd, 0));
        if (::ftruncate(::open(path.c_str(), O_WRONLY), 0) != 0) std::_Exit(3);
        std::_Exit(p[5000] == 'x' ? 4 : 5);  // not registered: the previous action
      },
      [](int status) {
        return kAsan ? WIFEXITED(status) && WEXITSTATUS(status) == 1 : WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
      },
      kAsan ? "AddressSanitizer: BUS" : "");
}

TEST(MappingGuard, QuantizeStopsWithTheInputFileNamed) {
  const std::string root = testing::scratch_dir();
  convert::write_synthetic_checkpoint(root + "/bf16", {});
  const std::string shard = root + "/bf16/model.safetensors";
  const uint64_t size = fs::file_size(shard);
  QuantizeOptions o;
  bool truncated = false;
  o.progress = [&](const ConversionProgress&) {
    if (!truncated) fs::resize_file(shard, 4096);
    truncated = true;
  };
  const std::string message = error_message([&] { quantize_checkpoint(root + "/bf16", root + "/out", o); });
  EXPECT_EQ(message.rfind(shard + ": the file shrank from " + std::to_string(size) + " to 4096 bytes while tensor '", 0),
            0u)
      << message;
  EXPECT_FALSE(fs::exists(root + "/out"));
  for (const auto& e : fs::directory_iterator(root)) EXPECT_EQ(e.path().filename(), "bf16");
}

}  // namespace
}  // namespace fp8kit
