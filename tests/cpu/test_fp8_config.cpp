// Fp8Config (spec 1.1): constructor checks, from_config on real checkpoint configs, typed-value
// errors, get_quant_method dispatch, get_cache_scale names, apply_vllm_mapper. Every spec error
// text is compared verbatim.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <typeinfo>

#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "fp8kit/error.h"
#include "fp8kit/layers/attention.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/fp8_linear_method.h"
#include "fp8kit/layers/linear.h"
#include "fp8kit/layers/unquantized_linear_method.h"

namespace fp8kit {
namespace {

using nlohmann::ordered_json;

using testing::expect_error;
using testing::expect_invalid;

const PackedModulesMapping kLlamaPacked = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}},
                                           {"gate_up_proj", {"gate_proj", "up_proj"}}};

// ---- constructor ----

TEST(Fp8Config, DefaultsAreOnlineDynamic) {
  Fp8Config config;
  EXPECT_FALSE(config.is_checkpoint_fp8_serialized);
  EXPECT_EQ(config.activation_scheme, "dynamic");
  EXPECT_TRUE(config.ignored_layers.empty());
  EXPECT_FALSE(config.weight_block_size.has_value());
  EXPECT_TRUE(config.packed_modules_mapping.empty());
}

TEST(Fp8Config, StaticMetadata) {
  Fp8Config fp8;
  const QuantizationConfig& config = fp8;
  EXPECT_EQ(config.get_name(), "fp8");
  EXPECT_EQ(config.get_min_capability(), 80);
  EXPECT_EQ(config.get_supported_act_dtypes(), (std::vector<DType>{DType::kBF16, DType::kF16}));
  EXPECT_TRUE(config.get_config_filenames().empty());
  EXPECT_EQ(fp8_activation_schemes(), (std::vector<std::string>{"static", "dynamic"}));
}

TEST(Fp8Config, AcceptsBothSchemes) {
  EXPECT_EQ(Fp8Config(true, "static").activation_scheme, "static");
  EXPECT_EQ(Fp8Config(false, "static").activation_scheme, "static");
  EXPECT_EQ(Fp8Config(true, "dynamic", {"lm_head"}).ignored_layers, (std::vector<std::string>{"lm_head"}));
}

TEST(Fp8Config, RejectsUnknownScheme) {
  expect_invalid([] { Fp8Config(true, "per_token"); }, "Unsupported activation scheme per_token");
  expect_invalid([] { Fp8Config(true, "Dynamic"); }, "Unsupported activation scheme Dynamic");
  expect_invalid([] { Fp8Config(true, ""); }, "Unsupported activation scheme ");
  // The scheme is checked before anything about blocks.
  expect_invalid([] { Fp8Config(false, "none", {}, std::vector<int64_t>{1, 2, 3}); },
                 "Unsupported activation scheme none");
}

TEST(Fp8Config, BlockSizeAccepted) {
  Fp8Config config(true, "dynamic", {}, std::vector<int64_t>{128, 128});
  ASSERT_TRUE(config.weight_block_size.has_value());
  EXPECT_EQ(*config.weight_block_size, (std::vector<int64_t>{128, 128}));
  Fp8Config ragged(true, "dynamic", {}, std::vector<int64_t>{1, 127});
  EXPECT_EQ(*ragged.weight_block_size, (std::vector<int64_t>{1, 127}));
}

TEST(Fp8Config, BlockSizeChecksInSpecOrder) {
  const std::string not_serialized = "The block-wise quantization only supports fp8-serialized checkpoint for now.";
  // Not serialized is reported first, even with a bad size and a static scheme.
  expect_invalid([] { Fp8Config(false, "static", {}, std::vector<int64_t>{1, 2, 3}); }, not_serialized);
  expect_invalid([] { Fp8Config(false, "dynamic", {}, std::vector<int64_t>{128, 128}); }, not_serialized);
  // Then the number of dimensions, before the scheme.
  expect_invalid([] { Fp8Config(true, "static", {}, std::vector<int64_t>{128, 128, 128}); },
                 "The quantization block size of weight must have 2 dimensions, but got 3 dimensions");
  expect_invalid([] { Fp8Config(true, "dynamic", {}, std::vector<int64_t>{128}); },
                 "The quantization block size of weight must have 2 dimensions, but got 1 dimensions");
  expect_invalid([] { Fp8Config(true, "dynamic", {}, std::vector<int64_t>{}); },
                 "The quantization block size of weight must have 2 dimensions, but got 0 dimensions");
  expect_invalid([] { Fp8Config(true, "static", {}, std::vector<int64_t>{128, 128}); },
                 "The block-wise quantization only supports dynamic activation scheme for now, but got static "
                 "activation scheme.");
}

