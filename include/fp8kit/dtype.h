// Element types of fp8kit tensors, with their sizes and their names in fp8kit, torch and the
// safetensors format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fp8kit/fp8.h"

namespace fp8kit {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kE4M3FN,
  kE4M3FNUZ,
  kE5M2,
  kE5M2FNUZ,
  kUE8M0,
  kI8,
  kU8,
  kI16,
  kU16,
  kI32,
  kU32,
  kI64,
  kU64,
  kF64,
  kBool,
};

size_t dtype_size(DType dtype);
// "f32", "bf16", "e4m3fn", ...
const char* dtype_name(DType dtype);
// The safetensors header string: "F32", "BF16", "F8_E4M3", ...
const char* dtype_safetensors_name(DType dtype);
// Parses a safetensors dtype string; nullopt for strings fp8kit does not know (F4, F6_*, C64...).
std::optional<DType> dtype_from_safetensors_name(std::string_view name);
// Parses an fp8kit dtype name ("bf16"); nullopt when unknown.
std::optional<DType> dtype_from_name(std::string_view name);

bool is_floating(DType dtype);  // f16, bf16, f32, f64 (not the 8-bit formats)
bool is_fp8(DType dtype);       // e4m3fn, e4m3fnuz, e5m2, e5m2fnuz

// DTypeOf<T>::value maps a C++ storage type to its DType.
template <typename T>
struct DTypeOf;
#define FP8KIT_DTYPE_OF(T, D)                      \
  template <>                                      \
  struct DTypeOf<T> {                              \
    static constexpr DType value = DType::D;       \
  }
FP8KIT_DTYPE_OF(float, kF32);
FP8KIT_DTYPE_OF(Float16, kF16);
FP8KIT_DTYPE_OF(BFloat16, kBF16);
FP8KIT_DTYPE_OF(Float8E4M3FN, kE4M3FN);
FP8KIT_DTYPE_OF(Float8E4M3FNUZ, kE4M3FNUZ);
FP8KIT_DTYPE_OF(Float8E5M2, kE5M2);
FP8KIT_DTYPE_OF(Float8E5M2FNUZ, kE5M2FNUZ);
FP8KIT_DTYPE_OF(Float8UE8M0, kUE8M0);
FP8KIT_DTYPE_OF(int8_t, kI8);
FP8KIT_DTYPE_OF(uint8_t, kU8);
FP8KIT_DTYPE_OF(int16_t, kI16);
FP8KIT_DTYPE_OF(uint16_t, kU16);
FP8KIT_DTYPE_OF(int32_t, kI32);
FP8KIT_DTYPE_OF(uint32_t, kU32);
FP8KIT_DTYPE_OF(int64_t, kI64);
FP8KIT_DTYPE_OF(uint64_t, kU64);
FP8KIT_DTYPE_OF(double, kF64);
FP8KIT_DTYPE_OF(bool, kBool);
#undef FP8KIT_DTYPE_OF

}  // namespace fp8kit
