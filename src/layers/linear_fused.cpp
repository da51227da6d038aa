// MergedColumnParallelLinear and QKVParallelLinear (include/fp8kit/layers/linear.h; vLLM
// linear.py weight_loader_v2, spec 1.12): per-rank sizes of stacked layers and the loaders that
// place each checkpoint shard (or a tensor stored fused on disk) at its rows. Tested by
// tests/cpu/test_linear_load*.cpp.
#include <fmt/format.h>

#include <numeric>

#include "core/check.h"
#include "fp8kit/layers/linear.h"
#include "layers/linear_load.h"
#include "layers/parameter_load.h"

namespace fp8kit {
namespace {

int64_t total(const std::vector<int64_t>& sizes) { return std::accumulate(sizes.begin(), sizes.end(), int64_t(0)); }

std::vector<int64_t> merged_partition_sizes(const std::string& prefix, const std::vector<int64_t>& output_sizes,
                                            int tp_size) {
  FP8KIT_CHECK_ARG(!output_sizes.empty(), "{}: output_sizes must not be empty", detail::layer_name(prefix));
  std::vector<int64_t> parts;
  for (size_t i = 0; i < output_sizes.size(); ++i) {
    FP8KIT_CHECK_ARG(output_sizes[i] >= 1, "{}: output_sizes[{}] must be positive, got {}", detail::layer_name(prefix),
                     i, output_sizes[i]);
    parts.push_back(detail::divide_for_tp(prefix, output_sizes[i], tp_size, fmt::format("output_sizes[{}]", i)));
  }
  return parts;
}

// Heads per rank (vLLM's QKVParallelLinear.__init__): kv heads are split while there are at least
// as many as ranks, and replicated otherwise (num_kv_head_replicas ranks share one kv head).
struct QkvLayout {
  int64_t num_heads = 0, num_kv_heads = 0, num_kv_head_replicas = 1;
  std::vector<int64_t> partition_sizes;  // q, k, v on this rank
  int64_t output_size = 0;               // all ranks, kv replicas counted on each rank (vLLM's output_sizes)
};

QkvLayout qkv_layout(const std::string& prefix, int64_t head_size, int64_t total_num_heads,
                     std::optional<int64_t> total_num_kv_heads, int tp_size) {
  const std::string& name = detail::layer_name(prefix);
  const int64_t total_kv = total_num_kv_heads.value_or(total_num_heads);
  FP8KIT_CHECK_ARG(head_size >= 1 && total_num_heads >= 1 && total_kv >= 1,
                   "{}: head_size, total_num_heads and total_num_kv_heads must be positive, got {}, {} and {}", name,
                   head_size, total_num_heads, total_kv);
  QkvLayout l;
  l.num_heads = detail::divide_for_tp(prefix, total_num_heads, tp_size, "total_num_heads");
  if (tp_size >= total_kv) {
    l.num_kv_heads = 1;
    FP8KIT_CHECK_ARG(tp_size % total_kv == 0,
                     "{}: the tensor-parallel size {} is not divisible by total_num_kv_heads = {} (kv heads are "
                     "replicated across ranks)",
                     name, tp_size, total_kv);
    l.num_kv_head_replicas = tp_size / total_kv;
  } else {
    l.num_kv_heads = detail::divide_for_tp(prefix, total_kv, tp_size, "total_num_kv_heads");
  }
  l.partition_sizes = {l.num_heads * head_size, l.num_kv_heads * head_size, l.num_kv_heads * head_size};
  l.output_size = total(l.partition_sizes) * tp_size;
  return l;
}

// One logical shard's rows: where it starts and how many rows it has.
struct Rows {
  int64_t offset, size;
};

// Block-scale rows count blocks of block_n output rows (vLLM's adjust_block_scale_shard).
Rows in_blocks(Rows r, int64_t block_n) { return {ceil_div(r.offset, block_n), ceil_div(r.size, block_n)}; }

}  // namespace

// ---- MergedColumnParallelLinear ----

MergedColumnParallelLinear::MergedColumnParallelLinear(std::string prefix, int64_t input_size,
                                                       std::vector<int64_t> output_sizes, const LinearOptions& options)
    : ColumnParallelLinear(prefix, input_size, total(output_sizes), options,
                           merged_partition_sizes(prefix, output_sizes, options.parallel.tp_size)),
      output_sizes_(std::move(output_sizes)) {}

void MergedColumnParallelLinear::load_weight(std::string_view name, const Tensor& loaded,
                                             const std::optional<ShardId>& shard) {
  Parameter& p = parameter(name);
  if (p.kind == ParameterKind::kPlain) return detail::assert_and_load(*this, p, loaded, shard);
  const int64_t n = static_cast<int64_t>(output_sizes_.size());
  if (!shard) {
    // Stored fused on disk (Phi-3's gate_up_proj): one scale for the whole matrix, into slot 0
    // (the other slots keep the not-loaded sentinel that requantize_with_max_scale detects);
    // weights split by the full output sizes and loaded shard by shard.
    if (p.kind == ParameterKind::kPerTensorScale) return detail::load_scale_into_slot(*this, p, loaded, 0, shard);
    const int64_t block_n = p.kind == ParameterKind::kBlockScale ? detail::block_n_of(*this, p) : 1;
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      const Rows rows = in_blocks({offset, output_sizes_[size_t(i)]}, block_n);
      load_weight(name, detail::narrow_loaded(*this, p, loaded, 0, rows.offset, rows.size, shard), ShardId{i});
      offset += output_sizes_[size_t(i)];
    }
    p.loaded_shards.insert(shard_id_string(shard));
    return;
  }
  const int64_t* index = std::get_if<int64_t>(&*shard);
  FP8KIT_CHECK_ARG(index != nullptr && *index >= 0 && *index < n, "{}: Shard id should be between 0 and {}. Got shard id {}.",
                   detail::load_site(*this, p, std::nullopt), n - 1, shard_id_string(shard));
  const int64_t i = *index;
  if (p.kind == ParameterKind::kPerTensorScale) return detail::load_scale_into_slot(*this, p, loaded, i, shard);
  const int64_t tp = parallel_.tp_size;
  const int64_t before = std::accumulate(output_sizes_.begin(), output_sizes_.begin() + i, int64_t(0));
  Rows rows{before / tp, output_sizes_[size_t(i)] / tp};
  if (p.kind == ParameterKind::kBlockScale) {
    // The spec's rule: blocks of the full sizes, then divided among ranks.
    const int64_t bn = detail::block_n_of(*this, p);
    rows = {ceil_div(before, bn) / tp, ceil_div(output_sizes_[size_t(i)], bn) / tp};
  }
  detail::load_rows(*this, p, loaded, rows.offset, rows.size, parallel_.tp_rank * rows.size, shard);
}