TEST(Fp8Config, BlockSizeMustBePositive) {
  expect_invalid([] { Fp8Config(true, "dynamic", {}, std::vector<int64_t>{0, 128}); },
                 "weight_block_size must hold positive integers, but got [0, 128]");
  expect_invalid([] { Fp8Config(true, "dynamic", {}, std::vector<int64_t>{128, -1}); },
                 "weight_block_size must hold positive integers, but got [128, -1]");
}

// ---- from_config ----

TEST(Fp8ConfigFromConfig, AutoFp8Llama3PerTensorStatic) {
  // neuralmagic Meta-Llama-3-8B-Instruct-FP8 (AutoFP8), config.json "quantization_config".
  auto config = Fp8Config::from_config(ordered_json::parse(R"({
      "activation_scheme": "static", "ignored_layers": ["lm_head"], "quant_method": "fp8"})"));
  EXPECT_TRUE(config->is_checkpoint_fp8_serialized);
  EXPECT_EQ(config->activation_scheme, "static");
  EXPECT_EQ(config->ignored_layers, (std::vector<std::string>{"lm_head"}));
  EXPECT_FALSE(config->weight_block_size.has_value());
}

TEST(Fp8ConfigFromConfig, DeepSeekV3Block) {
  auto config = Fp8Config::from_config(ordered_json::parse(
      R"({"activation_scheme":"dynamic","fmt":"e4m3","quant_method":"fp8","weight_block_size":[128,128]})"));
  EXPECT_TRUE(config->is_checkpoint_fp8_serialized);
  EXPECT_EQ(config->activation_scheme, "dynamic");
  EXPECT_TRUE(config->ignored_layers.empty());
  ASSERT_TRUE(config->weight_block_size.has_value());
  EXPECT_EQ(*config->weight_block_size, (std::vector<int64_t>{128, 128}));
}

TEST(Fp8ConfigFromConfig, Qwen3ModulesToNotConvert) {
  auto config = Fp8Config::from_config(ordered_json::parse(R"({
      "activation_scheme": "dynamic",
      "modules_to_not_convert": ["lm_head", "model.layers.0.mlp.gate", "model.layers.0.mlp.shared_expert_gate"],
      "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]})"));
  EXPECT_EQ(config->ignored_layers,
            (std::vector<std::string>{"lm_head", "model.layers.0.mlp.gate", "model.layers.0.mlp.shared_expert_gate"}));
  EXPECT_EQ(*config->weight_block_size, (std::vector<int64_t>{128, 128}));
}

TEST(Fp8ConfigFromConfig, IgnoredLayersWinsOverModulesToNotConvert) {
  auto both = Fp8Config::from_config(ordered_json::parse(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
      "modules_to_not_convert": ["a"], "ignored_layers": ["b"]})"));
  EXPECT_EQ(both->ignored_layers, (std::vector<std::string>{"b"}));
  // A null ignored_layers is absent, so the fallback applies.
  auto null_first = Fp8Config::from_config(ordered_json::parse(R"({"quant_method": "fp8",
      "activation_scheme": "dynamic", "ignored_layers": null, "modules_to_not_convert": ["a"]})"));
  EXPECT_EQ(null_first->ignored_layers, (std::vector<std::string>{"a"}));
}

TEST(Fp8ConfigFromConfig, NullOptionalsAreAbsent) {
  auto config = Fp8Config::from_config(ordered_json::parse(R"({"quant_method": "fp8", "activation_scheme": "static",
      "ignored_layers": null, "modules_to_not_convert": null, "weight_block_size": null})"));
  EXPECT_TRUE(config->ignored_layers.empty());
  EXPECT_FALSE(config->weight_block_size.has_value());
}

