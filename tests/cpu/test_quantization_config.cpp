// QuantizationConfig helpers (spec 1.1, 4): get_from_keys(_or), is_layer_skipped, WeightsMapper,
// verify_quantization_support (torch dtype names), get_quant_config on real config.json files,
// and the Python str semantics they rest on. Every spec error text is compared verbatim.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <typeinfo>

#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "fp8kit/error.h"
#include "fp8kit/layers/fp8_config.h"
#include "fp8kit/layers/quantization_config.h"
#include "layers/py_string.h"
#include "layers/torch_dtype.h"

namespace fp8kit {
namespace {

using nlohmann::ordered_json;

using testing::expect_error;
using testing::expect_invalid;

const PackedModulesMapping kLlamaPacked = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}},
                                           {"gate_up_proj", {"gate_proj", "up_proj"}}};

using Rules = std::vector<std::pair<std::string, std::optional<std::string>>>;

// ---- Python str semantics ----

TEST(QuantizationConfigPyString, ReplaceAll) {
  EXPECT_EQ(py::replace_all("model.qkv_proj.qkv_proj", "qkv_proj", "q_proj"), "model.q_proj.q_proj");
  EXPECT_EQ(py::replace_all("aaa", "aa", "b"), "ba");  // non-overlapping, left to right
  EXPECT_EQ(py::replace_all("abc", "x", "y"), "abc");
  EXPECT_EQ(py::replace_all("ab", "", "X"), "XaXbX");  // Python's empty-pattern rule
  EXPECT_EQ(py::replace_all("", "", "X"), "X");
  EXPECT_EQ(py::replace_all("", "a", "X"), "");
}

TEST(QuantizationConfigPyString, LastComponent) {
  EXPECT_EQ(py::last_component("model.layers.0.self_attn.qkv_proj", '.'), "qkv_proj");
  EXPECT_EQ(py::last_component("lm_head", '.'), "lm_head");
  EXPECT_EQ(py::last_component("model.", '.'), "");
  EXPECT_EQ(py::last_component("", '.'), "");
}

TEST(QuantizationConfigPyString, ListRepr) {
  EXPECT_EQ(py::list_repr({}), "[]");
  EXPECT_EQ(py::list_repr({"quant_method"}), "['quant_method']");
  EXPECT_EQ(py::list_repr({"a", "b"}), "['a', 'b']");
  EXPECT_EQ(py::list_repr({"it's"}), "[\"it's\"]");
  EXPECT_EQ(py::list_repr({"a'b\"c"}), "['a\\'b\"c']");
  EXPECT_EQ(py::list_repr({"a\\b\n\t\x01"}), "['a\\\\b\\n\\t\\x01']");
}

// ---- get_from_keys / get_from_keys_or ----

TEST(QuantizationConfigGetFromKeys, FirstListedKeyWins) {
  ordered_json cfg = ordered_json::parse(R"({"b": 1, "a": 2})");
  EXPECT_EQ(QuantizationConfig::get_from_keys(cfg, {"a", "b"}), 2);
  EXPECT_EQ(QuantizationConfig::get_from_keys(cfg, {"c", "b"}), 1);
  // A present null is returned as is (Python returns None).
  ordered_json with_null = ordered_json::parse(R"({"a": null})");
  EXPECT_TRUE(QuantizationConfig::get_from_keys(with_null, {"a"}).is_null());
}

TEST(QuantizationConfigGetFromKeys, MissingKeysErrorListsThemLikePython) {
  ordered_json cfg = ordered_json::parse(R"({"quant_method": "fp8"})");
  expect_invalid([&] { QuantizationConfig::get_from_keys(cfg, {"x", "y"}); },
                 "Cannot find any of ['x', 'y'] in the model's quantization config.");
  expect_invalid([&] { QuantizationConfig::get_from_keys(cfg, {}); },
                 "Cannot find any of [] in the model's quantization config.");
  expect_invalid([] { QuantizationConfig::get_from_keys(ordered_json(3), {"a"}); },
                 "the model's quantization config must be a JSON object, got integer");
}

