// Checkpoint directories (single file, sharded with an index, bare *.safetensors), the index
// file (read, write, hostile shard names, "metadata": {}), config.json present / absent /
// malformed, and read_json_file / write_json_file.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "fp8kit/checkpoint.h"
#include "io_test_util.h"

namespace fp8kit {
namespace {

using testing::error_message;
using testing::exists;
using testing::fresh_dir;
using testing::read_bytes;
using testing::write_bytes;

Tensor filled(const Shape& shape, DType dtype, uint8_t byte) {
  Tensor t = Tensor::empty(shape, dtype);
  t.fill_bytes_(byte);
  return t;
}

uint8_t first_byte(const Tensor& t) { return static_cast<const uint8_t*>(t.data_ptr())[0]; }

// A sharded checkpoint: three shards, an index, and a config.
std::string make_sharded(const std::string& name) {
  const std::string dir = fresh_dir(name);
  save_safetensors(dir + "/model-00001-of-00003.safetensors",
                   {{"model.embed_tokens.weight", filled({4, 2}, DType::kBF16, 1)},
                    {"model.layers.0.mlp.down_proj.weight", filled({2, 2}, DType::kE4M3FN, 2)}});
  save_safetensors(dir + "/model-00002-of-00003.safetensors",
                   {{"model.layers.0.mlp.down_proj.weight_scale", filled({}, DType::kF32, 3)},
                    {"model.norm.weight", filled({2}, DType::kBF16, 4)}});
  save_safetensors(dir + "/model-00003-of-00003.safetensors", {{"lm_head.weight", filled({4, 2}, DType::kBF16, 5)}});
  SafetensorsIndex index;
  index.total_size = 16 + 4 + 4 + 4 + 16;
  index.weight_map = {{"model.embed_tokens.weight", "model-00001-of-00003.safetensors"},
                      {"model.layers.0.mlp.down_proj.weight", "model-00001-of-00003.safetensors"},
                      {"model.layers.0.mlp.down_proj.weight_scale", "model-00002-of-00003.safetensors"},
                      {"model.norm.weight", "model-00002-of-00003.safetensors"},
                      {"lm_head.weight", "model-00003-of-00003.safetensors"}};
  write_safetensors_index(dir + "/model.safetensors.index.json", index);
  write_bytes(dir + "/config.json", R"({"model_type": "llama", "hidden_size": 2})");
  return dir;
}

TEST(Checkpoint, SingleFileWithConfig) {
  const std::string dir = fresh_dir("ckpt_single");
  save_safetensors(dir + "/model.safetensors", {{"b", filled({3}, DType::kF32, 7)}, {"a", filled({}, DType::kU8, 8)}});
  write_bytes(dir + "/config.json", R"({"model_type": "qwen3", "torch_dtype": "bfloat16"})");
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_EQ(ckpt.dir(), dir);
  EXPECT_FALSE(ckpt.sharded());
  ASSERT_TRUE(ckpt.has_config());
  EXPECT_EQ(ckpt.config()["model_type"], "qwen3");
  EXPECT_EQ(ckpt.config().begin().key(), "model_type");  // file order kept
  EXPECT_EQ(ckpt.shard_files(), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(ckpt.tensor_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(ckpt.contains("a"));
  EXPECT_FALSE(ckpt.contains("c"));
  EXPECT_EQ(ckpt.info("b").shape, Shape{3});
  EXPECT_EQ(ckpt.shard_of("b"), "model.safetensors");
  EXPECT_EQ(first_byte(ckpt.tensor("b")), 7);
  EXPECT_EQ(first_byte(ckpt.tensor("a")), 8);
  ckpt.release("b");
  EXPECT_EQ(ckpt.shard("model.safetensors").tensors().size(), 2u);
  EXPECT_EQ(error_message([&] { ckpt.tensor("c"); }), dir + ": the checkpoint has no tensor 'c'");
  EXPECT_EQ(error_message([&] { ckpt.shard("x.safetensors"); }), dir + ": the checkpoint has no shard 'x.safetensors'");
}

TEST(Checkpoint, ConfigAbsent) {
  const std::string dir = fresh_dir("ckpt_no_config");
  save_safetensors(dir + "/model.safetensors", {{"a", filled({1}, DType::kF32, 1)}});
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_FALSE(ckpt.has_config());
  EXPECT_EQ(error_message([&] { ckpt.config(); }), dir + ": the checkpoint has no config.json");
}

TEST(Checkpoint, ConfigMalformed) {
  const std::string dir = fresh_dir("ckpt_bad_config");
  save_safetensors(dir + "/model.safetensors", {{"a", filled({1}, DType::kF32, 1)}});
  write_bytes(dir + "/config.json", "{\"model_type\": \"llama\",\n \"hidden_size\": }");
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + "/config.json: invalid JSON at byte 41: parse error at line 2, column 17: syntax error while "
                  "parsing value - unexpected '}'; expected '[', '{', or a literal");
  write_bytes(dir + "/config.json", "[1, 2]");
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }), dir + "/config.json: config.json must hold a JSON object");
}

