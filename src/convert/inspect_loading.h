// inspect --loading: how fp8kit's model loader would place every checkpoint tensor (layer,
// parameter, shard) and which quantization method each layer would get, without loading.
#pragma once

#include "fp8kit/checkpoint.h"
#include "fp8kit/convert.h"

namespace fp8kit::convert {

void describe_loading(const Checkpoint& checkpoint, InspectReport& report);

}  // namespace fp8kit::convert