TEST(Fp8ConfigFromConfig, SerializedIsASubstringTest) {
  auto make = [](const std::string& method) {
    ordered_json cfg = {{"quant_method", method}, {"activation_scheme", "dynamic"}};
    return Fp8Config::from_config(cfg)->is_checkpoint_fp8_serialized;
  };
  EXPECT_TRUE(make("fp8"));
  EXPECT_TRUE(make("fbgemm_fp8"));
  EXPECT_FALSE(make("FP8"));
  EXPECT_FALSE(make("compressed-tensors"));
  // Not serialized, so a block size is refused with the spec's text.
  expect_invalid(
      [] {
        Fp8Config::from_config(ordered_json::parse(
            R"({"quant_method": "modelopt", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})"));
      },
      "The block-wise quantization only supports fp8-serialized checkpoint for now.");
}

TEST(Fp8ConfigFromConfig, RequiredKeys) {
  expect_invalid([] { Fp8Config::from_config(ordered_json::parse(R"({"activation_scheme": "dynamic"})")); },
                 "Cannot find any of ['quant_method'] in the model's quantization config.");
  expect_invalid([] { Fp8Config::from_config(ordered_json::parse(R"({"quant_method": "fp8"})")); },
                 "Cannot find any of ['activation_scheme'] in the model's quantization config.");
  expect_invalid([] { Fp8Config::from_config(ordered_json::object()); },
                 "Cannot find any of ['quant_method'] in the model's quantization config.");
}

TEST(Fp8ConfigFromConfig, ConstructorErrorsPassThrough) {
  expect_invalid(
      [] { Fp8Config::from_config(ordered_json::parse(R"({"quant_method": "fp8", "activation_scheme": "token"})")); },
      "Unsupported activation scheme token");
  expect_invalid(
      [] {
        Fp8Config::from_config(ordered_json::parse(
            R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": []})"));
      },
      "The quantization block size of weight must have 2 dimensions, but got 0 dimensions");
  expect_invalid(
      [] {
        Fp8Config::from_config(ordered_json::parse(
            R"({"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": [128, 128]})"));
      },
      "The block-wise quantization only supports dynamic activation scheme for now, but got static activation "
      "scheme.");
}

// Each malformed value: the key and the expected type are named; nothing from nlohmann leaks out.
TEST(Fp8ConfigFromConfig, WrongTypesNameKeyAndType) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"quant_method": 8, "activation_scheme": "dynamic"})",
       "quantization config key 'quant_method' must be a string, got integer"},
      {R"({"quant_method": null, "activation_scheme": "dynamic"})",
       "quantization config key 'quant_method' must be a string, got null"},
      {R"({"quant_method": "fp8", "activation_scheme": ["dynamic"]})",
       "quantization config key 'activation_scheme' must be a string, got array"},
      {R"({"quant_method": "fp8", "activation_scheme": true})",
       "quantization config key 'activation_scheme' must be a string, got boolean"},
      {R"({"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": "lm_head"})",
       "quantization config key 'ignored_layers' must be a list of strings, got string"},
      {R"({"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": ["lm_head", 3]})",
       "quantization config key 'ignored_layers' must be a list of strings, got integer at index 1"},
      {R"({"quant_method": "fp8", "activation_scheme": "dynamic", "modules_to_not_convert": {"lm_head": 1}})",
       "quantization config key 'modules_to_not_convert' must be a list of strings, got object"},
      {R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": "128"})",
       "quantization config key 'weight_block_size' must be a list of integers, got string"},
      {R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128.0]})",
       "quantization config key 'weight_block_size' must be a list of integers, got float at index 1"},
      {R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": ["128", 128]})",
       "quantization config key 'weight_block_size' must be a list of integers, got string at index 0"},
      {R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, null]})",
       "quantization config key 'weight_block_size' must be a list of integers, got null at index 1"},
      {R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [18446744073709551615, 128]})",
       "quantization config key 'weight_block_size' holds an integer out of range at index 0"},
      {R"(["quant_method", "fp8"])", "the model's quantization config must be a JSON object, got array"},
      {R"("fp8")", "the model's quantization config must be a JSON object, got string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    ordered_json cfg = ordered_json::parse(c.json);
    expect_invalid([&] { Fp8Config::from_config(cfg); }, c.message);
  }
}

// ---- get_quant_method ----