TEST(Checkpoint, ShardedWithIndex) {
  const std::string dir = make_sharded("ckpt_sharded");
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_TRUE(ckpt.sharded());
  EXPECT_EQ(ckpt.shard_files(),
            (std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors"}));
  EXPECT_EQ(ckpt.tensor_names().size(), 5u);
  EXPECT_EQ(ckpt.shard_of("model.norm.weight"), "model-00002-of-00003.safetensors");
  EXPECT_EQ(first_byte(ckpt.tensor("lm_head.weight")), 5);
  EXPECT_EQ(first_byte(ckpt.tensor("model.layers.0.mlp.down_proj.weight_scale")), 3);
  EXPECT_EQ(ckpt.info("model.layers.0.mlp.down_proj.weight").dtype, DType::kE4M3FN);
  EXPECT_EQ(ckpt.config()["hidden_size"], 2);
  const SafetensorsIndex index = read_safetensors_index(dir + "/model.safetensors.index.json");
  EXPECT_EQ(index.total_size, std::optional<uint64_t>(44));
  EXPECT_EQ(index.weight_map.size(), 5u);
}

TEST(Checkpoint, ShardTensorsMissingFromTheIndexAreIncluded) {
  const std::string dir = make_sharded("ckpt_unlisted");
  save_safetensors(dir + "/model-00003-of-00003.safetensors",
                   {{"lm_head.weight", filled({4, 2}, DType::kBF16, 5)}, {"extra.k_scale", filled({}, DType::kF32, 6)}});
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_EQ(ckpt.shard_of("extra.k_scale"), "model-00003-of-00003.safetensors");
  EXPECT_EQ(first_byte(ckpt.tensor("extra.k_scale")), 6);
}

TEST(Checkpoint, IndexIgnoresOtherSafetensorsFiles) {
  // Mistral repos ship consolidated.safetensors next to the shards: the index decides.
  const std::string dir = make_sharded("ckpt_consolidated");
  save_safetensors(dir + "/consolidated.safetensors", {{"lm_head.weight", filled({4, 2}, DType::kBF16, 9)}});
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_EQ(ckpt.shard_files().size(), 3u);
  EXPECT_EQ(first_byte(ckpt.tensor("lm_head.weight")), 5);
}

TEST(Checkpoint, MissingShard) {
  const std::string dir = make_sharded("ckpt_missing_shard");
  std::filesystem::remove(dir + "/model-00002-of-00003.safetensors");
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + "/model.safetensors.index.json: shard 'model-00002-of-00003.safetensors' (named for tensor "
                  "'model.layers.0.mlp.down_proj.weight_scale') does not exist in " + dir);
}

TEST(Checkpoint, TensorMissingFromItsShard) {
  const std::string dir = make_sharded("ckpt_missing_tensor");
  save_safetensors(dir + "/model-00002-of-00003.safetensors", {{"model.norm.weight", filled({2}, DType::kBF16, 4)}});
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + "/model-00002-of-00003.safetensors: tensor 'model.layers.0.mlp.down_proj.weight_scale' is listed "
                  "in model.safetensors.index.json but 'model-00002-of-00003.safetensors' has no such tensor");
}

