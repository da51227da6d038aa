// Tokenizer encode throughput: a model's tokenizer.json over a batch of documents (one JSON
// string per line), encoded with Tokenizer::encode_batch on FP8KIT_NUM_THREADS threads.
// Writes the ids once (--ids FILE, one line per document) for bench/peers/tokenizer_hf.py to
// verify against Hugging Face tokenizers, then times --repeat runs and prints the median as JSON.
// --join: the documents are concatenated into one text and encoded by one encode() call instead.
//   bench_tokenizer MODEL_DIR DOCS.jsonl [--ids FILE] [--repeat N] [--join]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/parallel.h"
#include "fp8kit/error.h"
#include "fp8kit/model/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_tokenizer MODEL_DIR DOCS.jsonl [--ids FILE] [--repeat N]\n");
    return 2;
  }
  std::string ids_path;
  int repeat = 5;
  bool join = false;
  for (int i = 3; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--join") join = true;
    if (flag == "--ids" && i + 1 < argc) ids_path = argv[++i];
    if (flag == "--repeat" && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
  }
  try {
    const fp8kit::Tokenizer tokenizer = fp8kit::Tokenizer::from_directory(argv[1]);
    std::vector<std::string> docs;
    std::ifstream in(argv[2]);
    size_t bytes = 0;
    for (std::string line; std::getline(in, line);) {
      docs.push_back(nlohmann::json::parse(line).get<std::string>());
      bytes += docs.back().size();
    }
    if (join) {
      std::string all;
      for (const auto& d : docs) all += d;
      docs.assign(1, std::move(all));
    }
    auto encode = [&] {
      return join ? std::vector<std::vector<int32_t>>{tokenizer.encode(docs[0], /*add_special_tokens=*/false)}
                  : tokenizer.encode_batch(docs, /*add_special_tokens=*/false);
    };
    auto ids = encode();
    size_t tokens = 0;
    for (const auto& d : ids) tokens += d.size();
    if (!ids_path.empty()) {
      std::ofstream out(ids_path);
      for (const auto& d : ids) {
        for (size_t i = 0; i < d.size(); ++i) out << (i ? " " : "") << d[i];
        out << "\n";
      }
    }
    std::vector<double> seconds;
    for (int r = 0; r < repeat; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      ids = encode();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    const nlohmann::json result = {{"impl", "fp8kit"},          {"threads", join ? 1 : fp8kit::num_threads()},
                                   {"documents", docs.size()},   {"bytes", bytes},
                                   {"tokens", tokens},           {"seconds_median", median},
                                   {"mb_per_s", bytes / median / 1e6}};
    std::printf("%s\n", result.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
  return 0;
}