TEST(QuantizationConfigGetFromKeys, OrFallsBack) {
  ordered_json cfg = ordered_json::parse(R"({"ignored_layers": ["lm_head"]})");
  EXPECT_EQ(QuantizationConfig::get_from_keys_or(cfg, {"ignored_layers"}, nullptr),
            ordered_json::parse(R"(["lm_head"])"));
  EXPECT_TRUE(QuantizationConfig::get_from_keys_or(cfg, {"weight_block_size"}, nullptr).is_null());
  EXPECT_EQ(QuantizationConfig::get_from_keys_or(cfg, {"x"}, 7), 7);
  expect_invalid([] { QuantizationConfig::get_from_keys_or(ordered_json::array(), {"a"}, nullptr); },
                 "the model's quantization config must be a JSON object, got array");
}

// ---- is_layer_skipped ----

TEST(IsLayerSkipped, ExactMembershipOnly) {
  const std::vector<std::string> ignored = {"lm_head", "model.layers.0.mlp.down_proj", "model.layers.1.mlp"};
  EXPECT_TRUE(is_layer_skipped("lm_head", ignored));
  EXPECT_TRUE(is_layer_skipped("model.layers.0.mlp.down_proj", ignored, kLlamaPacked));
  // No substring, prefix or regex matching (hazard H10 is the spec's behaviour).
  EXPECT_FALSE(is_layer_skipped("model.layers.1.mlp.down_proj", ignored, kLlamaPacked));
  EXPECT_FALSE(is_layer_skipped("model.lm_head", ignored));
  EXPECT_FALSE(is_layer_skipped("lm_hea", ignored));
  EXPECT_FALSE(is_layer_skipped("", ignored));
  EXPECT_FALSE(is_layer_skipped("lm_head", {}));
}

TEST(IsLayerSkipped, AllShardsIgnored) {
  const std::vector<std::string> ignored = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                                            "model.layers.0.self_attn.v_proj", "model.layers.0.mlp.gate_proj",
                                            "model.layers.0.mlp.up_proj"};
  EXPECT_TRUE(is_layer_skipped("model.layers.0.self_attn.qkv_proj", ignored, kLlamaPacked));
  EXPECT_TRUE(is_layer_skipped("model.layers.0.mlp.gate_up_proj", ignored, kLlamaPacked));
}

TEST(IsLayerSkipped, NoShardIgnored) {
  const std::vector<std::string> ignored = {"lm_head", "model.layers.0.self_attn.qkv_proj"};
  EXPECT_FALSE(is_layer_skipped("model.layers.1.self_attn.qkv_proj", ignored, kLlamaPacked));
  EXPECT_FALSE(is_layer_skipped("model.layers.0.mlp.gate_up_proj", ignored, kLlamaPacked));
  // With a mapping, the fused name itself is not consulted: only its shards are.
  EXPECT_FALSE(is_layer_skipped("model.layers.0.self_attn.qkv_proj", ignored, kLlamaPacked));
  EXPECT_TRUE(is_layer_skipped("model.layers.0.self_attn.qkv_proj", ignored));
}

TEST(IsLayerSkipped, MixedShardsAreAnError) {
  const std::vector<std::string> ignored = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
                                            "model.layers.3.mlp.up_proj"};
  expect_invalid([&] { is_layer_skipped("model.layers.0.self_attn.qkv_proj", ignored, kLlamaPacked); },
                 "Detected some but not all shards of model.layers.0.self_attn.qkv_proj are quantized. All shards "
                 "of fused layers to have the same precision.");
  // The first shard quantized, a later one skipped: the same error.
  expect_invalid([&] { is_layer_skipped("model.layers.3.mlp.gate_up_proj", ignored, kLlamaPacked); },
                 "Detected some but not all shards of model.layers.3.mlp.gate_up_proj are quantized. All shards of "
                 "fused layers to have the same precision.");
}