TEST(Checkpoint, TensorInTheWrongShard) {
  const std::string dir = make_sharded("ckpt_wrong_shard");
  save_safetensors(dir + "/model-00002-of-00003.safetensors",
                   {{"model.norm.weight", filled({2}, DType::kBF16, 4)}});
  save_safetensors(dir + "/model-00003-of-00003.safetensors",
                   {{"lm_head.weight", filled({4, 2}, DType::kBF16, 5)},
                    {"model.layers.0.mlp.down_proj.weight_scale", filled({}, DType::kF32, 3)}});
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + "/model-00002-of-00003.safetensors: tensor 'model.layers.0.mlp.down_proj.weight_scale' is listed "
                  "in model.safetensors.index.json but 'model-00002-of-00003.safetensors' has no such tensor");
}

TEST(Checkpoint, DuplicateAcrossShards) {
  const std::string dir = make_sharded("ckpt_duplicate_indexed");
  save_safetensors(dir + "/model-00003-of-00003.safetensors",
                   {{"lm_head.weight", filled({4, 2}, DType::kBF16, 5)}, {"model.norm.weight", filled({2}, DType::kBF16, 4)}});
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + ": tensor 'model.norm.weight' is in two shards: 'model-00002-of-00003.safetensors' and "
                  "'model-00003-of-00003.safetensors'");

  const std::string bare = fresh_dir("ckpt_duplicate_bare");
  save_safetensors(bare + "/a.safetensors", {{"w", filled({1}, DType::kF32, 1)}});
  save_safetensors(bare + "/b.safetensors", {{"w", filled({1}, DType::kF32, 2)}});
  EXPECT_EQ(error_message([&] { Checkpoint::open(bare); }),
            bare + ": tensor 'w' is in two shards: 'a.safetensors' and 'b.safetensors'");
}

TEST(Checkpoint, BadShardInsideAShardedCheckpoint) {
  const std::string dir = make_sharded("ckpt_bad_shard");
  write_bytes(dir + "/model-00003-of-00003.safetensors", std::string("\x02\0\0\0", 4));
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + "/model-00003-of-00003.safetensors: file is 4 bytes, too short for the 8-byte header length");
}

TEST(Checkpoint, BareSafetensorsFilesSorted) {
  const std::string dir = fresh_dir("ckpt_bare");
  save_safetensors(dir + "/b.safetensors", {{"y", filled({1}, DType::kF32, 2)}});
  save_safetensors(dir + "/a.safetensors", {{"x", filled({1}, DType::kF32, 1)}});
  write_bytes(dir + "/notes.txt", "not a shard");
  std::filesystem::create_directory(dir + "/dir.safetensors");
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_FALSE(ckpt.sharded());
  EXPECT_EQ(ckpt.shard_files(), (std::vector<std::string>{"a.safetensors", "b.safetensors"}));
  EXPECT_EQ(ckpt.shard_of("y"), "b.safetensors");
}

TEST(Checkpoint, ModelSafetensorsPreferredOverOthers) {
  const std::string dir = fresh_dir("ckpt_prefer_model");
  save_safetensors(dir + "/model.safetensors", {{"w", filled({1}, DType::kF32, 1)}});
  save_safetensors(dir + "/consolidated.safetensors", {{"w", filled({1}, DType::kF32, 2)}});
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_EQ(ckpt.shard_files(), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(first_byte(ckpt.tensor("w")), 1);
}

TEST(Checkpoint, NoSafetensorsAtAll) {
  const std::string dir = fresh_dir("ckpt_empty");
  write_bytes(dir + "/config.json", "{}");
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + ": no safetensors files (no model.safetensors.index.json, no model.safetensors, no *.safetensors)");
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir + "/nope"); }),
            dir + "/nope: not a checkpoint directory: No such file or directory");
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir + "/config.json"); }),
            dir + "/config.json: not a checkpoint directory: not a directory");
}