// A method owns a copy of its config: equal to the config it came from, alive after it is gone.
void expect_same_config(const Fp8Config& got, const Fp8Config& want) {
  EXPECT_EQ(got.is_checkpoint_fp8_serialized, want.is_checkpoint_fp8_serialized);
  EXPECT_EQ(got.activation_scheme, want.activation_scheme);
  EXPECT_EQ(got.ignored_layers, want.ignored_layers);
  EXPECT_EQ(got.weight_block_size, want.weight_block_size);
}

TEST(Fp8ConfigQuantMethod, LinearIsFp8AndKeepsTheConfig) {
  auto config = std::make_unique<Fp8Config>(true, "static", std::vector<std::string>{"lm_head"});
  const Fp8Config copy = *config;
  RowParallelLinear linear("model.layers.0.mlp.down_proj", 64, 32);
  auto method = config->get_quant_method(linear, "model.layers.0.mlp.down_proj");
  ASSERT_NE(method, nullptr);
  EXPECT_EQ(method->name(), "Fp8LinearMethod");
  auto* fp8 = dynamic_cast<Fp8LinearMethod*>(method.get());
  ASSERT_NE(fp8, nullptr);
  config.reset();  // the caller's config goes away; the method's stays
  expect_same_config(fp8->quant_config(), copy);
}

TEST(Fp8ConfigQuantMethod, IgnoredLinearIsUnquantized) {
  Fp8Config config(true, "static", {"lm_head"});
  ReplicatedLinear lm_head("lm_head", 64, 128);
  auto method = config.get_quant_method(lm_head, "lm_head");
  ASSERT_NE(method, nullptr);
  EXPECT_EQ(method->name(), "UnquantizedLinearMethod");
  EXPECT_NE(dynamic_cast<UnquantizedLinearMethod*>(method.get()), nullptr);
}

TEST(Fp8ConfigQuantMethod, FusedLinearUsesPackedMapping) {
  // Qwen2-0.5B-FP8-SkipQKV style: the checkpoint lists q/k/v, the engine asks for qkv_proj.
  Fp8Config config(true, "static",
                   {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                    "model.layers.0.self_attn.v_proj", "model.layers.1.self_attn.q_proj"});
  config.packed_modules_mapping = kLlamaPacked;
  QKVParallelLinear qkv("model.layers.0.self_attn.qkv_proj", 64, 16, 4, 2);
  EXPECT_EQ(config.get_quant_method(qkv, "model.layers.0.self_attn.qkv_proj")->name(), "UnquantizedLinearMethod");
  EXPECT_EQ(config.get_quant_method(qkv, "model.layers.2.self_attn.qkv_proj")->name(), "Fp8LinearMethod");
  expect_invalid([&] { config.get_quant_method(qkv, "model.layers.1.self_attn.qkv_proj"); },
                 "Detected some but not all shards of model.layers.1.self_attn.qkv_proj are quantized. All shards of "
                 "fused layers to have the same precision.");
  // Without the mapping, the fused name itself is looked up and not found.
  config.packed_modules_mapping.clear();
  EXPECT_EQ(config.get_quant_method(qkv, "model.layers.0.self_attn.qkv_proj")->name(), "Fp8LinearMethod");
}

TEST(Fp8ConfigQuantMethod, MoEIsNeverSkipped) {
  // Hazard H10, kept as in the spec: ignored_layers does not apply to FusedMoE.
  Fp8Config config(true, "dynamic", {"model.layers.0.mlp.experts"}, std::vector<int64_t>{128, 128});
  FusedMoE moe;
  auto method = config.get_quant_method(moe, "model.layers.0.mlp.experts");
  ASSERT_NE(method, nullptr);
  EXPECT_EQ(method->name(), "Fp8MoEMethod");
  auto* fp8 = dynamic_cast<Fp8MoEMethod*>(method.get());
  ASSERT_NE(fp8, nullptr);
  expect_same_config(fp8->quant_config(), config);
}

TEST(Fp8ConfigQuantMethod, AttentionGetsKvCacheMethod) {
  Fp8Config config(true, "static", {"model.layers.0.self_attn.attn"});
  Attention attn("model.layers.0.self_attn.attn", 32, 128, 8);
  auto method = config.get_quant_method(attn, "model.layers.0.self_attn.attn");
  ASSERT_NE(method, nullptr);
  EXPECT_EQ(method->name(), "Fp8KVCacheMethod");
  auto* kv = dynamic_cast<Fp8KVCacheMethod*>(method.get());
  ASSERT_NE(kv, nullptr);
  expect_same_config(kv->quant_config(), config);
}

