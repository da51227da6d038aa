// What a checkpoint path may be (io/checkpoint_files.h): regular files only, opened without
// blocking, JSON files capped, symbolic links only inside the checkpoint (or a Hugging Face
// cache's blobs); and the same rules through Checkpoint::open, inspect and dequantize, which
// used to hang on a FIFO and read /dev/zero until memory ran out.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "convert/synthetic_checkpoint.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"
#include "io/checkpoint_files.h"
#include "io_test_util.h"

namespace fp8kit {
namespace {

namespace fs = std::filesystem;
using io::CheckpointDir;
using testing::error_message;
using testing::fresh_dir;
using testing::write_bytes;

TEST(CheckpointFiles, RegularFileOpensAndReads) {
  const std::string dir = fresh_dir("files_regular");
  write_bytes(dir + "/a.json", "{\"a\": 1}");
  const io::RegularFile f = io::open_regular_file(dir + "/a.json", io::kMaxJsonFileBytes, "a JSON file");
  EXPECT_EQ(f.size(), 8u);
  EXPECT_EQ(f.read_all(io::kMaxJsonFileBytes), "{\"a\": 1}");
}

TEST(CheckpointFiles, WhatIsNotARegularFileIsNamed) {
  const std::string dir = fresh_dir("files_irregular");
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", dir + "/zero");
  fs::create_directory(dir + "/sub");
  fs::create_symlink("loop2", dir + "/loop1");
  fs::create_symlink("loop1", dir + "/loop2");
  fs::create_symlink("nothing-here", dir + "/dangling");
  const auto open = [&](const std::string& name) { return error_message([&] { io::open_regular_file(dir + "/" + name); }); };
  // A FIFO is never opened for reading (that blocks until a writer comes): the stat says what it is.
  EXPECT_EQ(open("fifo"), dir + "/fifo: a FIFO (named pipe), not a regular file");
  EXPECT_EQ(open("zero"), dir + "/zero: a character device, not a regular file");
  EXPECT_EQ(open("sub"), dir + "/sub: a directory, not a regular file");
  EXPECT_EQ(open("loop1"), dir + "/loop1: a symbolic link loop (too many levels of symbolic links)");
  EXPECT_EQ(open("dangling"), dir + "/dangling: a dangling symbolic link (to nothing-here)");
  EXPECT_EQ(open("missing"), dir + "/missing: cannot open: No such file or directory");
}

TEST(CheckpointFiles, SizeCap) {
  const std::string dir = fresh_dir("files_cap");
  write_bytes(dir + "/big.json", std::string(101, ' '));
  EXPECT_EQ(error_message([&] { io::open_regular_file(dir + "/big.json", 100, "a JSON file"); }),
            dir + "/big.json: 101 bytes, over the limit of 100 bytes for a JSON file");
  // The JSON readers use the 256 MiB cap; a sparse file makes a large one cheaply.
  const std::string sparse = dir + "/config.json";
  write_bytes(sparse, "{}");
  fs::resize_file(sparse, io::kMaxJsonFileBytes + 1);
  EXPECT_EQ(error_message([&] { read_json_file(sparse); }),
            sparse + ": 268435457 bytes, over the limit of 268435456 bytes for a JSON file");
}

TEST(CheckpointFiles, LinksStayInsideTheCheckpoint) {
  const std::string root = fresh_dir("files_links");
  const std::string dir = root + "/ckpt";
  fs::create_directories(dir + "/sub");
  write_bytes(dir + "/real.txt", "inside");
  write_bytes(root + "/secret.txt", "outside");
  fs::create_symlink("real.txt", dir + "/inside.txt");
  fs::create_symlink("../real.txt", dir + "/sub/up.txt");
  fs::create_symlink("../secret.txt", dir + "/outside.txt");
  fs::create_symlink("/dev/zero", dir + "/zero");
  const CheckpointDir ckpt(dir);
  EXPECT_EQ(ckpt.resolve("real.txt").kind, CheckpointDir::Kind::kRegular);
  EXPECT_FALSE(ckpt.resolve("real.txt").symlink);
  EXPECT_EQ(ckpt.resolve("inside.txt").kind, CheckpointDir::Kind::kRegular);
  EXPECT_TRUE(ckpt.resolve("inside.txt").symlink);
  EXPECT_EQ(ckpt.resolve("sub/up.txt").kind, CheckpointDir::Kind::kRegular);
  EXPECT_EQ(ckpt.resolve("sub").kind, CheckpointDir::Kind::kDirectory);
  EXPECT_EQ(ckpt.resolve("none").kind, CheckpointDir::Kind::kAbsent);
  EXPECT_EQ(error_message([&] { ckpt.resolve("outside.txt"); }),
            dir + "/outside.txt: a symbolic link to " + fs::canonical(root).string() +
                "/secret.txt, outside the checkpoint directory: fp8kit does not follow it (put a copy of the file in "
                "its place)");
  EXPECT_NE(error_message([&] { ckpt.resolve("zero"); }).find("/zero: a symbolic link to /dev/zero, outside"),
            std::string::npos);
  EXPECT_EQ(ckpt.open_if_present("inside.txt")->read_all(100), "inside");
  EXPECT_FALSE(ckpt.open_if_present("none").has_value());
}

TEST(CheckpointFiles, HuggingFaceCacheSnapshotMayLinkIntoItsBlobs) {
  const std::string repo = fresh_dir("files_hf_cache") + "/models--org--name";
  const std::string snapshot = repo + "/snapshots/0123abcd";
  fs::create_directories(snapshot + "/1_Pooling");
  fs::create_directories(repo + "/blobs");
  write_bytes(repo + "/blobs/aaaa", "{\"pooling\": true}");
  write_bytes(repo + "/secret", "not a blob");
  fs::create_symlink("../../../blobs/aaaa", snapshot + "/1_Pooling/config.json");
  fs::create_symlink("../../secret", snapshot + "/secret");
  const CheckpointDir ckpt(snapshot);
  EXPECT_EQ(ckpt.resolve("1_Pooling/config.json").kind, CheckpointDir::Kind::kRegular);
  EXPECT_NE(error_message([&] { ckpt.resolve("secret"); }).find("outside the checkpoint directory"), std::string::npos);
  // A plain directory whose large files link into the cache (huggingface_hub < 0.23 --local-dir).
  const std::string local = repo + "/../local";
  fs::create_directories(local);
  fs::create_symlink(repo + "/blobs/aaaa", local + "/model.safetensors");
  fs::create_symlink(repo + "/secret", local + "/secret");
  fs::create_symlink(snapshot + "/1_Pooling", local + "/snapshot-dir");
  const CheckpointDir plain(local);
  EXPECT_EQ(plain.resolve("model.safetensors").kind, CheckpointDir::Kind::kRegular);
  EXPECT_NE(error_message([&] { plain.resolve("secret"); }).find("outside the checkpoint directory"), std::string::npos);
  EXPECT_NE(error_message([&] { plain.resolve("snapshot-dir"); }).find("outside the checkpoint directory"),
            std::string::npos);
}

TEST(CheckpointFiles, CheckpointOpenSaysWhatAShardIs) {
  const std::string dir = fresh_dir("files_shard_kinds");
  write_bytes(dir + "/config.json", "{}");
  fs::create_directory(dir + "/model.safetensors");
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + "/model.safetensors: a directory, not a regular file");
  fs::remove(dir + "/model.safetensors");
  ASSERT_EQ(::mkfifo((dir + "/model.safetensors").c_str(), 0600), 0);
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + "/model.safetensors: a FIFO (named pipe), not a regular file");
  fs::remove(dir + "/model.safetensors");
  fs::create_symlink("/dev/zero", dir + "/a.safetensors");
  EXPECT_NE(error_message([&] { Checkpoint::open(dir); }).find("/a.safetensors: a symbolic link to /dev/zero, outside"),
            std::string::npos);
  fs::remove(dir + "/a.safetensors");
  ASSERT_EQ(::mkfifo((dir + "/config.json.tmp").c_str(), 0600), 0);
  fs::remove(dir + "/config.json");
  fs::rename(dir + "/config.json.tmp", dir + "/config.json");
  save_safetensors(dir + "/model.safetensors", {{"w", Tensor::zeros({2}, DType::kF32)}});
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }), dir + "/config.json: a FIFO (named pipe), not a regular file");
}