// ---- the index file ----

TEST(CheckpointIndex, RoundTrip) {
  const std::string path = fresh_dir("index_roundtrip") + "/model.safetensors.index.json";
  SafetensorsIndex index;
  index.total_size = 16060522496ull;
  index.weight_map = {{"b", "model-00002-of-00002.safetensors"}, {"a", "model-00001-of-00002.safetensors"}};
  write_safetensors_index(path, index);
  EXPECT_EQ(read_bytes(path), R"({
  "metadata": {
    "total_size": 16060522496
  },
  "weight_map": {
    "a": "model-00001-of-00002.safetensors",
    "b": "model-00002-of-00002.safetensors"
  }
}
)");
  const SafetensorsIndex back = read_safetensors_index(path);
  EXPECT_EQ(back.total_size, index.total_size);
  EXPECT_EQ(back.weight_map, index.weight_map);
  EXPECT_FALSE(exists(path + ".tmp." + std::to_string(::getpid())));
}

TEST(CheckpointIndex, MetadataEmptyOrAbsent) {
  const std::string dir = fresh_dir("index_metadata");
  write_bytes(dir + "/a.json", R"({"metadata": {}, "weight_map": {"w": "s.safetensors"}})");
  EXPECT_EQ(read_safetensors_index(dir + "/a.json").total_size, std::nullopt);
  write_bytes(dir + "/b.json", R"({"weight_map": {"w": "s.safetensors"}})");
  EXPECT_EQ(read_safetensors_index(dir + "/b.json").weight_map.at("w"), "s.safetensors");
  write_bytes(dir + "/c.json", R"({"metadata": {"total_size": null}, "weight_map": {}})");
  EXPECT_EQ(read_safetensors_index(dir + "/c.json").total_size, std::nullopt);

  // A sharded checkpoint whose index has "metadata": {} (DeepSeek's conversion script).
  const std::string ckpt_dir = make_sharded("index_metadata_ckpt");
  const std::string index_path = ckpt_dir + "/model.safetensors.index.json";
  SafetensorsIndex index = read_safetensors_index(index_path);
  index.total_size.reset();
  write_safetensors_index(index_path, index);
  EXPECT_NE(read_bytes(index_path).find("\"metadata\": {}"), std::string::npos);
  EXPECT_EQ(Checkpoint::open(ckpt_dir).tensor_names().size(), 5u);
}

TEST(CheckpointIndex, BadWeightMapPath) {
  const std::string dir = make_sharded("index_bad_path");
  const std::string path = dir + "/model.safetensors.index.json";
  for (const char* file : {"../model-00001-of-00003.safetensors", "sub/x.safetensors", "/etc/passwd", "..", ".", ""}) {
    write_bytes(path, fmt::format(R"({{"metadata": {{}}, "weight_map": {{"w": "{}"}}}})", file));
    EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
              fmt::format("{}: tensor 'w': shard '{}' is not a plain file name in the checkpoint directory", path, file));
  }
  SafetensorsIndex index;
  index.weight_map = {{"w", "../x.safetensors"}};
  EXPECT_EQ(error_message([&] { write_safetensors_index(dir + "/out.json", index); }, ErrorCode::kInvalidArgument),
            dir + "/out.json: tensor 'w': shard '../x.safetensors' is not a plain file name");
}