// ---- QKVParallelLinear ----

QKVParallelLinear::QKVParallelLinear(std::string prefix, int64_t hidden_size, int64_t head_size,
                                     int64_t total_num_heads, std::optional<int64_t> total_num_kv_heads,
                                     const LinearOptions& options)
    : ColumnParallelLinear(
          prefix, hidden_size,
          qkv_layout(prefix, head_size, total_num_heads, total_num_kv_heads, options.parallel.tp_size).output_size,
          options,
          qkv_layout(prefix, head_size, total_num_heads, total_num_kv_heads, options.parallel.tp_size).partition_sizes),
      head_size_(head_size),
      total_num_heads_(total_num_heads),
      total_num_kv_heads_(total_num_kv_heads.value_or(total_num_heads)) {
  const QkvLayout l = qkv_layout(this->prefix(), head_size, total_num_heads, total_num_kv_heads, parallel_.tp_size);
  num_heads_ = l.num_heads;
  num_kv_heads_ = l.num_kv_heads;
  num_kv_head_replicas_ = l.num_kv_head_replicas;
}

void QKVParallelLinear::load_weight(std::string_view name, const Tensor& loaded, const std::optional<ShardId>& shard) {
  Parameter& p = parameter(name);
  if (p.kind == ParameterKind::kPlain) return detail::assert_and_load(*this, p, loaded, shard);
  static const char* const kIds[] = {"q", "k", "v"};
  const int64_t block_n = p.kind == ParameterKind::kBlockScale ? detail::block_n_of(*this, p) : 1;
  if (!shard) {
    // Stored fused on disk (Phi-3's qkv_proj): as MergedColumnParallelLinear, split by the head
    // counts of the whole model.
    if (p.kind == ParameterKind::kPerTensorScale) return detail::load_scale_into_slot(*this, p, loaded, 0, shard);
    const Rows full[] = {{0, total_num_heads_ * head_size_},
                         {total_num_heads_ * head_size_, total_num_kv_heads_ * head_size_},
                         {(total_num_heads_ + total_num_kv_heads_) * head_size_, total_num_kv_heads_ * head_size_}};
    for (int s = 0; s < 3; ++s) {
      const Rows rows = in_blocks(full[s], block_n);
      load_weight(name, detail::narrow_loaded(*this, p, loaded, 0, rows.offset, rows.size, shard),
                  ShardId{std::string(kIds[s])});
    }
    p.loaded_shards.insert(shard_id_string(shard));
    return;
  }
  const std::string* id = std::get_if<std::string>(&*shard);
  int s = 0;
  while (s < 3 && (id == nullptr || *id != kIds[s])) ++s;
  FP8KIT_CHECK_ARG(s < 3, "{}: Shard id for QKVParallelLinear should be 'q', 'k', or 'v', got shard id {}.",
                   detail::load_site(*this, p, std::nullopt), shard_id_string(shard));
  if (p.kind == ParameterKind::kPerTensorScale) return detail::load_scale_into_slot(*this, p, loaded, s, shard);
  const Rows local[] = {{0, num_heads_ * head_size_},
                        {num_heads_ * head_size_, num_kv_heads_ * head_size_},
                        {(num_heads_ + num_kv_heads_) * head_size_, num_kv_heads_ * head_size_}};
  const Rows rows = in_blocks(local[s], block_n);
  // Ranks that share a replicated kv head read the same checkpoint rows.
  const int64_t shard_rank = s == 0 ? parallel_.tp_rank : parallel_.tp_rank / num_kv_head_replicas_;
  detail::load_rows(*this, p, loaded, rows.offset, rows.size, shard_rank * rows.size, shard);
}

}  // namespace fp8kit