TEST(IsLayerSkipped, ReplaceEveryOccurrenceOfTheFusedName) {
  // prefix.replace(proj_name, shard) rewrites both occurrences.
  const std::vector<std::string> both = {"model.q_proj.q_proj", "model.k_proj.k_proj", "model.v_proj.v_proj"};
  EXPECT_TRUE(is_layer_skipped("model.qkv_proj.qkv_proj", both, kLlamaPacked));
  const std::vector<std::string> last_only = {"model.qkv_proj.q_proj", "model.qkv_proj.k_proj",
                                              "model.qkv_proj.v_proj"};
  EXPECT_FALSE(is_layer_skipped("model.qkv_proj.qkv_proj", last_only, kLlamaPacked));
  // Also inside a longer component.
  const std::vector<std::string> inner = {"blk.gate_proj_ext.gate_proj", "blk.up_proj_ext.up_proj"};
  EXPECT_TRUE(is_layer_skipped("blk.gate_up_proj_ext.gate_up_proj", inner, kLlamaPacked));
}

TEST(IsLayerSkipped, FusedModuleWithoutShards) {
  const PackedModulesMapping broken = {{"qkv_proj", {}}};
  expect_invalid([&] { is_layer_skipped("model.layers.0.self_attn.qkv_proj", {}, broken); },
                 "packed_modules_mapping lists no shards for fused module 'qkv_proj' (layer "
                 "model.layers.0.self_attn.qkv_proj)");
}

TEST(IsLayerSkipped, SingleShardMapping) {
  const PackedModulesMapping single = {{"c_attn", {"attn_in"}}};
  EXPECT_TRUE(is_layer_skipped("h.0.c_attn", {"h.0.attn_in"}, single));
  EXPECT_FALSE(is_layer_skipped("h.0.c_attn", {"h.0.c_attn"}, single));
}

// ---- WeightsMapper ----

