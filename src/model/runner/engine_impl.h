// The state behind fp8kit::Engine (include/fp8kit/model/engine.h): options, the decoder model,
// the KV pool and the scheduler. Internal; tests reach the pieces through it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fp8kit/model/engine.h"
#include "model/runner/decode_graphs.h"
#include "model/runner/decoder_model.h"
#include "model/runner/kv_cache_pool.h"
#include "model/runner/scheduler.h"

namespace fp8kit::runner {

struct EngineImpl {
  EngineImpl(const std::string& model_dir, const EngineOptions& options);
  int64_t add_request(std::vector<int32_t> prompt, const GenerationParams& params);
  StepOutput step(const ForwardContext& ctx);

  std::string model_dir;
  EngineOptions options;
  DecoderModel model;
  std::unique_ptr<KvCachePool> pool;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<DecodeGraphs> graphs;  // CUDA with options.cuda_graphs (decode_graphs.h)
  ModelInfo info;
  std::vector<int32_t> eos;
  int64_t next_id = 0;
};

}  // namespace fp8kit::runner