TEST(CheckpointFiles, CheckpointWithoutTensorsIsAnError) {
  const std::string dir = fresh_dir("files_no_tensors");
  write_bytes(dir + "/model.safetensors", testing::safetensors_bytes("{}      "));
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + ": the checkpoint holds no tensors (its shards: model.safetensors)");
}

// The probe's F6: hf_quant_config.json as a FIFO hung inspect and dequantize in open(); as a
// link to /dev/zero it grew without bound.
TEST(CheckpointFiles, HfQuantConfigIsReadThroughThePolicy) {
  const std::string dir = fresh_dir("files_hf_quant_config") + "/bf16";
  convert::write_synthetic_checkpoint(dir, {});
  ASSERT_EQ(::mkfifo((dir + "/hf_quant_config.json").c_str(), 0600), 0);
  EXPECT_EQ(error_message([&] { inspect_checkpoint(dir); }),
            dir + "/hf_quant_config.json: a FIFO (named pipe), not a regular file");
  fs::remove(dir + "/hf_quant_config.json");
  fs::create_symlink("/dev/zero", dir + "/hf_quant_config.json");
  EXPECT_NE(error_message([&] { inspect_checkpoint(dir); }).find("hf_quant_config.json: a symbolic link to /dev/zero"),
            std::string::npos);
}

}  // namespace
}  // namespace fp8kit
