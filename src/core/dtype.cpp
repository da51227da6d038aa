#include "fp8kit/dtype.h"

#include <array>

namespace fp8kit {
namespace {

struct DTypeInfo {
  DType dtype;
  size_t size;
  const char* name;
  const char* safetensors_name;
};

constexpr std::array<DTypeInfo, 18> kDTypes = {{
    {DType::kF32, 4, "f32", "F32"},
    {DType::kF16, 2, "f16", "F16"},
    {DType::kBF16, 2, "bf16", "BF16"},
    {DType::kE4M3FN, 1, "e4m3fn", "F8_E4M3"},
    {DType::kE4M3FNUZ, 1, "e4m3fnuz", "F8_E4M3FNUZ"},
    {DType::kE5M2, 1, "e5m2", "F8_E5M2"},
    {DType::kE5M2FNUZ, 1, "e5m2fnuz", "F8_E5M2FNUZ"},
    {DType::kUE8M0, 1, "ue8m0", "F8_E8M0"},
    {DType::kI8, 1, "i8", "I8"},
    {DType::kU8, 1, "u8", "U8"},
    {DType::kI16, 2, "i16", "I16"},
    {DType::kU16, 2, "u16", "U16"},
    {DType::kI32, 4, "i32", "I32"},
    {DType::kU32, 4, "u32", "U32"},
    {DType::kI64, 8, "i64", "I64"},
    {DType::kU64, 8, "u64", "U64"},
    {DType::kF64, 8, "f64", "F64"},
    {DType::kBool, 1, "bool", "BOOL"},
}};

const DTypeInfo& info(DType dtype) { return kDTypes[static_cast<size_t>(dtype)]; }

}  // namespace

size_t dtype_size(DType dtype) { return info(dtype).size; }
const char* dtype_name(DType dtype) { return info(dtype).name; }
const char* dtype_safetensors_name(DType dtype) { return info(dtype).safetensors_name; }

std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (name == d.safetensors_name) return d.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 || dtype == DType::kF64;
}

bool is_fp8(DType dtype) {
  return dtype == DType::kE4M3FN || dtype == DType::kE4M3FNUZ || dtype == DType::kE5M2 ||
         dtype == DType::kE5M2FNUZ;
}

}  // namespace fp8kit
