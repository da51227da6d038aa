#include "convert/tensor_scan.h"

#include <algorithm>
#include <mutex>

#include "core/check.h"
#include "core/parallel.h"
#include "fp8kit/half.h"

namespace fp8kit::convert {
namespace {

// Magnitudes compare as integers once the sign bit is cleared (for non-NaN values), so the
// scan is a vectorizable max over the bit patterns plus an exponent-all-ones test.
template <typename Bits, Bits kAbsMask, Bits kExpMask>
void scan_bits(const Bits* p, int64_t n, Bits& max_abs, bool& non_finite) {
  Bits m = 0;
  Bits bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Bits a = p[i] & kAbsMask;
    m = std::max(m, a);
    bad |= ((a & kExpMask) == kExpMask) ? Bits(1) : Bits(0);
  }
  max_abs = m;
  non_finite = bad != 0;
}

template <typename Bits, Bits kAbsMask, Bits kExpMask, typename ToFloat>
ScanResult scan(const Tensor& t, ToFloat to_float) {
  const auto* p = static_cast<const Bits*>(t.data_ptr());
  const int64_t n = t.numel();
  std::mutex mutex;
  Bits max_abs = 0;
  int64_t first_bad = -1;
  parallel_for(n, 1 << 16, [&](int64_t begin, int64_t end) {
    Bits m;
    bool bad;
    scan_bits<Bits, kAbsMask, kExpMask>(p + begin, end - begin, m, bad);
    int64_t where = -1;
    if (bad) {
      for (int64_t i = begin; i < end; ++i) {
        if ((p[i] & kExpMask) == kExpMask) {
          where = i;
          break;
        }
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    max_abs = std::max(max_abs, m);
    if (where >= 0 && (first_bad < 0 || where < first_bad)) first_bad = where;
  });
  ScanResult r;
  r.first_non_finite = first_bad;
  r.absmax = first_bad >= 0 ? 0.0f : to_float(max_abs);
  return r;
}

}  // namespace

ScanResult scan_tensor(const Tensor& t) {
  FP8KIT_CHECK_ARG(t.device().is_cpu() && t.is_contiguous(), "scan_tensor: expected a contiguous CPU tensor, got {}",
                   t.description());
  switch (t.dtype()) {
    case DType::kBF16:
      return scan<uint16_t, 0x7fff, 0x7f80>(t, [](uint16_t b) { return bf16_to_float(BFloat16{b}); });
    case DType::kF16:
      return scan<uint16_t, 0x7fff, 0x7c00>(t, [](uint16_t b) { return f16_to_float(Float16{b}); });
    case DType::kF32:
      return scan<uint32_t, 0x7fffffffu, 0x7f800000u>(t, [](uint32_t b) { return bits_to_float(b); });
    default:
      fail(ErrorCode::kInvalidArgument, "scan_tensor: expected f32, f16 or bf16, got {}", t.description());
  }
}

}  // namespace fp8kit::convert