TEST(WeightsMapper, EmptyMapperIsIdentity) {
  WeightsMapper mapper;
  EXPECT_EQ(mapper.map_name("model.layers.0.mlp.down_proj.weight"), "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(mapper.map_name(""), "");
}

TEST(WeightsMapper, LongestSubstringWinsWhateverTheOrder) {
  for (bool reversed : {false, true}) {
    WeightsMapper mapper;
    mapper.orig_to_new_substr = {{"mlp.", "ffn."}, {"mlp.experts.", "moe."}};
    if (reversed) std::swap(mapper.orig_to_new_substr[0], mapper.orig_to_new_substr[1]);
    SCOPED_TRACE(reversed);
    EXPECT_EQ(mapper.map_name("model.layers.0.mlp.experts.3.w1"), "model.layers.0.moe.3.w1");
    EXPECT_EQ(mapper.map_name("model.layers.0.mlp.gate"), "model.layers.0.ffn.gate");
  }
}

TEST(WeightsMapper, SubstringReplacesFirstOccurrenceOnce) {
  WeightsMapper mapper;
  mapper.orig_to_new_substr = {{"a.", "b."}};
  EXPECT_EQ(mapper.map_name("x.a.a.y"), "x.b.a.y");
  // Only one rule of a kind applies, even if another still matches afterwards.
  mapper.orig_to_new_substr = {{"attn", "self_attn"}, {"self", "me"}};
  EXPECT_EQ(mapper.map_name("h.attn.w"), "h.self_attn.w");
}

TEST(WeightsMapper, EqualLengthTieGoesToTheFirstListed) {
  WeightsMapper mapper;
  mapper.orig_to_new_substr = {{"ab", "1"}, {"bc", "2"}};
  EXPECT_EQ(mapper.map_name("abc"), "1c");
  std::swap(mapper.orig_to_new_substr[0], mapper.orig_to_new_substr[1]);
  EXPECT_EQ(mapper.map_name("abc"), "a2");
}

TEST(WeightsMapper, LongestPrefixWins) {
  WeightsMapper mapper;
  mapper.orig_to_new_prefix = {{"model.", "language_model.model."}, {"model.visual.", "visual."}};
  EXPECT_EQ(mapper.map_name("model.layers.0.self_attn.q_proj"), "language_model.model.layers.0.self_attn.q_proj");
  EXPECT_EQ(mapper.map_name("model.visual.blocks.0"), "visual.blocks.0");
  EXPECT_EQ(mapper.map_name("lm_head"), "lm_head");
  EXPECT_EQ(mapper.map_name("xmodel.layers"), "xmodel.layers");  // a prefix, not a substring
}

TEST(WeightsMapper, LongestSuffixWinsAndReplacesTheEnd) {
  WeightsMapper mapper;
  mapper.orig_to_new_suffix = {{".weight", ".w"}, {"proj.weight", "proj.qweight"}};
  EXPECT_EQ(mapper.map_name("x.k_proj.weight"), "x.k_proj.qweight");
  EXPECT_EQ(mapper.map_name("x.norm.weight"), "x.norm.w");
  EXPECT_EQ(mapper.map_name("a.weight.weight"), "a.weight.w");  // the last occurrence only
  EXPECT_EQ(mapper.map_name("x.weight_scale"), "x.weight_scale");
}

TEST(WeightsMapper, NulloptDropsTheName) {
  WeightsMapper mapper;
  mapper.orig_to_new_substr = {{"rotary_emb.inv_freq", std::nullopt}};
  mapper.orig_to_new_prefix = {{"model.", "m."}, {"model.visual.", std::nullopt}};
  mapper.orig_to_new_suffix = {{".weight", ".w"}, {".bias_scale", std::nullopt}};
  EXPECT_EQ(mapper.map_name("model.layers.0.self_attn.rotary_emb.inv_freq"), std::nullopt);
  EXPECT_EQ(mapper.map_name("model.visual.blocks.0.weight"), std::nullopt);
  EXPECT_EQ(mapper.map_name("model.layers.0.o_proj.bias_scale"), std::nullopt);
  EXPECT_EQ(mapper.map_name("model.layers.0.o_proj.weight"), "m.layers.0.o_proj.w");
  // A longer key mapping to a name beats a shorter key mapping to nullopt.
  mapper.orig_to_new_prefix = {{"model.", std::nullopt}, {"model.layers.", "layers."}};
  EXPECT_EQ(mapper.map_name("model.layers.0.o_proj.weight"), "layers.0.o_proj.w");
  EXPECT_EQ(mapper.map_name("model.norm.weight"), std::nullopt);
}

TEST(WeightsMapper, StagesChainSubstrPrefixSuffix) {
  WeightsMapper mapper;
  mapper.orig_to_new_substr = {{".h.", ".layers."}};
  mapper.orig_to_new_prefix = {{"transformer.", "model."}};
  mapper.orig_to_new_suffix = {{".c_attn", ".qkv_proj"}};
  EXPECT_EQ(mapper.map_name("transformer.h.0.attn.c_attn"), "model.layers.0.attn.qkv_proj");
  // The prefix stage sees the name after the substring stage.
  mapper.orig_to_new_substr = {{"transformer.", "tf."}};
  EXPECT_EQ(mapper.map_name("transformer.h.0.attn.c_attn"), "tf.h.0.attn.qkv_proj");
}

TEST(WeightsMapper, ApplyListKeepsOrderAndDropsNullopt) {
  WeightsMapper mapper;
  mapper.orig_to_new_prefix = {{"model.visual.", std::nullopt}, {"model.", "language_model.model."}};
  std::vector<std::string> names = {"model.layers.1.mlp.gate", "model.visual.merger", "lm_head",
                                    "model.layers.0.mlp.gate"};
  EXPECT_EQ(mapper.apply_list(names),
            (std::vector<std::string>{"language_model.model.layers.1.mlp.gate", "lm_head",
                                      "language_model.model.layers.0.mlp.gate"}));
  EXPECT_TRUE(mapper.apply_list({}).empty());
}

// ---- verify_quantization_support ----

TEST(QuantizationConfigVerify, CapabilityGate) {
  Fp8Config config;
  EXPECT_NO_THROW(verify_quantization_support(config, 80, DType::kBF16));
  EXPECT_NO_THROW(verify_quantization_support(config, 89, DType::kF16));
  EXPECT_NO_THROW(verify_quantization_support(config, 90, DType::kBF16));
  EXPECT_NO_THROW(verify_quantization_support(config, 100, DType::kBF16));
  expect_invalid([&] { verify_quantization_support(config, 75, DType::kBF16); },
                 "The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. Current "
                 "capability: 75.");
  expect_invalid([&] { verify_quantization_support(config, 79, DType::kF16); },
                 "The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. Current "
                 "capability: 79.");
}

TEST(QuantizationConfigVerify, DTypeGateUsesTorchNames) {
  Fp8Config config;
  expect_invalid([&] { verify_quantization_support(config, 90, DType::kF32); },
                 "torch.float32 is not supported for quantization method fp8. Supported dtypes: [torch.bfloat16, "
                 "torch.float16]");
  expect_invalid([&] { verify_quantization_support(config, 90, DType::kE4M3FN); },
                 "torch.float8_e4m3fn is not supported for quantization method fp8. Supported dtypes: "
                 "[torch.bfloat16, torch.float16]");
  // The capability is checked first.
  expect_invalid([&] { verify_quantization_support(config, 70, DType::kF32); },
                 "The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. Current "
                 "capability: 70.");
}

TEST(QuantizationConfigTorchDType, Names) {
  EXPECT_STREQ(torch_dtype_name(DType::kF32), "torch.float32");
  EXPECT_STREQ(torch_dtype_name(DType::kF16), "torch.float16");
  EXPECT_STREQ(torch_dtype_name(DType::kBF16), "torch.bfloat16");
  EXPECT_STREQ(torch_dtype_name(DType::kF64), "torch.float64");
  EXPECT_STREQ(torch_dtype_name(DType::kE4M3FN), "torch.float8_e4m3fn");
  EXPECT_STREQ(torch_dtype_name(DType::kE4M3FNUZ), "torch.float8_e4m3fnuz");
  EXPECT_STREQ(torch_dtype_name(DType::kE5M2), "torch.float8_e5m2");
  EXPECT_STREQ(torch_dtype_name(DType::kE5M2FNUZ), "torch.float8_e5m2fnuz");
  EXPECT_STREQ(torch_dtype_name(DType::kUE8M0), "torch.float8_e8m0fnu");
  EXPECT_STREQ(torch_dtype_name(DType::kI8), "torch.int8");
  EXPECT_STREQ(torch_dtype_name(DType::kU8), "torch.uint8");
  EXPECT_STREQ(torch_dtype_name(DType::kI16), "torch.int16");
  EXPECT_STREQ(torch_dtype_name(DType::kU16), "torch.uint16");
  EXPECT_STREQ(torch_dtype_name(DType::kI32), "torch.int32");
  EXPECT_STREQ(torch_dtype_name(DType::kU32), "torch.uint32");
  EXPECT_STREQ(torch_dtype_name(DType::kI64), "torch.int64");
  EXPECT_STREQ(torch_dtype_name(DType::kU64), "torch.uint64");
  EXPECT_STREQ(torch_dtype_name(DType::kBool), "torch.bool");
  EXPECT_EQ(torch_dtype_list({}), "[]");
  EXPECT_EQ(torch_dtype_list({DType::kBF16, DType::kF16}), "[torch.bfloat16, torch.float16]");
}

// ---- get_quant_config ----

const Fp8Config& as_fp8(const std::unique_ptr<QuantizationConfig>& config) {
  const auto* fp8 = dynamic_cast<const Fp8Config*>(config.get());
  if (fp8 == nullptr) throw std::runtime_error("not an Fp8Config");
  return *fp8;
}

TEST(QuantizationConfigGetQuantConfig, OnlineBf16CheckpointGetsDefaultFp8) {
  ordered_json hf = ordered_json::parse(R"({
      "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
      "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
      "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
      "torch_dtype": "bfloat16", "vocab_size": 128256})");
  auto config = get_quant_config(hf);
  ASSERT_NE(config, nullptr);
  const Fp8Config& fp8 = as_fp8(config);
  EXPECT_FALSE(fp8.is_checkpoint_fp8_serialized);
  EXPECT_EQ(fp8.activation_scheme, "dynamic");
  EXPECT_TRUE(fp8.ignored_layers.empty());
  EXPECT_FALSE(fp8.weight_block_size.has_value());
  // A null quantization_config is as good as absent.
  EXPECT_FALSE(as_fp8(get_quant_config(ordered_json::parse(R"({"quantization_config": null})")))
                   .is_checkpoint_fp8_serialized);
}

