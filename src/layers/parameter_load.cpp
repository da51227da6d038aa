// Checked, converting copies of checkpoint tensors into parameters (parameter_load.h).
#include "layers/parameter_load.h"

#include <cstring>

#include "core/check.h"
#include "fp8kit/fp8.h"
#include "fp8kit/half.h"

namespace fp8kit::detail {
namespace {

bool is_float_target(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF64; }

bool is_convertible_source(DType d) {
  return is_float_target(d) || d == DType::kE4M3FN || d == DType::kE4M3FNUZ || d == DType::kE5M2;
}

// Element i of a contiguous CPU buffer of `dtype` as double. Read through memcpy: a mapped
// checkpoint may hold data misaligned for its dtype.
double read_value(const uint8_t* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, base + 4 * i, 4);
      return v;
    }
    case DType::kF64: {
      double v;
      std::memcpy(&v, base + 8 * i, 8);
      return v;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, base + 2 * i, 2);
      return dtype == DType::kF16 ? f16_to_float(Float16{b}) : bf16_to_float(BFloat16{b});
    }
    case DType::kE4M3FN: return e4m3fn_bits_to_float(base[i]);
    case DType::kE4M3FNUZ: return e4m3fnuz_bits_to_float(base[i]);
    case DType::kE5M2: return e5m2_bits_to_float(base[i]);
    default: return 0.0;
  }
}

void write_value(uint8_t* base, DType dtype, int64_t i, double v) {
  switch (dtype) {
    case DType::kF32: {
      const float f = float(v);
      std::memcpy(base + 4 * i, &f, 4);
      return;
    }
    case DType::kF64: std::memcpy(base + 8 * i, &v, 8); return;
    case DType::kF16: {
      const uint16_t b = float_to_f16(float(v)).bits;
      std::memcpy(base + 2 * i, &b, 2);
      return;
    }
    case DType::kBF16: {
      const uint16_t b = float_to_bf16(float(v)).bits;
      std::memcpy(base + 2 * i, &b, 2);
      return;
    }
    default: return;
  }
}

}  // namespace

std::string load_site(const Layer& layer, const Parameter& p, const std::optional<ShardId>& shard) {
  std::string site = layer.prefix().empty() ? p.name : layer.prefix() + "." + p.name;
  if (shard) site += " (shard " + shard_id_string(shard) + ")";
  return site;
}

Tensor cast_for_load(const Tensor& src, DType dtype, const std::string& site) {
  if (src.dtype() == dtype) return src;
  FP8KIT_CHECK_ARG(is_float_target(dtype) && is_convertible_source(src.dtype()),
                   "{}: cannot load a checkpoint tensor of dtype {} into a parameter of dtype {}", site, dtype_name(src.dtype()),
                   dtype_name(dtype));
  const Tensor in = src.to(Device::cpu()).contiguous();
  Tensor out = Tensor::empty(src.shape(), dtype);
  const auto* s = static_cast<const uint8_t*>(in.data_ptr());
  auto* d = static_cast<uint8_t*>(out.data_ptr());
  for (int64_t i = 0; i < in.numel(); ++i) write_value(d, dtype, i, read_value(s, src.dtype(), i));
  return out;
}

void load_into(const Layer& layer, Parameter& p, const Tensor& dst, const Tensor& src,
               const std::optional<ShardId>& shard) {
  const std::string site = load_site(layer, p, shard);
  FP8KIT_CHECK_ARG(src.defined(), "{}: the checkpoint tensor is undefined", site);
  FP8KIT_CHECK_ARG(dst.shape() == src.shape(), "{}: expected a checkpoint tensor of shape {}, got {}", site,
                   shape_to_string(dst.shape()), shape_to_string(src.shape()));
  Tensor target = dst;
  target.copy_(cast_for_load(src, dst.dtype(), site));
  p.loaded_shards.insert(shard_id_string(shard));
}

void assert_and_load(const Layer& layer, Parameter& p, const Tensor& src, const std::optional<ShardId>& shard) {
  FP8KIT_CHECK_ARG(src.defined(), "{}: the checkpoint tensor is undefined", load_site(layer, p, shard));
  if (p.data.shape() != src.shape() && p.data.numel() == 1 && src.numel() == 1) {
    return load_into(layer, p, p.data, src.contiguous().view(p.data.shape()), shard);
  }
  load_into(layer, p, p.data, src, shard);
}

Tensor narrow_loaded(const Layer& layer, const Parameter& p, const Tensor& loaded, int64_t dim, int64_t start,
                     int64_t length, const std::optional<ShardId>& shard) {
  const std::string site = load_site(layer, p, shard);
  FP8KIT_CHECK_ARG(loaded.defined(), "{}: the checkpoint tensor is undefined", site);
  FP8KIT_CHECK_ARG(dim < loaded.dim() && start >= 0 && start + length <= loaded.size(dim),
                   "{}: the checkpoint tensor of shape {} has no entries [{}, {}) along dimension {}", site,
                   shape_to_string(loaded.shape()), start, start + length, dim);
  return loaded.narrow(dim, start, length);
}

Tensor scalar_as_1d(const Tensor& loaded) {
  if (!loaded.defined() || loaded.dim() != 0) return loaded;
  return loaded.contiguous().view({1});
}

}  // namespace fp8kit::detail
