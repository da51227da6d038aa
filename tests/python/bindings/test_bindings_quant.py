# The quantization ops from Python: fp8kit.scaled_fp8_quant and per_token_group_quant_fp8 on numpy
# inputs, bit for bit against the C++ library (the oracle tool) and against numpy float32 /
# ml_dtypes arithmetic (SEMANTICS.md 1.6), in every mode and layout the C++ op has.
import ml_dtypes
import numpy as np
import pytest

import fp8kit
from binding_util import same_bits

E4M3 = ml_dtypes.float8_e4m3fn


def inputs(rng, m, k, dtype=np.float32):
    x = rng.standard_normal((m, k)).astype(np.float32)
    x.flat[::13] *= np.float32(30.0)
    return x.astype(dtype)


def cvt(v, fp8_max=448.0, dtype=E4M3):
    return np.clip(v, -np.float32(fp8_max), np.float32(fp8_max)).astype(np.float32).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_dynamic_per_tensor_matches_numpy_and_library(oracle, dtype):
    x = inputs(np.random.default_rng(1), 7, 300, dtype)
    q, scale = fp8kit.scaled_fp8_quant(x)
    assert q.dtype == E4M3 and q.shape == (7, 300) and scale.dtype == np.float32 and scale.shape == (1,)
    xf = x.astype(np.float32)
    s = np.float32(np.abs(xf).max()) / np.float32(448.0)
    assert scale[0] == s
    assert same_bits(q, cvt(xf * (np.float32(1.0) / s)))
    ref = oracle("scaled_fp8_quant", {"x": x})
    assert same_bits(q, ref["q"]) and same_bits(scale, ref["scale"])


def test_dynamic_per_token_with_upper_bound_and_padding(oracle):
    x = inputs(np.random.default_rng(2), 5, 129)
    ub = np.array([20.0], np.float32)
    q, scale = fp8kit.scaled_fp8_quant(x, num_token_padding=8, scale_ub=ub, use_per_token_if_dynamic=True)
    assert q.shape == (8, 129) and scale.shape == (8, 1)
    t = np.minimum(np.abs(x).max(axis=1), np.float32(20.0))
    s = np.maximum(t / np.float32(448.0), np.float32(1.0) / np.float32(448.0 * 512.0)).astype(np.float32)
    assert same_bits(scale[:5, 0], s)
    assert same_bits(q[:5], cvt(x / s[:, None]))
    ref = oracle("scaled_fp8_quant", {"x": x, "scale_ub": ub}, per_token=True, padding=8)
    assert same_bits(q, ref["q"]) and same_bits(scale, ref["scale"])


def test_static_scale_e4m3fnuz_and_output_argument(oracle):
    x = inputs(np.random.default_rng(3), 4, 64)
    scale = np.array([0.05], np.float32)
    q, s = fp8kit.scaled_fp8_quant(x, scale, dtype=ml_dtypes.float8_e4m3fnuz)
    assert q.dtype == ml_dtypes.float8_e4m3fnuz and s[0] == np.float32(0.05)
    assert same_bits(q, cvt(x * (np.float32(1.0) / np.float32(0.05)), 224.0, ml_dtypes.float8_e4m3fnuz))
    ref = oracle("scaled_fp8_quant", {"x": x, "scale": scale}, dtype="e4m3fnuz")
    assert same_bits(q, ref["q"])
    # A preallocated output (uint8 holding e4m3fn codes: written in place, returned as given).
    out = np.zeros((4, 64), np.uint8)
    q2, _ = fp8kit.scaled_fp8_quant(x, scale, output=out)
    assert q2 is out
    assert same_bits(out, oracle("scaled_fp8_quant", {"x": x, "scale": scale})["q"].view(np.uint8))


def test_strided_rows_are_read_in_place():
    x = inputs(np.random.default_rng(4), 6, 96)
    wide = np.zeros((6, 200), np.float32)
    wide[:, :96] = x
    q1, s1 = fp8kit.scaled_fp8_quant(wide[:, :96], use_per_token_if_dynamic=True)
    q2, s2 = fp8kit.scaled_fp8_quant(x, use_per_token_if_dynamic=True)
    assert same_bits(q1, q2) and same_bits(s1, s2)


@pytest.mark.parametrize("layout", ["row", "column", "tma"])
def test_per_token_group_quant_layouts(oracle, layout):
    x = inputs(np.random.default_rng(5), 6, 256, ml_dtypes.bfloat16)
    q, s = fp8kit.per_token_group_quant_fp8(x, 128, column_major_scales=layout != "row",
                                            tma_aligned_scales=layout == "tma")
    assert q.dtype == E4M3 and s.shape == (6, 2) and s.dtype == np.float32
    if layout != "row":
        assert s.strides[0] == 4  # column-major: one column of M (padded to 8 with tma) floats
        assert s.strides[1] == 4 * (8 if layout == "tma" else 6)
    xf = x.astype(np.float32).reshape(6, 2, 128)
    ref_s = (np.maximum(np.abs(xf).max(axis=2), np.float32(1e-10)) / np.float32(448.0)).astype(np.float32)
    assert same_bits(np.ascontiguousarray(s), ref_s)
    assert same_bits(q, cvt(xf / ref_s[:, :, None]).reshape(6, 256))
    ref = oracle("per_token_group_quant", {"x": x}, group_size=128, column_major=layout != "row",
                 tma_aligned=layout == "tma")
    assert same_bits(q, ref["q"]) and same_bits(np.ascontiguousarray(s), ref["scale"])


def test_per_token_group_quant_ue8m0_three_dims(oracle):
    x = inputs(np.random.default_rng(6), 6, 64).reshape(2, 3, 64)
    q, s = fp8kit.per_token_group_quant_fp8(x, 32, eps=1e-6, use_ue8m0=True)
    assert q.shape == (2, 3, 64) and s.shape == (2, 3, 2)
    assert np.all(np.log2(s) == np.round(np.log2(s)))  # powers of two
    ref = oracle("per_token_group_quant", {"x": x}, group_size=32, eps=1e-6, ue8m0=True)
    assert same_bits(q, ref["q"]) and same_bits(s, ref["scale"])


def test_quant_errors_are_value_errors_with_the_spec_text():
    with pytest.raises(ValueError, match=r"the last dimension of `x` 100 must be divisible by `group_size` 128"):
        fp8kit.per_token_group_quant_fp8(np.zeros((2, 100), np.float32), 128)
    with pytest.raises(ValueError, match="unknown dtype"):
        fp8kit.scaled_fp8_quant(np.zeros((2, 4), np.float32), dtype="float7")
    with pytest.raises(ValueError, match="`output`"):  # a read-only output
        out = np.zeros((2, 4), np.uint8)
        out.flags.writeable = False
        fp8kit.scaled_fp8_quant(np.zeros((2, 4), np.float32), np.ones(1, np.float32), output=out)
