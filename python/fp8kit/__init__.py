"""fp8kit: vLLM's FP8 quantization ops, GEMMs, fused MoE and KV-cache kernels, checkpoint tools and
the model runner, from C++ (CPU reference and NVIDIA GPUs), on numpy, torch and cupy arrays, zero copy.

    import numpy as np, fp8kit
    x = np.random.randn(4, 256).astype(np.float32)
    q, scale = fp8kit.scaled_fp8_quant(x)            # e4m3fn (ml_dtypes) and a f32 scale
    y = fp8kit.scaled_mm(q, q.T, scale, scale, np.float32)
    report = fp8kit.quantize("Qwen3-0.6B", "Qwen3-0.6B-FP8")
    model = fp8kit.Model.load("Qwen3-0.6B-FP8")
    print(model.generate("The capital of France is", max_tokens=8, temperature=0).text)

Ops: fp8kit.ops (also here); checkpoint tools: fp8kit.checkpoint (also here); the model runner
(Model.load, generate, logits, eval): fp8kit.model (also here).
"""

from . import _fp8kit
from .checkpoint import dequantize, inspect, quantize
from .model import Generation, Model, eval
from .ops import (cutlass_scaled_mm, fused_add_rms_norm, fused_experts, fused_topk, gelu_and_mul,
                  moe_align_block_size, moe_sum, per_token_group_quant_fp8, reshape_and_cache_flash,
                  rms_norm, scaled_fp8_quant, scaled_mm, silu_and_mul, w8a8_block_fp8_matmul)

__version__ = _fp8kit.__version__
Tensor = _fp8kit.Tensor
cuda_built = _fp8kit.cuda_built
cuda_device_count = _fp8kit.cuda_device_count

__all__ = [
    "__version__", "Tensor", "cuda_built", "cuda_device_count", "quantize", "dequantize", "inspect",
    "Model", "Generation", "eval",
    "scaled_fp8_quant", "per_token_group_quant_fp8", "scaled_mm", "cutlass_scaled_mm",
    "w8a8_block_fp8_matmul", "fused_experts", "fused_topk", "moe_align_block_size", "silu_and_mul",
    "gelu_and_mul", "moe_sum", "reshape_and_cache_flash", "rms_norm", "fused_add_rms_norm",
]
