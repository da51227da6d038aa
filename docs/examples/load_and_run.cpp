// Loads an FP8 (or BF16) Hugging Face checkpoint into fp8kit layers and runs one linear layer:
//   load_and_run <checkpoint-dir> [cuda]
// Built and run by the tests (tests/cpu/test_model_loader_checkpoints.cpp); docs/usage.md walks
// through it.
#include <cstdio>
#include <cstring>
#include <exception>

#include "fp8kit/half.h"
#include "fp8kit/model/model_loader.h"
#include "fp8kit/platform.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <checkpoint-dir> [cuda]\n", argv[0]);
    return 2;
  }
  try {
    fp8kit::LoadOptions options;  // TP rank 0 of 1, KV cache in the model dtype
    if (argc > 2 && std::strcmp(argv[2], "cuda") == 0) options.device = fp8kit::Device::cuda(0);
    options.overrides = fp8kit::process_overrides();  // the FP8KIT_* knobs, parsed once

    // config.json says which layers exist and how the checkpoint is quantized; every tensor is
    // placed, loaded from the mapped shards, and each layer post-processed (requantization,
    // online quantization of 16-bit weights, KV-cache scales).
    const fp8kit::LoadedModel model = fp8kit::load_model(argv[1], options);
    std::printf("quantization: %s\n", model.quant_config->get_name().c_str());

    fp8kit::LinearBase& layer = model.linear("model.layers.0.mlp.gate_up_proj");
    std::printf("%s: %s\n", layer.prefix().c_str(), layer.quant_method()->name().c_str());

    // What a forward runs in: the device (and on CUDA its stream), the scratch workspace the ops
    // take their temporaries from, and the kernel overrides. One context a stream, reused.
    const fp8kit::ForwardContext ctx(options.device, options.overrides);

    // A batch of 4 tokens in the model dtype; the layer quantizes them and runs the FP8 GEMM.
    fp8kit::Tensor x = fp8kit::Tensor::empty({4, layer.input_size()}, fp8kit::DType::kBF16);
    for (int64_t i = 0; i < x.numel(); ++i) {
      x.data<fp8kit::BFloat16>()[i] = fp8kit::float_to_bf16(float((i * 7) % 13) / 13.0f - 0.5f);
    }
    const fp8kit::Tensor y = layer.forward(ctx, x.to(options.device)).to(fp8kit::Device::cpu());
    std::printf("y%s, y[0, 0:4] = %.4f %.4f %.4f %.4f\n", fp8kit::shape_to_string(y.shape()).c_str(),
                fp8kit::bf16_to_float(y.data<fp8kit::BFloat16>()[0]), fp8kit::bf16_to_float(y.data<fp8kit::BFloat16>()[1]),
                fp8kit::bf16_to_float(y.data<fp8kit::BFloat16>()[2]), fp8kit::bf16_to_float(y.data<fp8kit::BFloat16>()[3]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
