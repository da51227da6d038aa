# The FP8 GEMMs from Python: fp8kit.scaled_mm (vLLM's cutlass_scaled_mm: b as the [K, N]
# column-major view, block scale_b as Bs.T) and w8a8_block_fp8_matmul, bit for bit against the C++
# library, and exact on integer grids against numpy.
import ml_dtypes
import numpy as np
import pytest

import fp8kit
from binding_util import same_bits

E4M3 = ml_dtypes.float8_e4m3fn


def grid(rng, shape):
    """Small integers: exact in e4m3fn, and their dot products exact in f32."""
    return rng.integers(-8, 9, size=shape).astype(np.float32).astype(E4M3)


def test_per_tensor_exact_on_an_integer_grid():
    rng = np.random.default_rng(1)
    a, w = grid(rng, (5, 64)), grid(rng, (24, 64))
    sa, sb = np.array([0.5], np.float32), np.array([2.0], np.float32)
    y = fp8kit.scaled_mm(a, w.T, sa, sb, np.float32)
    assert y.dtype == np.float32 and y.shape == (5, 24)
    assert same_bits(y, a.astype(np.float32) @ w.astype(np.float32).T)


@pytest.mark.parametrize("out_dtype", ["bf16", np.float16])
def test_per_token_per_channel_with_bias(oracle, out_dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((7, 96)).astype(np.float32).astype(E4M3)
    w = rng.standard_normal((40, 96)).astype(np.float32).astype(E4M3)
    sa = rng.uniform(0.01, 0.1, (7, 1)).astype(np.float32)
    sb = rng.uniform(0.01, 0.1, (1, 40)).astype(np.float32)
    out_np = ml_dtypes.bfloat16 if out_dtype == "bf16" else np.float16
    bias = rng.standard_normal(40).astype(np.float32).astype(out_np)
    y = fp8kit.cutlass_scaled_mm(a, w.T, sa, sb, out_dtype, bias)
    assert y.dtype == out_np
    ref = oracle("scaled_mm", {"a": a, "b": w, "scale_a": sa, "scale_b": sb, "bias": bias},
                 out_dtype=fp8kit.ops.dtype_name(out_dtype))
    assert same_bits(y, ref["y"])


def test_block_scales_as_vllm_passes_them(oracle):
    rng = np.random.default_rng(3)
    m, n, k = 6, 200, 256  # N ragged against the 128-row blocks
    a = rng.standard_normal((m, k)).astype(np.float32).astype(E4M3)
    w = rng.standard_normal((n, k)).astype(np.float32).astype(E4M3)
    a_s = rng.uniform(0.01, 0.1, (m, 2)).astype(np.float32)
    w_s = rng.uniform(0.01, 0.1, (2, 2)).astype(np.float32)  # [ceil(N/128), K/128]
    ref = oracle("scaled_mm", {"a": a, "b": w, "scale_a": a_s, "scale_b": w_s}, out_dtype="f32", block="128,128")
    # cutlass_scaled_mm(A, B.T, scale_a=As, scale_b=Bs.T), the block inferred from the shapes...
    y = fp8kit.scaled_mm(a, w.T, a_s, w_s.T, np.float32)
    assert same_bits(y, ref["y"])
    # ... or named; and w8a8_block_fp8_matmul with the [N, K] weight and [N/bn, K/bk] scales.
    assert same_bits(fp8kit.scaled_mm(a, w.T, a_s, w_s.T, np.float32, block_size=[128, 128]), ref["y"])
    y3 = fp8kit.w8a8_block_fp8_matmul(a.reshape(2, 3, k), w, a_s.reshape(2, 3, 2), w_s, [128, 128], np.float32)
    assert y3.shape == (2, 3, n) and same_bits(y3.reshape(m, n), ref["y"])


def test_uint8_operands_and_out_argument():
    rng = np.random.default_rng(4)
    a, w = grid(rng, (3, 32)), grid(rng, (8, 32))
    one = np.ones(1, np.float32)
    out = np.zeros((3, 8), np.float32)
    y = fp8kit.scaled_mm(a.view(np.uint8), w.view(np.uint8).T, one, one, "f32", out=out)
    assert y is out
    assert same_bits(out, a.astype(np.float32) @ w.astype(np.float32).T)


def test_gemm_errors_name_the_argument():
    a = np.zeros((2, 32), E4M3)
    one = np.ones(1, np.float32)
    with pytest.raises(ValueError, match="`a` and `b` must be e4m3fn"):
        fp8kit.scaled_mm(a, np.zeros((32, 4), np.float32), one, one, "f32")
    with pytest.raises(ValueError, match="`b` must be"):
        fp8kit.scaled_mm(a, np.zeros((4, 16), E4M3), one, one, "f32")
    with pytest.raises(ValueError, match="out_dtype"):
        fp8kit.scaled_mm(a, np.zeros((4, 32), E4M3).T, one, one, np.int32)
    with pytest.raises(ValueError, match="pass block_size"):
        fp8kit.scaled_mm(a, np.zeros((4, 32), E4M3).T, np.ones((2, 3), np.float32), np.ones((5, 7), np.float32), "f32")
