// The C++ side of the Python bindings' tests (tests/python/bindings): runs one op through the C++
// API on tensors read from a safetensors file and writes its results to another, so that the
// tests compare the bindings' results with the library's bit for bit.
//   fp8kit_op_oracle OP IN.safetensors OUT.safetensors [key=value ...]
// Inputs are read by name (x, scale, a, b, ...); options come as key=value (bool 0/1, ints, floats,
// dtype names, block=bn,bk). Outputs: q/scale, y, weights/ids, sorted/experts/padded, or the
// in-place arguments after the op (key_cache, value_cache, x, residual, output).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fp8kit/error.h"
#include "fp8kit/ops/gemm.h"
#include "fp8kit/ops/kv_cache.h"
#include "fp8kit/ops/moe_experts.h"
#include "fp8kit/ops/moe_routing.h"
#include "fp8kit/ops/norm.h"
#include "fp8kit/ops/quant.h"
#include "fp8kit/safetensors.h"

namespace {

using fp8kit::DType;
using fp8kit::Tensor;
namespace ops = fp8kit::ops;
using Outputs = std::vector<std::pair<std::string, Tensor>>;

struct Call {
  std::shared_ptr<const fp8kit::SafetensorsFile> file;
  std::map<std::string, std::string> options;

  // An input, copied out of the mapped file (writable, as in-place ops need).
  Tensor in(const std::string& name) const { return file->tensor(name).clone(); }
  Tensor maybe(const std::string& name) const {
    for (const auto& t : file->tensors()) {
      if (t.name == name) return in(name);
    }
    return {};
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    const auto it = options.find(key);
    return it == options.end() ? fallback : it->second;
  }
  bool flag(const std::string& key) const { return text(key, "0") == "1"; }
  int64_t integer(const std::string& key, int64_t fallback) const {
    return options.count(key) ? std::stoll(options.at(key)) : fallback;
  }
  double real(const std::string& key, double fallback) const {
    return options.count(key) ? std::stod(options.at(key)) : fallback;
  }
  DType dtype(const std::string& key, DType fallback) const {
    return options.count(key) ? *fp8kit::dtype_from_name(options.at(key)) : fallback;
  }
  std::optional<std::pair<int64_t, int64_t>> block(const std::string& key) const {
    if (!options.count(key)) return std::nullopt;
    const std::string& v = options.at(key);
    const size_t comma = v.find(',');
    return std::pair<int64_t, int64_t>{std::stoll(v.substr(0, comma)), std::stoll(v.substr(comma + 1))};
  }
};

Outputs run_op(const std::string& op, const Call& c) {
  const fp8kit::ForwardContext ctx = fp8kit::ForwardContext::from_environment();
  if (op == "scaled_fp8_quant") {
    ops::ScaledFp8QuantOptions o;
    o.scale = c.maybe("scale");
    o.scale_ub = c.maybe("scale_ub");
    if (c.options.count("padding")) o.num_token_padding = c.integer("padding", 0);
    o.use_per_token_if_dynamic = c.flag("per_token");
    o.out_dtype = c.dtype("dtype", DType::kE4M3FN);
    const ops::QuantResult r = ops::scaled_fp8_quant(ctx, c.in("x"), o);
    return {{"q", r.q}, {"scale", r.scale}};
  }
  if (op == "per_token_group_quant") {
    ops::PerTokenGroupQuantOptions o;
    o.group_size = c.integer("group_size", 128);
    o.eps = static_cast<float>(c.real("eps", 1e-10));
    o.out_dtype = c.dtype("dtype", DType::kE4M3FN);
    o.column_major_scales = c.flag("column_major");
    o.tma_aligned_scales = c.flag("tma_aligned");
    o.use_ue8m0 = c.flag("ue8m0");
    const ops::QuantResult r = ops::per_token_group_quant(ctx, c.in("x"), o);
    return {{"q", r.q}, {"scale", r.scale}};
  }
  if (op == "scaled_mm") {  // b as stored: [N, K]; scale_b in fp8kit's layout
    ops::ScaledMmOptions o;
    o.bias = c.maybe("bias");
    o.out_dtype = c.dtype("out_dtype", DType::kBF16);
    o.block = c.block("block");
    return {{"y", ops::scaled_mm(ctx, c.in("a"), c.in("b"), c.in("scale_a"), c.in("scale_b"), o)}};
  }
  if (op == "fused_experts") {
    ops::FusedExpertsOptions o;
    o.activation = c.text("activation", "silu");
    o.apply_router_weight_on_input = c.flag("router_weight_on_input");
    o.use_fp8_w8a8 = c.flag("fp8");
    o.weight_only = c.flag("weight_only");
    o.w1_scale = c.maybe("w1_scale");
    o.w2_scale = c.maybe("w2_scale");
    o.a1_scale = c.maybe("a1_scale");
    o.a2_scale = c.maybe("a2_scale");
    o.expert_map = c.maybe("expert_map");
    o.global_num_experts = c.integer("global_num_experts", -1);
    o.block_shape = c.block("block");
    return {{"y", ops::fused_experts(ctx, c.in("x"), c.in("w1"), c.in("w2"), c.in("topk_weights"), c.in("topk_ids"), o)}};
  }
  if (op == "fused_topk") {
    std::optional<DType> indices;
    if (c.options.count("indices_type")) indices = c.dtype("indices_type", DType::kI32);
    const ops::TopkResult r = ops::fused_topk(ctx, c.in("x"), c.in("gating"), c.integer("topk", 1),
                                              c.flag("renormalize"), indices);
    return {{"weights", r.weights}, {"ids", r.ids}};
  }
  if (op == "moe_align_block_size") {
    const ops::MoeAlignResult r = ops::moe_align_block_size(ctx, c.in("topk_ids"), c.integer("block_size", 16),
                                                            c.integer("num_experts", 1), c.maybe("expert_map"),
                                                            c.flag("pad_sorted_ids"));
    return {{"sorted", r.sorted_token_ids}, {"experts", r.expert_ids}, {"padded", r.num_tokens_post_padded}};
  }
  if (op == "silu_and_mul") return {{"y", ops::silu_and_mul(ctx, c.in("x"))}};
  if (op == "gelu_and_mul") return {{"y", ops::gelu_and_mul(ctx, c.in("x"))}};
  if (op == "moe_sum") {
    Tensor output = c.in("output");
    ops::moe_sum(ctx, c.in("x"), output);
    return {{"output", output}};
  }
  if (op == "reshape_and_cache_flash") {
    const Tensor key_cache = c.in("key_cache"), value_cache = c.in("value_cache");
    ops::reshape_and_cache_flash(ctx, c.in("key"), c.in("value"), key_cache, value_cache, c.in("slot_mapping"),
                                 ops::parse_kv_cache_dtype(c.text("kv_cache_dtype", "auto")), c.maybe("k_scale"),
                                 c.maybe("v_scale"));
    return {{"key_cache", key_cache}, {"value_cache", value_cache}};
  }
  if (op == "rms_norm") {
    return {{"y", ops::rms_norm(ctx, c.in("x"), c.in("weight"), static_cast<float>(c.real("eps", 1e-6)))}};
  }
  if (op == "fused_add_rms_norm") {
    const Tensor x = c.in("x"), residual = c.in("residual");
    ops::fused_add_rms_norm(ctx, x, residual, c.in("weight"), static_cast<float>(c.real("eps", 1e-6)));
    return {{"x", x}, {"residual", residual}};
  }
  throw fp8kit::Error(fp8kit::ErrorCode::kInvalidArgument, "unknown op " + op);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: fp8kit_op_oracle OP IN.safetensors OUT.safetensors [key=value ...]\n");
    return 2;
  }
  try {
    Call call{fp8kit::SafetensorsFile::open(argv[2]), {}};
    for (int i = 4; i < argc; ++i) {
      const std::string arg = argv[i];
      const size_t eq = arg.find('=');
      if (eq == std::string::npos) throw fp8kit::Error(fp8kit::ErrorCode::kInvalidArgument, "not key=value: " + arg);
      call.options[arg.substr(0, eq)] = arg.substr(eq + 1);
    }
    fp8kit::save_safetensors(argv[3], run_op(argv[1], call));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8kit_op_oracle: %s\n", e.what());
    return 1;
  }
  return 0;
}
