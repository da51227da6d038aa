// Writes a synthetic BF16 checkpoint (src/convert/synthetic_checkpoint.h: seeded weights with a
// few outliers, no network) of a named shape, for the end-to-end benchmarks of models too large
// to ship: llama3-8b is a dense Qwen3 with Llama-3-8B's dimensions (32 layers, hidden 4096, 32
// heads of 128, 8 KV heads, intermediate 14336, vocabulary 128256, untied lm_head), 16.1 GB.
//   make_synthetic_model DIR [--shape llama3-8b|small] [--layers N]
#include <cstdio>
#include <string>

#include "convert/synthetic_checkpoint.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_synthetic_model DIR [--shape llama3-8b|small] [--layers N]\n");
    return 2;
  }
  std::string shape = "llama3-8b";
  int64_t layers = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--shape") {
      shape = value;
    } else if (flag == "--layers") {
      layers = std::stoll(value);
    } else {
      std::fprintf(stderr, "make_synthetic_model: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  fp8kit::convert::SyntheticModelSpec spec;
  spec.moe_layers = {};  // dense Qwen3
  if (shape == "llama3-8b") {
    spec.vocab_size = 128256;
    spec.hidden_size = 4096;
    spec.intermediate_size = 14336;
    spec.num_layers = 32;
    spec.num_heads = 32;
    spec.num_kv_heads = 8;
    spec.head_dim = 128;
  } else if (shape != "small") {
    std::fprintf(stderr, "make_synthetic_model: unknown shape %s (llama3-8b, small)\n", shape.c_str());
    return 2;
  }
  if (layers > 0) spec.num_layers = layers;
  spec.max_shard_bytes = uint64_t(4) << 30;
  try {
    std::printf("writing %.2f GB (%s, %lld layers) to %s\n", double(fp8kit::convert::synthetic_checkpoint_bytes(spec)) / 1e9,
                shape.c_str(), static_cast<long long>(spec.num_layers), argv[1]);
    fp8kit::convert::write_synthetic_checkpoint(argv[1], spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_synthetic_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