TEST(QuantizationConfigGetQuantConfig, SerializedFp8Checkpoints) {
  auto llama = get_quant_config(ordered_json::parse(R"({"architectures": ["LlamaForCausalLM"],
      "quantization_config": {"activation_scheme": "static", "ignored_layers": ["lm_head"], "quant_method": "fp8"}})"));
  EXPECT_TRUE(as_fp8(llama).is_checkpoint_fp8_serialized);
  EXPECT_EQ(as_fp8(llama).activation_scheme, "static");
  EXPECT_EQ(as_fp8(llama).ignored_layers, (std::vector<std::string>{"lm_head"}));

  auto deepseek = get_quant_config(ordered_json::parse(R"({"model_type": "deepseek_v3", "quantization_config":
      {"activation_scheme":"dynamic","fmt":"e4m3","quant_method":"fp8","weight_block_size":[128,128]}})"));
  EXPECT_EQ(*as_fp8(deepseek).weight_block_size, (std::vector<int64_t>{128, 128}));

  // compression_config is the other name vLLM reads; quantization_config comes first.
  auto compression = get_quant_config(ordered_json::parse(
      R"({"compression_config": {"quant_method": "fp8", "activation_scheme": "static"}})"));
  EXPECT_EQ(as_fp8(compression).activation_scheme, "static");
  auto both = get_quant_config(ordered_json::parse(R"({
      "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"},
      "compression_config": {"quant_method": "compressed-tensors"}})"));
  EXPECT_EQ(as_fp8(both).activation_scheme, "dynamic");
}

