// The output of quantize and dequantize replaces the input directory as it is: every file and
// subdirectory that is not a weight the conversion writes is copied with its tree (here a
// sentence-transformers layout: modules.json, 1_Pooling/, 2_Dense/ with its own safetensors),
// links inside the checkpoint as files; links outside, FIFOs and devices are refused up front.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>

#include "convert/synthetic_checkpoint.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"
#include "io_test_util.h"
#include "test_dirs.h"

namespace fp8kit {
namespace {

namespace fs = std::filesystem;
using testing::error_message;
using testing::read_bytes;
using testing::write_bytes;

// Every regular file below `dir` (relative path -> content), and every directory (content "/").
std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    EXPECT_FALSE(e.is_symlink()) << rel;  // links are copied as files
    files[rel] = e.is_directory() ? "/" : read_bytes(e.path().string());
  }
  return files;
}

// A BF16 checkpoint laid out like a sentence-transformers model, with the files that are left out.
std::string make_sentence_transformer(const std::string& root) {
  const std::string in = root + "/st";
  convert::write_synthetic_checkpoint(in, {});
  write_bytes(in + "/modules.json", R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  write_bytes(in + "/README.md", "# model card\n");
  write_bytes(in + "/tokenizer.json", "{\"version\": \"1.0\"}");
  write_bytes(in + "/chat_template.jinja", "{{ messages }}");
  fs::create_directories(in + "/1_Pooling");
  write_bytes(in + "/1_Pooling/config.json", "{\"pooling_mode_mean_tokens\": true}");
  fs::create_directories(in + "/2_Dense");
  save_safetensors(in + "/2_Dense/model.safetensors", {{"linear.weight", Tensor::zeros({4, 4}, DType::kF32)}});
  write_bytes(in + "/2_Dense/config.json", "{\"in_features\": 4}");
  fs::create_directories(in + "/3_Normalize");  // empty: kept
  fs::create_directories(in + "/extra/nested/deeper");
  write_bytes(in + "/extra/nested/deeper/notes.txt", "deep");
  fs::create_symlink("extra/nested/deeper/notes.txt", in + "/vocab.txt");  // a link inside: copied as the file
  ::chmod((in + "/README.md").c_str(), 0640);
  // Left out, each with a note.
  write_bytes(in + "/pytorch_model.bin", "pickle");
  fs::create_directories(in + "/original");
  write_bytes(in + "/original/consolidated.00.pth", "pickle");
  write_bytes(in + "/original/params.json", "{}");
  save_safetensors(in + "/consolidated.safetensors", {{"x", Tensor::zeros({1}, DType::kF32)}});
  fs::create_directories(in + "/.git");
  write_bytes(in + "/.git/HEAD", "ref: refs/heads/main");
  return in;
}

std::map<std::string, std::string> expected_copies(const std::string& in) {
  std::map<std::string, std::string> out;
  for (const char* f : {"modules.json", "README.md", "tokenizer.json", "chat_template.jinja", "generation_config.json",
                        "1_Pooling/config.json", "2_Dense/model.safetensors", "2_Dense/config.json",
                        "extra/nested/deeper/notes.txt", "original/params.json"}) {
    out[f] = read_bytes(in + "/" + f);
  }
  out["vocab.txt"] = "deep";
  for (const char* d : {"1_Pooling", "2_Dense", "3_Normalize", "extra", "extra/nested", "extra/nested/deeper", "original"}) {
    out[d] = "/";
  }
  return out;
}

TEST(AuxiliaryFiles, QuantizeCopiesTheWholeTreeFileByFile) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_sentence_transformer(root);
  const ConversionReport r = quantize_checkpoint(in, root + "/fp8", {});
  std::map<std::string, std::string> got = tree(root + "/fp8");
  EXPECT_EQ(got.erase("config.json"), 1u);        // written by the conversion
  EXPECT_EQ(got.erase("model.safetensors"), 1u);  // the quantized weights
  EXPECT_EQ(got, expected_copies(in));
  EXPECT_EQ(fs::status(root + "/fp8/README.md").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  const std::vector<std::string> notes(r.notes.end() - 4, r.notes.end());
  EXPECT_EQ(notes, (std::vector<std::string>{"left out the subdirectory .git/",
                                             "left out consolidated.safetensors: not a shard of the checkpoint",
                                             "left out the weight file original/consolidated.00.pth",
                                             "left out the weight file pytorch_model.bin"}));
  EXPECT_TRUE(inspect_checkpoint(root + "/fp8").problems.empty());

  // dequantize copies the same way.
  dequantize_checkpoint(root + "/fp8", root + "/back", {});
  got = tree(root + "/back");
  EXPECT_EQ(got.erase("config.json"), 1u);
  EXPECT_EQ(got.erase("model.safetensors"), 1u);
  EXPECT_EQ(got, expected_copies(in));
}

TEST(AuxiliaryFiles, WhatCannotBeCopiedIsRefusedBeforeAnyWork) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_sentence_transformer(root);
  write_bytes(root + "/secret.txt", "private");
  fs::create_symlink("../../secret.txt", in + "/1_Pooling/leak.txt");
  const std::string message = error_message([&] { quantize_checkpoint(in, root + "/fp8", {}); });
  EXPECT_EQ(message, in + "/1_Pooling/leak.txt: a symbolic link to " + fs::canonical(root).string() +
                         "/secret.txt, outside the checkpoint directory: fp8kit does not follow it (put a copy of the "
                         "file in its place)");
  fs::remove(in + "/1_Pooling/leak.txt");
  fs::create_directory_symlink("extra", in + "/linked-dir");
  EXPECT_EQ(error_message([&] { quantize_checkpoint(in, root + "/fp8", {}); }),
            in + "/linked-dir: a symbolic link to a directory: fp8kit copies only files and real directories (put the "
                 "directory itself in its place)");
  fs::remove(in + "/linked-dir");
  ASSERT_EQ(::mkfifo((in + "/extra/pipe").c_str(), 0600), 0);
  EXPECT_EQ(error_message([&] { quantize_checkpoint(in, root + "/fp8", {}); }),
            in + "/extra/pipe: a FIFO (named pipe): fp8kit copies only regular files and directories");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(root)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"secret.txt", "st"}));  // no output, no work directory, no lock
}

TEST(AuxiliaryFiles, OutputInsideTheInputIsNotCopiedIntoItself) {
  const std::string root = testing::scratch_dir();
  const std::string in = make_sentence_transformer(root);
  quantize_checkpoint(in, in + "/fp8", {});
  QuantizeOptions force;
  force.force = true;
  quantize_checkpoint(in, in + "/fp8", force);  // the old in/fp8 is neither input nor copied
  std::map<std::string, std::string> got = tree(in + "/fp8");
  got.erase("config.json");
  got.erase("model.safetensors");
  EXPECT_EQ(got, expected_copies(in));
}

}  // namespace
}  // namespace fp8kit
