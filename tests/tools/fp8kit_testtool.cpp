// A small command-line bridge for the Python interop tests (tests/python): it exposes fp8kit's
// FP8 encoders and safetensors reader/writer to an independent oracle (ml_dtypes, the official
// safetensors package).
//   fp8kit_testtool encode FORMAT sat|nosat IN.f32 OUT.u8   raw little-endian float32 -> codes
//   fp8kit_testtool decode FORMAT IN.u8 OUT.f32              codes -> float32
//   fp8kit_testtool copy IN.safetensors OUT.safetensors      read every tensor, write them again
// FORMAT: e4m3fn, e4m3fnuz, e5m2, e5m2fnuz.
#include <cstdio>
#include <cstring>
#include <map>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fp8kit/fp8.h"
#include "fp8kit/safetensors.h"

namespace {

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) throw std::runtime_error("cannot write " + path);
}

template <typename F>
void encode(const std::vector<char>& in, fp8kit::Saturation sat, std::vector<uint8_t>& out) {
  const size_t n = in.size() / 4;
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, in.data() + 4 * i, 4);
    out[i] = fp8kit::encode_fp8<F>(x, sat);
  }
}

template <typename F>
void decode(const std::vector<char>& in, std::vector<float>& out) {
  out.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = fp8kit::decode_fp8<F>(static_cast<uint8_t>(in[i]));
}

int run(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "encode" && argc == 6) {
    const std::string format = argv[2];
    const fp8kit::Saturation sat = std::string(argv[3]) == "sat" ? fp8kit::Saturation::kSatFinite : fp8kit::Saturation::kNoSat;
    const std::vector<char> in = read_all(argv[4]);
    std::vector<uint8_t> out;
    if (format == "e4m3fn") encode<fp8kit::E4M3FNFormat>(in, sat, out);
    else if (format == "e4m3fnuz") encode<fp8kit::E4M3FNUZFormat>(in, sat, out);
    else if (format == "e5m2") encode<fp8kit::E5M2Format>(in, sat, out);
    else if (format == "e5m2fnuz") encode<fp8kit::E5M2FNUZFormat>(in, sat, out);
    else throw std::runtime_error("unknown format " + format);
    write_all(argv[5], out.data(), out.size());
    return 0;
  }
  if (cmd == "decode" && argc == 5) {
    const std::string format = argv[2];
    const std::vector<char> in = read_all(argv[3]);
    std::vector<float> out;
    if (format == "e4m3fn") decode<fp8kit::E4M3FNFormat>(in, out);
    else if (format == "e4m3fnuz") decode<fp8kit::E4M3FNUZFormat>(in, out);
    else if (format == "e5m2") decode<fp8kit::E5M2Format>(in, out);
    else if (format == "e5m2fnuz") decode<fp8kit::E5M2FNUZFormat>(in, out);
    else throw std::runtime_error("unknown format " + format);
    write_all(argv[4], out.data(), out.size() * 4);
    return 0;
  }
  if (cmd == "copy" && argc == 4) {
    const auto file = fp8kit::SafetensorsFile::open(argv[2]);
    std::vector<fp8kit::TensorSpec> specs;
    for (const auto& t : file->tensors()) specs.push_back({t.name, t.dtype, t.shape});
    std::map<std::string, std::string> metadata = file->metadata();
    fp8kit::SafetensorsWriter writer(argv[3], specs, metadata);
    for (const auto& t : file->tensors()) writer.write(t.name, file->tensor(t.name));
    writer.finish();
    return 0;
  }
  std::fprintf(stderr, "usage: see the header of tests/tools/fp8kit_testtool.cpp\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8kit_testtool: %s\n", e.what());
    return 1;
  }
}