TEST(QuantizationConfigGetQuantConfig, OtherMethodsAreUnsupported) {
  for (const char* method : {"compressed-tensors", "modelopt", "fbgemm_fp8", "gptq", "awq", "FP8"}) {
    SCOPED_TRACE(method);
    ordered_json hf = {{"quantization_config", {{"quant_method", method}, {"activation_scheme", "dynamic"}}}};
    expect_error([&] { get_quant_config(hf); }, ErrorCode::kUnsupported,
                 std::string("quantization method '") + method + "' is not supported yet");
  }
}

TEST(QuantizationConfigGetQuantConfig, MalformedConfigs) {
  expect_invalid([] { get_quant_config(ordered_json::parse(R"({"quantization_config": "fp8"})")); },
                 "config.json key 'quantization_config' must be a JSON object, got string");
  expect_invalid([] { get_quant_config(ordered_json::parse(R"({"compression_config": [1]})")); },
                 "config.json key 'compression_config' must be a JSON object, got array");
  expect_invalid([] { get_quant_config(ordered_json::parse(R"([1, 2])")); },
                 "the model's config.json must be a JSON object, got array");
  expect_invalid([] { get_quant_config(ordered_json::parse(R"({"quantization_config": {"quant_method": 1}})")); },
                 "quantization config key 'quant_method' must be a string, got integer");
  // No quant_method: the spec's from_config error.
  expect_invalid(
      [] { get_quant_config(ordered_json::parse(R"({"quantization_config": {"activation_scheme": "dynamic"}})")); },
      "Cannot find any of ['quant_method'] in the model's quantization config.");
  expect_invalid([] { get_quant_config(ordered_json::parse(R"({"quantization_config": {"quant_method": "fp8"}})")); },
                 "Cannot find any of ['activation_scheme'] in the model's quantization config.");
}

}  // namespace
}  // namespace fp8kit
