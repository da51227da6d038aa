// The model runner for Python (include/fp8kit/model/engine.h, eval.h): fp8kit._fp8kit.Model holds
// an Engine, the checkpoint's tokenizer when it has a tokenizer.json, and the ForwardContext its
// forwards run in; generate, logits and eval run the engine to completion without the GIL, one
// call at a time per model (a mutex: Engine is not thread-safe). What `fp8kit generate` and
// `fp8kit eval` do, with the same options (cli/run_options.cpp), so that results are the CLI's bit
// for bit. python/fp8kit/model.py gives the keyword arguments. Tests:
// tests/python/bindings/test_bindings_model.py.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "fp8kit/checkpoint.h"
#include "fp8kit/error.h"
#include "fp8kit/half.h"
#include "fp8kit/model/engine.h"
#include "fp8kit/model/eval.h"
#include "fp8kit/model/tokenizer.h"
#include "fp8kit/runtime/overrides.h"
#include "tensor_interop.h"

namespace nb = nanobind;

namespace fp8kit::python {

namespace {

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

struct LoadArgs {
  std::string quantization = "auto";  // auto | fp8 (online for 16-bit checkpoints)
  std::optional<std::string> dtype;   // bf16 | f16 | f32 (fp8kit's names; the package maps others)
  std::string kv_cache_dtype = "auto";
  std::optional<int64_t> kv_cache_tokens, kv_cache_memory;
  bool calculate_kv_scales = false;
  int64_t max_tokens_per_step = 512;
  int64_t max_num_seqs = 64;
  std::optional<int64_t> threads;  // CPU threads of the forwards (default FP8KIT_NUM_THREADS / all)
};

// EngineOptions as cli/run_options.cpp's engine_options builds them.
EngineOptions engine_options(const std::string& dir, const LoadArgs& a) {
  if (a.quantization != "auto" && a.quantization != "fp8") {
    invalid("`quantization` must be 'auto' or 'fp8', got '" + a.quantization + "'");
  }
  if (a.kv_cache_dtype != "auto" && a.kv_cache_dtype != "fp8" && a.kv_cache_dtype != "fp8_e4m3" &&
      a.kv_cache_dtype != "fp8_e5m2") {
    invalid("`kv_cache_dtype` must be 'auto', 'fp8', 'fp8_e4m3' or 'fp8_e5m2', got '" + a.kv_cache_dtype + "'");
  }
  if (a.kv_cache_tokens && a.kv_cache_memory) invalid("give `kv_cache_tokens` or `kv_cache_memory`, not both");
  if (a.kv_cache_tokens && *a.kv_cache_tokens <= 0) {
    invalid("`kv_cache_tokens` must be positive, got " + std::to_string(*a.kv_cache_tokens));
  }
  if (a.kv_cache_memory && *a.kv_cache_memory <= 0) {
    invalid("`kv_cache_memory` must be a positive number of bytes, got " + std::to_string(*a.kv_cache_memory));
  }
  if (a.max_tokens_per_step <= 0) {
    invalid("`max_tokens_per_step` must be positive, got " + std::to_string(a.max_tokens_per_step));
  }
  if (a.max_num_seqs <= 0) invalid("`max_num_seqs` must be positive, got " + std::to_string(a.max_num_seqs));
  if (a.threads && (*a.threads < 1 || *a.threads > 1024)) {
    invalid("`threads` must be 1 to 1024, got " + std::to_string(*a.threads));
  }
  EngineOptions o;
  o.load.overrides = process_overrides();
  if (a.threads) o.load.overrides.num_threads = static_cast<int>(*a.threads);
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const auto& config = checkpoint.config();
  const auto present = [&](const char* key) { return config.contains(key) && !config[key].is_null(); };
  o.load.quantize = present("quantization_config") || present("compression_config") || a.quantization == "fp8";
  if (a.dtype) {
    const std::optional<DType> d = dtype_from_name(*a.dtype);
    if (!d || !(*d == DType::kBF16 || *d == DType::kF16 || *d == DType::kF32)) {
      invalid("`dtype` must be 'bfloat16', 'float16' or 'float32', got '" + *a.dtype + "'");
    }
    o.load.dtype = *d;
  }
  o.kv_cache.dtype = a.kv_cache_dtype;
  o.kv_cache.calculate_kv_scales = a.calculate_kv_scales;
  if (a.kv_cache_tokens) o.kv_cache.num_tokens = *a.kv_cache_tokens;
  if (a.kv_cache_memory) o.kv_cache.memory_bytes = *a.kv_cache_memory;
  o.max_tokens_per_step = a.max_tokens_per_step;
  o.max_num_seqs = a.max_num_seqs;
  return o;
}

struct GenerateArgs {
  int64_t max_tokens = 128;
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
};

// Logits rows of the model dtype as float32, appended to `out`.
void append_f32(const Tensor& logits, int64_t vocab, std::vector<float>& out) {
  for (int64_t r = 0; r < logits.size(0); ++r) {
    const int64_t row = r * logits.stride(0);
    for (int64_t v = 0; v < vocab; ++v) {
      const int64_t i = row + v * logits.stride(1);
      switch (logits.dtype()) {
        case DType::kBF16: out.push_back(bf16_to_float(logits.data<BFloat16>()[i])); break;
        case DType::kF16: out.push_back(f16_to_float(logits.data<Float16>()[i])); break;
        case DType::kF32: out.push_back(logits.data<float>()[i]); break;
        default: throw Error(ErrorCode::kInternal, std::string("logits of dtype ") + dtype_name(logits.dtype()));
      }
    }
  }
}

// The Python callable as an EvalOptions::progress (called without the GIL; see bind_convert.cpp).
std::function<void(int64_t, int64_t)> progress_callback(nb::object progress) {
  if (progress.is_none()) return {};
  auto callable = std::make_shared<nb::object>(std::move(progress));
  return [callable](int64_t done, int64_t total) {
    nb::gil_scoped_acquire gil;
    (*callable)(done, total);
  };
}

class Model {
 public:
  Model(const std::string& dir, const LoadArgs& args) {
    if (!std::filesystem::is_directory(dir)) {
      throw Error(ErrorCode::kIo, dir + ": not a directory (a checkpoint directory with config.json)");
    }
    const EngineOptions options = engine_options(dir, args);
    engine_ = std::make_unique<Engine>(dir, options);
    ctx_ = std::make_unique<ForwardContext>(options.load.device, options.load.overrides);
    if (std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) {
      tokenizer_ = Tokenizer::from_directory(dir);
    }
  }

