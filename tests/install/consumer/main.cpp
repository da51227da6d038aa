// The consumer program of tests/install: built against the installed fp8kit package (CMake and
// pkg-config), it runs one op of each kind a user embeds (quantization, an FP8 GEMM, the
// tokenizer, the checkpoint tools' error path) and checks exact results. Prints "consumer: ok".
#include <cmath>
#include <cstdio>
#include <string>

#include <fp8kit/convert.h>
#include <fp8kit/error.h>
#include <fp8kit/model/tokenizer.h>
#include <fp8kit/ops/gemm.h>
#include <fp8kit/ops/quant.h>
#include <fp8kit/platform.h>
#include <fp8kit/version.h>

#ifdef FP8KIT_CONSUMER_ALL_HEADERS
int fp8kit_consumer_header_count();
#endif

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "consumer: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  try {
    check(std::string(fp8kit::version_string()) == FP8KIT_VERSION_STRING,
          std::string("library version ") + fp8kit::version_string() + " == header version " FP8KIT_VERSION_STRING);
#ifdef FP8KIT_EXPECT_CUDA
    check(fp8kit::cuda_built() == bool(FP8KIT_EXPECT_CUDA), "cuda_built() matches the package");
#endif
#ifdef FP8KIT_CONSUMER_ALL_HEADERS
    check(fp8kit_consumer_header_count() == FP8KIT_CONSUMER_ALL_HEADERS, "all headers compiled");
#endif

    // Dynamic per-tensor quantization: max |x| = 896, so the scale is 896 / 448 = 2 and x / 2 is
    // exact in e4m3fn.
    const fp8kit::ForwardContext ctx;
    const fp8kit::Tensor x = fp8kit::Tensor::from_vector<float>({1, -2, 4, 896, 0.5f, 3, -6, 8}, {2, 4});
    const fp8kit::ops::QuantResult q = fp8kit::ops::scaled_fp8_quant(ctx, x);
    check(q.scale.item_f32() == 2.0f, "scaled_fp8_quant scale 2, got " + std::to_string(q.scale.item_f32()));
    const fp8kit::Float8E4M3FN* codes = q.q.data<fp8kit::Float8E4M3FN>();
    for (int i = 0; i < 8; ++i) {
      const float value = fp8kit::decode_fp8<fp8kit::E4M3FNFormat>(codes[i].bits) * 2.0f;
      check(value == x.data<float>()[i], "q[" + std::to_string(i) + "] * scale == x");
    }

    // y = (a * 2) @ (b * 1)^T with b the 4x4 identity (static scale 1): y = x, exactly, in f32.
    std::vector<float> eye(16, 0.0f);
    for (int i = 0; i < 4; ++i) eye[i * 5] = 1.0f;
    fp8kit::ops::ScaledFp8QuantOptions unit_scale;
    unit_scale.scale = fp8kit::Tensor::scalar_f32(1.0f);
    const fp8kit::ops::QuantResult b =
        fp8kit::ops::scaled_fp8_quant(ctx, fp8kit::Tensor::from_vector<float>(eye, {4, 4}), unit_scale);
    fp8kit::ops::ScaledMmOptions mm;
    mm.out_dtype = fp8kit::DType::kF32;
    const fp8kit::Tensor y = fp8kit::ops::scaled_mm(ctx, q.q, b.q, q.scale, b.scale, mm);
    for (int i = 0; i < 8; ++i) check(y.data<float>()[i] == x.data<float>()[i], "scaled_mm y[" + std::to_string(i) + "]");

    // The tokenizer (PCRE2 for the split pattern, utf8proc for NFC): "ab ab" -> [2, 2].
    const fp8kit::Tokenizer tok = fp8kit::Tokenizer::from_json(R"({
      "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
      "normalizer": {"type": "NFC"},
      "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": false},
      "post_processor": null, "decoder": null,
      "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
    check(tok.encode("ab ab") == std::vector<int32_t>{2, 2}, "tokenizer encode");

    // Library errors arrive as fp8kit::Error with a code.
    try {
      fp8kit::inspect_checkpoint("/nonexistent/fp8kit-consumer");
      check(false, "inspect_checkpoint of a missing directory throws");
    } catch (const fp8kit::Error& e) {
      check(e.code() == fp8kit::ErrorCode::kIo, std::string("kIo error, got ") + fp8kit::error_code_name(e.code()));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: FAILED with an exception: %s\n", e.what());
    return 1;
  }
  if (failures > 0) return 1;
  std::printf("consumer: ok (fp8kit %s)\n", fp8kit::version_string());
  return 0;
}