TEST(CheckpointIndex, MalformedIndex) {
  const std::string path = fresh_dir("index_malformed") + "/model.safetensors.index.json";
  const auto expect = [&](const std::string& text, const std::string& message) {
    write_bytes(path, text);
    EXPECT_EQ(error_message([&] { read_safetensors_index(path); }), path + ": " + message);
  };
  expect("[]", "the index must be a JSON object, got array");
  expect(R"({"metadata": {}})", "missing \"weight_map\"");
  expect(R"({"weight_map": ["a"]})", "\"weight_map\" must be an object of tensor name to file name, got [\"a\"]");
  expect(R"({"weight_map": {"w": 3}})", "tensor 'w': the weight_map value must be a file name, got 3");
  expect(R"({"metadata": [], "weight_map": {}})", "\"metadata\" must be an object, got []");
  expect(R"({"metadata": {"total_size": -5}, "weight_map": {}})",
         "\"total_size\" must be a non-negative integer, got -5");
  expect(R"({"weight_map": {"w": "a.safetensors", "w": "b.safetensors"}})", "'weight_map': duplicate key 'w'");
  expect(R"({"weight_map": {)", "invalid JSON at byte 17: parse error at line 1, column 17: syntax error while "
                                 "parsing object key - unexpected end of input; expected string literal");
}

TEST(CheckpointIndex, EmptyWeightMapIsNotACheckpoint) {
  const std::string dir = fresh_dir("index_empty");
  write_bytes(dir + "/model.safetensors.index.json", R"({"metadata": {}, "weight_map": {}})");
  EXPECT_EQ(error_message([&] { Checkpoint::open(dir); }),
            dir + "/model.safetensors.index.json: the weight_map lists no tensors");
}

// ---- JSON files ----

TEST(JsonFile, RoundTripKeepsOrder) {
  const std::string path = fresh_dir("json_roundtrip") + "/config.json";
  nlohmann::ordered_json value = {{"z", 1}, {"a", {{"nested", true}}}, {"list", {1, 2.5, "x"}}};
  write_json_file(path, value);
  EXPECT_EQ(read_bytes(path), "{\n  \"z\": 1,\n  \"a\": {\n    \"nested\": true\n  },\n  \"list\": [\n    1,\n"
                              "    2.5,\n    \"x\"\n  ]\n}\n");
  EXPECT_EQ(read_json_file(path), value);
  EXPECT_FALSE(exists(path + ".tmp." + std::to_string(::getpid())));
}

TEST(JsonFile, OverwritesAtomically) {
  const std::string path = fresh_dir("json_overwrite") + "/config.json";
  write_bytes(path, "old");
  write_json_file(path, nlohmann::ordered_json{{"new", 1}});
  EXPECT_EQ(read_json_file(path)["new"], 1);
  EXPECT_EQ(error_message([&] { write_json_file(path + "/sub/x.json", {}); }),
            path + "/sub/x.json.tmp." + std::to_string(::getpid()) + ": cannot create: Not a directory");
}

TEST(JsonFile, Errors) {
  const std::string dir = fresh_dir("json_errors");
  EXPECT_EQ(error_message([&] { read_json_file(dir + "/none.json"); }),
            dir + "/none.json: cannot open: No such file or directory");
  write_bytes(dir + "/bad.json", "{\"a\": 1,}");
  EXPECT_EQ(error_message([&] { read_json_file(dir + "/bad.json"); }),
            dir + "/bad.json: invalid JSON at byte 9: parse error at line 1, column 9: syntax error while parsing "
                  "object key - unexpected '}'; expected string literal");
  write_bytes(dir + "/deep.json", std::string(100'000, '['));
  EXPECT_EQ(error_message([&] { read_json_file(dir + "/deep.json"); }),
            dir + "/deep.json: JSON nests deeper than 128 levels (at byte 128)");
  write_bytes(dir + "/empty.json", "");
  EXPECT_EQ(error_message([&] { read_json_file(dir + "/empty.json"); }),
            dir + "/empty.json: invalid JSON at byte 1: parse error at line 1, column 1: syntax error while parsing "
                  "value - unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(error_message([&] { read_json_file(dir); }), dir + ": a directory, not a regular file");
}

}  // namespace
}  // namespace fp8kit