  const Engine& engine() const { return *engine_; }
  Engine& engine() { return *engine_; }
  const ForwardContext& ctx() const { return *ctx_; }
  std::mutex& mutex() { return mutex_; }
  const Tokenizer& tokenizer(const char* what) const {
    if (!tokenizer_) invalid(std::string(what) + ": " + engine_->model_dir() + " has no tokenizer.json (give token ids)");
    return *tokenizer_;
  }
  bool has_tokenizer() const { return tokenizer_.has_value(); }

  // One request run to completion, as `fp8kit generate` runs it.
  nb::dict generate(const std::vector<int32_t>& prompt, const GenerateArgs& a) {
    if (prompt.empty()) invalid("`prompt` has no tokens");
    if (a.max_tokens < 1) invalid("`max_tokens` must be at least 1, got " + std::to_string(a.max_tokens));
    if (!std::isfinite(a.temperature) || a.temperature < 0) {
      invalid("`temperature` must be finite and >= 0, got " + std::to_string(a.temperature));
    }
    if (a.top_k < 0) invalid("`top_k` must be >= 0 (0: off), got " + std::to_string(a.top_k));
    if (!(a.top_p > 0 && a.top_p <= 1)) invalid("`top_p` must be in (0, 1], got " + std::to_string(a.top_p));
    if (!(a.min_p >= 0 && a.min_p <= 1)) invalid("`min_p` must be in [0, 1], got " + std::to_string(a.min_p));
    GenerationParams params;
    params.max_tokens = a.max_tokens;
    params.sampling.temperature = a.temperature;
    params.sampling.top_k = a.top_k;
    params.sampling.top_p = a.top_p;
    params.sampling.min_p = a.min_p;
    params.seed = a.seed;
    params.stop_token_ids = a.stop_token_ids;
    if (!a.ignore_eos) {
      for (int32_t id : engine_->eos_token_ids()) params.stop_token_ids.push_back(id);
      if (tokenizer_ && tokenizer_->eos_id()) params.stop_token_ids.push_back(*tokenizer_->eos_id());
    }
    std::vector<int32_t> ids;
    FinishReason reason = FinishReason::kNone;
    std::optional<std::string> text;
    {
      nb::gil_scoped_release released;
      std::lock_guard lock(mutex_);
      AbortUnfinished guard{*engine_, std::nullopt};
      guard.id = engine_->add_request(prompt, params);
      while (engine_->has_unfinished_requests()) {
        for (const RequestOutput& o : engine_->step(*ctx_).outputs) {
          ids.insert(ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
          reason = o.finish_reason;
        }
      }
      if (tokenizer_) text = tokenizer_->decode(ids, /*skip_special_tokens=*/true);
    }
    nb::dict d;
    d["ids"] = ids;
    d["text"] = text;
    d["prompt_tokens"] = prompt.size();
    d["finish_reason"] = reason == FinishReason::kStop ? "stop" : "length";
    return d;
  }

  // The logits of every position of `ids` (row p predicts token p + 1) as float32 [n, vocab].
  nb::object logits(const std::vector<int32_t>& ids) {
    if (ids.empty()) invalid("`ids` has no tokens");
    const int64_t vocab = engine_->model_info().vocab_size;
    std::vector<float> values;
    {
      nb::gil_scoped_release released;
      std::lock_guard lock(mutex_);
      AbortUnfinished guard{*engine_, std::nullopt};
      GenerationParams params;
      params.max_tokens = 0;
      params.return_logits = true;
      guard.id = engine_->add_request(ids, params);
      values.reserve(ids.size() * static_cast<size_t>(vocab));
      while (engine_->has_unfinished_requests()) {
        for (const RequestOutput& o : engine_->step(*ctx_).outputs) append_f32(o.logits, vocab, values);
      }
    }
    const int64_t rows = static_cast<int64_t>(values.size()) / vocab;
    Tensor out = Tensor::empty({rows, vocab}, DType::kF32);
    std::memcpy(out.data_ptr(), values.data(), values.size() * sizeof(float));
    return tensor_to_array(out, /*raw=*/false);
  }

 private:
  // Aborts the call's request when it did not finish (an error, an interrupted run), so the engine
  // is idle for the next call.
  struct AbortUnfinished {
    Engine& engine;
    std::optional<int64_t> id;
    ~AbortUnfinished() {
      if (id && engine.has_unfinished_requests()) engine.abort_request(*id);
    }
  };

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ForwardContext> ctx_;
  std::optional<Tokenizer> tokenizer_;
  std::mutex mutex_;
};

nb::dict info_dict(const Model& m) {
  const ModelInfo& i = m.engine().model_info();
  const KvCacheInfo kv = m.engine().kv_cache_info();
  nb::dict d;
  d["model_dir"] = m.engine().model_dir();
  d["architecture"] = i.architecture;
  d["dtype"] = std::string(dtype_name(i.dtype));
  d["quantization"] = i.quantization;
  d["vocab_size"] = i.vocab_size;
  d["num_layers"] = i.num_layers;
  d["max_model_len"] = i.max_model_len;
  d["kv_cache_dtype"] = kv.dtype;
  d["kv_cache_block_size"] = kv.block_size;
  d["kv_cache_blocks"] = kv.num_blocks;
  d["kv_cache_bytes"] = kv.bytes;
  d["eos_token_ids"] = m.engine().eos_token_ids();
  d["tokenizer"] = m.has_tokenizer();
  return d;
}

nb::object optional_number(const std::optional<double>& v) { return v ? nb::cast(*v) : nb::none(); }

// What `fp8kit eval --json` prints for one model (cli/cmd_eval.cpp), as a dict.
nb::dict eval_dict(const Model& model, const EvalResult& r, int64_t ctx, int64_t first, bool has_base) {
  const std::optional<DistributionStats>& s = r.vs_base;
  const auto stat = [&](double DistributionStats::*field) { return s ? nb::cast((*s).*field) : nb::none(); };
  nb::dict d;
  d["model"] = model.engine().model_dir();
  d["ppl"] = r.ppl;
  d["base_ppl"] = optional_number(r.base_ppl);
  d["kld_mean"] = stat(&DistributionStats::kld_mean);
  d["kld_stderr"] = stat(&DistributionStats::kld_stderr);
  d["kld_median"] = stat(&DistributionStats::kld_median);
  d["kld_p99"] = stat(&DistributionStats::kld_p99);
  d["kld_max"] = stat(&DistributionStats::kld_max);
  d["top1_agreement"] = stat(&DistributionStats::top1_agreement);
  d["delta_p_rms"] = stat(&DistributionStats::delta_p_rms);
  d["tokens"] = r.tokens;
  d["windows"] = r.windows;
  d["ctx"] = ctx;
  d["first"] = first;
  d["seconds"] = r.seconds;
  d["base_seconds"] = has_base ? nb::cast(r.base_seconds) : nb::none();
  return d;
}

nb::dict evaluate_model(Model& model, Model* base, const std::vector<int32_t>& tokens, int64_t ctx,
                        std::optional<int64_t> first, int64_t max_windows, nb::object progress) {
  if (ctx < 2) invalid("`ctx` must be at least 2, got " + std::to_string(ctx));
  if (first && *first < 0) invalid("`first` must be >= 0, got " + std::to_string(*first));
  if (max_windows < 0) invalid("`max_windows` must be >= 0 (0: all), got " + std::to_string(max_windows));
  EvalOptions o;
  o.ctx = ctx;
  o.first = first;
  o.max_windows = max_windows;
  o.progress = progress_callback(std::move(progress));
  EvalResult r;
  {
    nb::gil_scoped_release released;
    // Both locks at once (std::lock's order), so that eval(a, b) and eval(b, a) on two threads
    // cannot deadlock.
    std::unique_lock model_lock(model.mutex(), std::defer_lock);
    std::unique_lock<std::mutex> base_lock;
    if (base && base != &model) {
      base_lock = std::unique_lock(base->mutex(), std::defer_lock);
      std::lock(model_lock, base_lock);
    } else {
      model_lock.lock();
    }
    r = evaluate(model.ctx(), model.engine(), base ? &base->engine() : nullptr, tokens, o);
  }
  o.progress = {};
  return eval_dict(model, r, ctx, first.value_or(ctx / 2), base != nullptr);
}

}  // namespace

void bind_model(nb::module_& m) {
  using nb::arg;
  nb::class_<LoadArgs>(m, "LoadArgs")
      .def(nb::init<>())
      .def_rw("quantization", &LoadArgs::quantization)
      .def_rw("dtype", &LoadArgs::dtype, nb::arg().none())
      .def_rw("kv_cache_dtype", &LoadArgs::kv_cache_dtype)
      .def_rw("kv_cache_tokens", &LoadArgs::kv_cache_tokens, nb::arg().none())
      .def_rw("kv_cache_memory", &LoadArgs::kv_cache_memory, nb::arg().none())
      .def_rw("calculate_kv_scales", &LoadArgs::calculate_kv_scales)
      .def_rw("max_tokens_per_step", &LoadArgs::max_tokens_per_step)
      .def_rw("max_num_seqs", &LoadArgs::max_num_seqs)
      .def_rw("threads", &LoadArgs::threads, nb::arg().none());
  nb::class_<GenerateArgs>(m, "GenerateArgs")
      .def(nb::init<>())
      .def_rw("max_tokens", &GenerateArgs::max_tokens)
      .def_rw("temperature", &GenerateArgs::temperature)
      .def_rw("top_k", &GenerateArgs::top_k)
      .def_rw("top_p", &GenerateArgs::top_p)
      .def_rw("min_p", &GenerateArgs::min_p)
      .def_rw("seed", &GenerateArgs::seed)
      .def_rw("ignore_eos", &GenerateArgs::ignore_eos)
      .def_rw("stop_token_ids", &GenerateArgs::stop_token_ids);
  nb::class_<Model>(m, "Model", nb::is_weak_referenceable(), "A checkpoint loaded into fp8kit's model runner (fp8kit.Model wraps it)")
      .def(
          "__init__",
          [](Model* self, const std::string& dir, const LoadArgs& args) {
            nb::gil_scoped_release released;
            new (self) Model(dir, args);
          },
          arg("dir"), arg("args"))
      .def("generate", &Model::generate, arg("prompt"), arg("args"))
      .def("logits", &Model::logits, arg("ids"))
      .def("info", &info_dict)
      .def("encode",
           [](const Model& self, const std::string& text) {
             const Tokenizer& t = self.tokenizer("encode");
             nb::gil_scoped_release released;
             return t.encode(text);
           },
           arg("text"))
      .def("decode",
           [](const Model& self, const std::vector<int32_t>& ids, bool skip_special_tokens) {
             const Tokenizer& t = self.tokenizer("decode");
             nb::gil_scoped_release released;
             return t.decode(ids, skip_special_tokens);
           },
           arg("ids"), arg("skip_special_tokens"));
  m.def("evaluate", &evaluate_model, arg("model"), arg("base").none(), arg("tokens"), arg("ctx"), arg("first").none(),
        arg("max_windows"), arg("progress").none());
}

}  // namespace fp8kit::python