TEST(Fp8ConfigQuantMethod, OtherLayersGetNothing) {
  Fp8Config config;
  Layer embedding;
  EXPECT_EQ(config.get_quant_method(embedding, "model.embed_tokens"), nullptr);
  EXPECT_EQ(config.get_quant_method(embedding, "lm_head"), nullptr);
}

// ---- get_cache_scale ----

TEST(Fp8ConfigCacheScale, KvAndQueryScales) {
  Fp8Config config;
  EXPECT_EQ(config.get_cache_scale("model.layers.0.self_attn.k_proj.output_scale"),
            "model.layers.0.self_attn.attn.k_scale");
  EXPECT_EQ(config.get_cache_scale("model.layers.7.self_attn.v_proj.output_scale"),
            "model.layers.7.self_attn.attn.v_scale");
  EXPECT_EQ(config.get_cache_scale("model.layers.31.self_attn.q_proj.output_scale"),
            "model.layers.31.self_attn.attn.q_scale");
  EXPECT_EQ(config.get_cache_scale("model.layers.0.self_attn.prob_output_scale"),
            "model.layers.0.self_attn.attn.prob_scale");
  EXPECT_EQ(config.get_cache_scale("self_attn.prob_output_scale"), "self_attn.attn.prob_scale");
}

TEST(Fp8ConfigCacheScale, NonMatchingNames) {
  Fp8Config config;
  EXPECT_EQ(config.get_cache_scale("model.layers.0.self_attn.k_proj.weight_scale"), std::nullopt);
  EXPECT_EQ(config.get_cache_scale("model.layers.0.self_attn.k_proj.input_scale"), std::nullopt);
  EXPECT_EQ(config.get_cache_scale("model.layers.0.mlp.down_proj.output_scale"), std::nullopt);
  EXPECT_EQ(config.get_cache_scale("model.layers.0.self_attn.o_proj.output_scale"), std::nullopt);
  EXPECT_EQ(config.get_cache_scale("model.layers.0.self_attn.k_scale"), std::nullopt);
  EXPECT_EQ(config.get_cache_scale("model.layers.0.self_attn.k_proj.prob_output_scale"), std::nullopt);
  EXPECT_EQ(config.get_cache_scale("model.layers.0.self_attnprob_output_scale"), std::nullopt);
  EXPECT_EQ(config.get_cache_scale(""), std::nullopt);
}

TEST(Fp8ConfigCacheScale, ReplaceSemanticsOfTheReference) {
  Fp8Config config;
  // Ends with ".output_scale" and holds ".k_proj", but not ".k_proj.output_scale": the reference
  // returns the name unchanged rather than None.
  EXPECT_EQ(config.get_cache_scale("model.layers.0.self_attn.k_proj.extra.output_scale"),
            "model.layers.0.self_attn.k_proj.extra.output_scale");
  // ".k_proj" is tested before ".v_proj", wherever it sits in the name.
  EXPECT_EQ(config.get_cache_scale("a.v_proj.b.k_proj.output_scale"), "a.v_proj.b.attn.k_scale");
  EXPECT_EQ(config.get_cache_scale("a.k_proj.b.v_proj.output_scale"), "a.k_proj.b.v_proj.output_scale");
  // str.replace replaces every occurrence.
  EXPECT_EQ(config.get_cache_scale("x.k_proj.output_scale.k_proj.output_scale"), "x.attn.k_scale.attn.k_scale");
  EXPECT_EQ(config.get_cache_scale("m.prob_output_scale.self_attn.prob_output_scale"),
            "m.attn.prob_scale.self_attn.attn.prob_scale");
}

// ---- apply_vllm_mapper ----

TEST(Fp8ConfigMapper, RenamesAndDropsIgnoredLayers) {
  Fp8Config config(true, "dynamic", {"model.visual.blocks.0.attn.qkv", "model.layers.0.mlp.gate", "lm_head"});
  WeightsMapper mapper;
  mapper.orig_to_new_prefix = {{"model.visual.", std::nullopt}, {"model.", "language_model.model."}};
  config.apply_vllm_mapper(mapper);
  EXPECT_EQ(config.ignored_layers, (std::vector<std::string>{"language_model.model.layers.0.mlp.gate", "lm_head"}));
}

}  // namespace
}  // namespace fp8kit
