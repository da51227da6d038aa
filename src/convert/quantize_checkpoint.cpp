// quantize_checkpoint: executes a QuantizePlan tensor by tensor, in file order, from the mapped
// input to the streaming shard writers, releasing each input tensor's pages once written, so
// memory stays near the largest tensor whatever the checkpoint size.
#include <algorithm>
#include <chrono>
#include <cfloat>

#include "convert/auxiliary_files.h"
#include "convert/module_names.h"
#include "convert/output_directory.h"
#include "convert/quantize_plan.h"
#include "convert/sharded_output.h"
#include "convert/tensor_scan.h"
#include "core/check.h"
#include "core/names.h"
#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"
#include "fp8kit/ops/quant.h"

namespace fp8kit {
namespace {

using convert::PlannedWeight;
using convert::QuantizePlan;

// Every tensor in the order its bytes lie in the shards: sequential reads of each file.
std::vector<std::string> tensors_in_file_order(const Checkpoint& checkpoint) {
  std::vector<std::string> names = checkpoint.tensor_names();
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    const std::string &fa = checkpoint.shard_of(a), &fb = checkpoint.shard_of(b);
    if (fa != fb) return fa < fb;
    return checkpoint.info(a).data_begin < checkpoint.info(b).data_begin;
  });
  return names;
}

// A tensor of the checkpoint ready for arithmetic: the zero-copy view when its address suits its
// dtype (files from conforming writers), an aligned copy otherwise (a hand-made file).
Tensor aligned_tensor(const Checkpoint& checkpoint, const std::string& name) {
  const Tensor t = checkpoint.tensor(name);
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % t.element_size() == 0 ? t : t.clone();
}

float checked_absmax(const Checkpoint& checkpoint, const std::string& name) {
  const convert::ScanResult scan = convert::scan_tensor(aligned_tensor(checkpoint, name));
  FP8KIT_CHECK_ARG(scan.first_non_finite < 0, "{}: tensor {} holds a NaN or infinity at flat index {}",
                   shown_path(checkpoint.dir()), quote_name(name), scan.first_non_finite);
  return scan.absmax;
}

// The shared per-tensor scale of a fused group: the largest amax of its shards.
float group_scale(const Checkpoint& checkpoint, const std::vector<std::string>& members) {
  float amax = 0.0f;
  for (const std::string& m : members) {
    amax = std::max(amax, checked_absmax(checkpoint, m));
    checkpoint.release(m);
  }
  return std::max(amax / ops::fp8_quant_max(DType::kE4M3FN), FLT_MIN);
}

ops::QuantResult quantize_one(const Checkpoint& checkpoint, const std::string& name, const PlannedWeight& planned,
                              const QuantizeOptions& options, const QuantizePlan& plan,
                              std::map<std::string, float>& group_scales) {
  const Tensor w = aligned_tensor(checkpoint, name);
  const ForwardContext ctx = ForwardContext::from_environment();
  switch (options.scheme) {
    case QuantScheme::kPerTensor: {
      auto it = group_scales.find(planned.shared_scale_group);
      if (it == group_scales.end()) {
        const float s = group_scale(checkpoint, plan.scale_groups.at(planned.shared_scale_group));
        it = group_scales.emplace(planned.shared_scale_group, s).first;
      }
      ops::ScaledFp8QuantOptions o;
      o.scale = Tensor::scalar_f32(it->second);
      return ops::scaled_fp8_quant(ctx, w, o);
    }
    case QuantScheme::kPerChannel:
      checked_absmax(checkpoint, name);
      return ops::quantize_weight_per_channel(ctx, w);
    case QuantScheme::kBlock: {
      checked_absmax(checkpoint, name);
      ops::WeightQuantOptions o;
      o.ue8m0_scales = options.ue8m0_scales;
      return ops::quantize_weight_block(ctx, w, options.block_n, options.block_k, o);
    }
  }
  fail(ErrorCode::kInternal, "unknown quantization scheme");
}

}  // namespace

const char* quant_scheme_name(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::kPerTensor: return "per-tensor";
    case QuantScheme::kPerChannel: return "per-channel";
    case QuantScheme::kBlock: return "block";
  }
  return "unknown";
}

ConversionReport quantize_checkpoint(const std::string& input_dir, const std::string& output_dir,
                                     const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const Checkpoint checkpoint = Checkpoint::open(input_dir);
  nlohmann::ordered_json config = checkpoint.config();
  for (const char* key : {"quantization_config", "compression_config"}) {
    FP8KIT_CHECK_ARG(!config.contains(key), "{}/config.json already has a {}: the input must be unquantized",
                     shown_path(input_dir), key);
  }
  QuantizePlan plan = convert::plan_quantization(checkpoint, options);

  convert::OutputDirectory out(output_dir, options.force, input_dir);
  const convert::AuxiliaryFiles aux = convert::plan_auxiliary_files(input_dir, out.paths(), convert::written_by_conversion(checkpoint));
  convert::copy_auxiliary_files(input_dir, aux, out);
  convert::ShardedOutput shards(out, checkpoint, plan.shard_outputs);

  ConversionReport report;
  ConversionProgress progress;
  const std::vector<std::string> order = tensors_in_file_order(checkpoint);
  for (const std::string& name : order) progress.bytes_total += checkpoint.info(name).data_end - checkpoint.info(name).data_begin;
  std::map<std::string, float> group_scales;
  for (const std::string& name : order) {
    const TensorInfo& info = checkpoint.info(name);
    try {
      checkpoint.prefetch(name);
      const std::string& shard = checkpoint.shard_of(name);
      const auto planned = plan.weights.find(name);
      if (planned == plan.weights.end()) {
        shards.write(shard, name, checkpoint.tensor(name));
        report.tensors_copied++;
      } else {
        const ops::QuantResult r = quantize_one(checkpoint, name, planned->second, options, plan, group_scales);
        shards.write(shard, name, r.q);
        shards.write(shard, planned->second.scale_name, r.scale.view(planned->second.scale_shape));
        report.tensors_quantized++;
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
  config["quantization_config"] = plan.quantization_config;
  out.write_json("config.json", config);
  out.commit();

  plan.notes.insert(plan.notes.end(), out.notes().begin(), out.notes().end());
  plan.notes.insert(plan.notes.end(), aux.notes.begin(), aux.notes.end());
  report.ignored_layers = plan.ignored_layers;
  report.notes = plan.notes;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace fp8kit
