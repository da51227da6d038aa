// dequantize_checkpoint: FP8 weights back to 16-bit with their scales (per-tensor, per-channel
// or block), quantization parameters dropped, config without quantization_config. Streams
// tensor by tensor like quantize.
#include <chrono>
#include <map>

#include "convert/auxiliary_files.h"
#include "convert/checkpoint_layout.h"
#include "convert/output_directory.h"
#include "convert/sharded_output.h"
#include "core/check.h"
#include "core/names.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"
#include "fp8kit/ops/quant.h"

namespace fp8kit {
namespace {

DType default_out_dtype(const Checkpoint& checkpoint) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!checkpoint.config().contains(key) || !checkpoint.config()[key].is_string()) continue;
    const std::string d = checkpoint.config()[key].get<std::string>();
    if (d == "float16") return DType::kF16;
    if (d == "bfloat16") return DType::kBF16;
  }
  return DType::kBF16;
}

}  // namespace

ConversionReport dequantize_checkpoint(const std::string& input_dir, const std::string& output_dir,
                                       const DequantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const Checkpoint checkpoint = Checkpoint::open(input_dir);
  const convert::CheckpointLayout layout = convert::analyze_checkpoint(checkpoint);
  // What inspect reports as a problem of the config or of a weight's scale is refused here with
  // the same text: a loader would refuse the config, and a bad scale dequantizes to NaN, Inf or
  // flipped weights.
  FP8KIT_CHECK_ARG(layout.config_problems.empty(), "{}/{}: {}", shown_path(input_dir), layout.config_file,
                   layout.config_problems.empty() ? "" : layout.config_problems.front());
  FP8KIT_CHECK_ARG(!layout.fp8_weights.empty(), "{} holds no FP8 weights to dequantize", shown_path(input_dir));
  for (const auto& [name, w] : layout.fp8_weights) {
    FP8KIT_CHECK_ARG(!w.scale.empty() && !w.scheme.empty(), "{}: cannot dequantize {}: {}", shown_path(input_dir),
                     quote_name(name), w.scale.empty() ? "it has no scale tensor" : "its scale fits no known scheme");
    const auto bad = layout.scale_value_problems.find(w.scale);
    FP8KIT_CHECK_ARG(bad == layout.scale_value_problems.end(), "{}: cannot dequantize {}: {}",
                     shown_path(input_dir), quote_name(name),
                     bad == layout.scale_value_problems.end() ? "" : bad->second);
  }
  const DType out_dtype = options.out_dtype.value_or(default_out_dtype(checkpoint));
  FP8KIT_CHECK_ARG(out_dtype == DType::kBF16 || out_dtype == DType::kF16 || out_dtype == DType::kF32,
                   "dequantize: output dtype must be bf16, f16 or f32, got {}", dtype_name(out_dtype));

  // Quantization parameters are dropped; everything else is kept, shard by shard.
  auto dropped = [&](const std::string& name) {
    return layout.weight_scales.count(name) || layout.input_scales.count(name) || layout.kv_scales.count(name);
  };
  std::map<std::string, std::vector<TensorSpec>> shard_outputs;
  for (const std::string& name : checkpoint.tensor_names()) {
    if (dropped(name)) continue;
    const TensorInfo& info = checkpoint.info(name);
    const bool fp8 = layout.fp8_weights.count(name) != 0;
    shard_outputs[checkpoint.shard_of(name)].push_back({name, fp8 ? out_dtype : info.dtype, info.shape});
  }
  convert::OutputDirectory out(output_dir, options.force, input_dir);
  std::vector<std::string> written = convert::written_by_conversion(checkpoint);
  written.push_back("hf_quant_config.json");  // a ModelOpt quantization config: dropped with the scales
  const convert::AuxiliaryFiles aux = convert::plan_auxiliary_files(input_dir, out.paths(), written);
  convert::copy_auxiliary_files(input_dir, aux, out);
  convert::ShardedOutput shards(out, checkpoint, shard_outputs);

  ConversionReport report;
  ConversionProgress progress;
  for (const std::string& name : checkpoint.tensor_names()) progress.bytes_total += checkpoint.info(name).data_end - checkpoint.info(name).data_begin;
  for (const std::string& name : checkpoint.tensor_names()) {
    const TensorInfo& info = checkpoint.info(name);
    try {
      checkpoint.prefetch(name);
      if (!dropped(name)) {
        const std::string& shard = checkpoint.shard_of(name);
        const auto w = layout.fp8_weights.find(name);
        Tensor t;
        if (w == layout.fp8_weights.end()) {
          t = checkpoint.tensor(name);
          report.tensors_copied++;
        } else {
          const Tensor scale = convert::scale_as_f32(checkpoint, w->second.scale);
          const Tensor q = checkpoint.tensor(name);
          t = ops::dequantize_weight(ForwardContext::from_environment(), q, scale, out_dtype, w->second.block);
          checkpoint.verify(w->second.scale);
          report.tensors_quantized++;
        }
        shards.write(shard, name, t);
      }
      checkpoint.release(name);
    } catch (const Error&) {
      checkpoint.verify(name);  // a shard that shrank underneath is the cause to report
      throw;
    }
    progress.bytes_done += info.data_end - info.data_begin;
    progress.current_tensor = name;
    if (options.progress) options.progress(progress);
  }
  report.input_tensor_bytes = progress.bytes_total;
  shards.finish(checkpoint.sharded());
  report.output_tensor_bytes = shards.bytes_written();
  nlohmann::ordered_json config = checkpoint.config();
  config.erase("quantization_config");
  config.erase("compression_config");
  out.write_json("config.json", config);
  out.commit();
  report.notes.insert(report.notes.end(), out.notes().begin(), out.notes().end());
  report.notes.insert(report.notes.end(), aux.notes.begin(), aux.notes.end());
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace fp8kit
