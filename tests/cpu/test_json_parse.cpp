// io::parse_json_strict (src/io/json_util.h) on objects with many keys: ordered_json objects are
// indexed while they are read (the linear key search made 200k keys take over a minute), keys
// keep their order, a repeated key of config.json keeps its first position with the last value
// (Python's json), and a repeated key of an index is an error. Time: see the 200k-key case.
#include <gtest/gtest.h>

#include <string>

#include "fp8kit/checkpoint.h"
#include "io/json_util.h"
#include "io_test_util.h"

namespace fp8kit {
namespace {

std::string many_keys(int n, const std::string& repeated = "") {
  std::string text = "{";
  for (int i = 0; i < n; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  return text + repeated + "}";
}

TEST(JsonParse, ManyKeysKeepTheirOrder) {
  const std::string dir = testing::fresh_dir("json_many_keys");
  testing::write_bytes(dir + "/config.json", "{\"junk\":" + many_keys(200000) + ",\"after\":1}");
  const nlohmann::ordered_json j = read_json_file(dir + "/config.json");
  const nlohmann::ordered_json& junk = j["junk"];
  ASSERT_EQ(junk.size(), 200000u);
  int i = 0;
  for (const auto& [key, value] : junk.items()) {
    ASSERT_EQ(key, "k" + std::to_string(i)) << i;
    ASSERT_EQ(value.get<int>(), i);
    ++i;
  }
  EXPECT_EQ(j.begin().key(), "junk");
  EXPECT_EQ(j["after"], 1);
}

TEST(JsonParse, RepeatedConfigKeyKeepsItsPlaceWithTheLastValue) {
  const auto j = io::parse_json_strict<nlohmann::ordered_json>(R"({"a":1,"b":{"x":1,"y":2,"x":3},"a":4,"c":5})", 16,
                                                               nullptr);
  EXPECT_EQ(j.dump(), R"({"a":4,"b":{"x":3,"y":2},"c":5})");
  const auto many = io::parse_json_strict<nlohmann::ordered_json>(many_keys(5000, ",\"k17\":-1"), 16, nullptr);
  EXPECT_EQ(many.size(), 5000u);
  EXPECT_EQ(many["k17"], -1);
  EXPECT_EQ(std::next(many.begin(), 17).key(), "k17");
}

TEST(JsonParse, RepeatedKeyCallsTheHandler) {
  auto reject = [](const std::vector<std::string>& parents, const std::string& key) {
    throw Error(ErrorCode::kIo, (parents.empty() ? "" : parents.back() + ": ") + "duplicate " + key);
  };
  for (const bool ordered : {false, true}) {
    const std::string text = R"({"weight_map":)" + many_keys(3000, ",\"k2999\":0") + "}";
    const std::string message = testing::error_message([&] {
      if (ordered) {
        io::parse_json_strict<nlohmann::ordered_json>(text, 16, reject);
      } else {
        io::parse_json_strict<nlohmann::json>(text, 16, reject);
      }
    });
    EXPECT_EQ(message, "weight_map: duplicate k2999") << ordered;
  }
}

}  // namespace
}  // namespace fp8kit
