// The model runner's logits for the Python tests (tests/python/test_runner_forward.py): runs token
// ids through fp8kit::Engine as one request and writes the logits of every position as a float32
// .npy [n, vocab] (row p predicts token p + 1).
//   fp8kit_logits MODEL IDS_FILE OUT.npy [--chunk N] [--dtype float32|bfloat16|auto]
//                 [--quantization auto|fp8] [--kv-cache-dtype D] [--allow-f32-quantized]
// --chunk N: at most N tokens a step (the prompt is prefilled in chunks; 1 = token by token, the
// decode path). IDS_FILE: whitespace-separated ids.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "fp8kit/checkpoint.h"
#include "fp8kit/half.h"
#include "fp8kit/model/engine.h"

namespace {

void write_npy(const std::string& path, const std::vector<float>& data, int64_t rows, int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * 4));
  if (!out) throw std::runtime_error("cannot write " + path);
}

float value(const fp8kit::Tensor& t, int64_t r, int64_t c) {
  const int64_t i = r * t.stride(0) + c;
  switch (t.dtype()) {
    case fp8kit::DType::kBF16: return fp8kit::bf16_to_float(t.data<fp8kit::BFloat16>()[i]);
    case fp8kit::DType::kF16: return fp8kit::f16_to_float(t.data<fp8kit::Float16>()[i]);
    default: return t.data<float>()[i];
  }
}

int run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: fp8kit_logits MODEL IDS_FILE OUT.npy [--chunk N] [--dtype D] [--quantization Q] "
                         "[--kv-cache-dtype D] [--allow-f32-quantized]\n");
    return 2;
  }
  const std::string model = argv[1];
  std::ifstream ids_in(argv[2]);
  std::vector<int32_t> ids{std::istream_iterator<int32_t>(ids_in), std::istream_iterator<int32_t>()};
  fp8kit::EngineOptions o;
  const fp8kit::Checkpoint checkpoint = fp8kit::Checkpoint::open(model);
  o.load.quantize = checkpoint.config().contains("quantization_config");
  for (int i = 4; i < argc; ++i) {
    const std::string flag = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    if (flag == "--chunk") o.max_tokens_per_step = std::stoll(value), ++i;
    else if (flag == "--dtype" && value == "float32") o.load.dtype = fp8kit::DType::kF32, ++i;
    else if (flag == "--dtype" && value == "bfloat16") o.load.dtype = fp8kit::DType::kBF16, ++i;
    else if (flag == "--dtype" && value == "auto") ++i;
    else if (flag == "--quantization") o.load.quantize = o.load.quantize || value == "fp8", ++i;
    else if (flag == "--kv-cache-dtype") o.kv_cache.dtype = value, ++i;
    else if (flag == "--allow-f32-quantized") o.load.allow_f32_quantized = true;
    else throw std::runtime_error("unknown option " + flag);
  }
  o.kv_cache.num_tokens = static_cast<int64_t>(ids.size());
  fp8kit::Engine engine(model, o);
  fp8kit::GenerationParams p;
  p.max_tokens = 0;
  p.return_logits = true;
  engine.add_request(ids, p);
  const fp8kit::ForwardContext ctx = fp8kit::ForwardContext::from_environment();
  std::vector<float> out;
  int64_t rows = 0;
  const int64_t vocab = engine.model_info().vocab_size;
  while (engine.has_unfinished_requests()) {
    for (const fp8kit::RequestOutput& r : engine.step(ctx).outputs) {
      for (int64_t i = 0; i < r.logits.size(0); ++i, ++rows) {
        for (int64_t v = 0; v < vocab; ++v) out.push_back(value(r.logits, i, v));
      }
    }
  }
  write_npy(argv[3], out, rows, vocab);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8kit_logits: %s\n", e.what());
    return 1;
  }
}
