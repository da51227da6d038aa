// The device form of the e4m3 encoder (quant_encode.h, quantize_fp8x4: hardware cvt on sm_89+)
// against the host's integer form, through static scaled_fp8_quant with scale 1 (x * 1 is x):
// every f32 whose low 8 mantissa bits are 0x00, 0x01 or 0xff (every rounding boundary of every
// binade, just above it and just below it, NaN payloads, subnormals), and every f16 and bf16.
#include "fp8kit/ops/quant.h"
#include "gpu_test_util.h"

namespace fp8kit {
namespace {

using namespace gpu_test;

void check_static_scale_one(const Tensor& x, const std::string& detail) {
  for (DType out : {DType::kE4M3FN, DType::kE4M3FNUZ}) {
    ops::ScaledFp8QuantOptions o;
    o.out_dtype = out;
    o.scale = Tensor::scalar_f32(1.0f);
    const ops::QuantResult want = ops::scaled_fp8_quant(ctx_of(x), x, o);
    o.scale = o.scale.to(Device::cuda(0));
    o.output = poisoned(x.shape(), out, Device::cuda(0), kPoisonCodes);
    const ops::QuantResult got = ops::scaled_fp8_quant(ctx_of(x.to(Device::cuda(0))), x.to(Device::cuda(0)), o);
    expect_same_tensor({"quantize_fp8x4 (static, scale 1)", x.shape(), x.dtype(), out, 0, detail}, "codes", got.q,
                       want.q);
  }
}

TEST(QuantEncodeCuda, EveryRoundingBoundaryOfEveryBinade) {
  for (uint32_t low : {0x00u, 0x01u, 0xffu}) {
    Tensor x = Tensor::empty({1 << 16, 1 << 8}, DType::kF32);
    uint32_t* bits = static_cast<uint32_t*>(x.data_ptr());
    for (uint32_t high = 0; high < (1u << 24); ++high) bits[high] = (high << 8) | low;
    check_static_scale_one(x, "low mantissa bits " + std::to_string(low));
  }
}

TEST(QuantEncodeCuda, EveryHalfAndBFloat16) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    Tensor x = Tensor::empty({256, 256}, dtype);
    uint16_t* bits = static_cast<uint16_t*>(x.data_ptr());
    for (uint32_t i = 0; i < 0x10000; ++i) bits[i] = uint16_t(i);
    check_static_scale_one(x, "every value");
  }
}

}  // namespace
}  // namespace fp8kit
