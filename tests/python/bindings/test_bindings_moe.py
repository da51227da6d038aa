# The MoE ops from Python: fp8kit.fused_experts (16-bit, FP8 per-tensor, FP8 block, weight-only,
# in place), fused_topk, moe_align_block_size, silu/gelu_and_mul and moe_sum, bit for bit against
# the C++ library on the same numpy inputs.
import ml_dtypes
import numpy as np
import pytest

import fp8kit
from binding_util import same_bits

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn


def routing(rng, m, e, topk):
    logits = rng.standard_normal((m, e)).astype(np.float32)
    w, ids = fp8kit.fused_topk(np.zeros((m, 8), BF16), logits, topk, True)
    return logits, w, ids


def test_fused_topk_and_moe_align(oracle):
    rng = np.random.default_rng(1)
    logits, w, ids = routing(rng, 9, 8, 2)
    assert w.dtype == np.float32 and ids.dtype == np.int32 and ids.shape == (9, 2)
    ref = oracle("fused_topk", {"x": np.zeros((9, 8), BF16), "gating": logits}, topk=2, renormalize=True)
    assert same_bits(w, ref["weights"]) and same_bits(ids, ref["ids"])
    _, ids64 = fp8kit.fused_topk(np.zeros((9, 8), BF16), logits, 2, False, indices_type=np.int64)
    assert ids64.dtype == np.int64
    sorted_ids, experts, padded = fp8kit.moe_align_block_size(ids, 4, 8)
    ref = oracle("moe_align_block_size", {"topk_ids": ids}, block_size=4, num_experts=8)
    assert same_bits(sorted_ids, ref["sorted"]) and same_bits(experts, ref["experts"])
    assert same_bits(padded, ref["padded"])


def experts(rng, e, h, i, dtype=BF16):
    w1 = (rng.standard_normal((e, 2 * i, h)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((e, h, i)) * 0.1).astype(np.float32)
    return w1.astype(dtype), w2.astype(dtype)


def test_fused_experts_16bit_and_in_place(oracle):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 64)).astype(BF16)
    w1, w2 = experts(rng, 4, 64, 32)
    _, w, ids = routing(rng, 5, 4, 2)
    y = fp8kit.fused_experts(x, w1, w2, w, ids)
    ref = oracle("fused_experts", {"x": x, "w1": w1, "w2": w2, "topk_weights": w, "topk_ids": ids})
    assert y.dtype == BF16 and same_bits(y, ref["y"])
    xi = x.copy()
    assert fp8kit.fused_experts(xi, w1, w2, w, ids, inplace=True) is xi
    assert same_bits(xi, ref["y"])
    g = fp8kit.fused_experts(x, w1, w2, w, ids, activation="gelu", apply_router_weight_on_input=False)
    assert same_bits(g, oracle("fused_experts", {"x": x, "w1": w1, "w2": w2, "topk_weights": w, "topk_ids": ids},
                               activation="gelu")["y"])


def test_fused_experts_fp8_per_tensor_and_block(oracle):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 128)).astype(BF16)
    w1f, w2f = experts(rng, 3, 128, 128, np.float32)
    _, w, ids = routing(rng, 6, 3, 2)
    # Per tensor: one scale an expert, dynamic activation scales.
    w1, w2 = (w1f * 4).astype(E4M3), (w2f * 4).astype(E4M3)
    s1, s2 = np.full(3, 0.25, np.float32), np.full(3, 0.25, np.float32)
    y = fp8kit.fused_experts(x, w1, w2, w, ids, use_fp8_w8a8=True, w1_scale=s1, w2_scale=s2)
    ref = oracle("fused_experts", {"x": x, "w1": w1, "w2": w2, "topk_weights": w, "topk_ids": ids,
                                   "w1_scale": s1, "w2_scale": s2}, fp8=True)
    assert same_bits(y, ref["y"])
    # Block 128 x 128 scales [E, 2I/128, H/128] and [E, H/128, I/128], weights as uint8 codes.
    b1, b2 = np.full((3, 2, 1), 0.25, np.float32), np.full((3, 1, 1), 0.25, np.float32)
    yb = fp8kit.fused_experts(x, w1.view(np.uint8), w2.view(np.uint8), w, ids, use_fp8_w8a8=True, w1_scale=b1,
                              w2_scale=b2, block_shape=[128, 128])
    ref = oracle("fused_experts", {"x": x, "w1": w1, "w2": w2, "topk_weights": w, "topk_ids": ids,
                                   "w1_scale": b1, "w2_scale": b2}, fp8=True, block="128,128")
    assert same_bits(yb, ref["y"])
    yw = fp8kit.fused_experts(x, w1, w2, w, ids, weight_only=True, w1_scale=s1, w2_scale=s2)
    ref = oracle("fused_experts", {"x": x, "w1": w1, "w2": w2, "topk_weights": w, "topk_ids": ids,
                                   "w1_scale": s1, "w2_scale": s2}, weight_only=True)
    assert same_bits(yw, ref["y"])


def test_activations_and_moe_sum(oracle):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5, 32)).astype(BF16)
    for name, op in (("silu_and_mul", fp8kit.silu_and_mul), ("gelu_and_mul", fp8kit.gelu_and_mul)):
        out = np.zeros((3, 5, 16), BF16)
        assert op(out, x) is None
        assert same_bits(out, oracle(name, {"x": x})["y"])
    inp = rng.standard_normal((4, 3, 16)).astype(np.float32)
    out = np.zeros((4, 16), np.float32)
    fp8kit.moe_sum(inp, out)
    assert same_bits(out, oracle("moe_sum", {"x": inp, "output": np.zeros((4, 16), np.float32)})["output"])


def test_fused_experts_errors_use_the_spec_text():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 64)).astype(BF16)
    w1, w2 = experts(rng, 2, 32, 16)
    w, ids = np.ones((2, 1), np.float32), np.zeros((2, 1), np.int32)
    with pytest.raises(ValueError, match="Hidden size mismatch 64 != 32"):
        fp8kit.fused_experts(x, w1, w2, w, ids)
    with pytest.raises(ValueError, match="Unsupported FusedMoe activation: relu"):
        fp8kit.fused_experts(x[:, :32].copy(), w1, w2, w, ids, activation="relu")
    with pytest.raises(ValueError, match="Hidden_states must be contiguous"):
        fp8kit.fused_experts(np.zeros((2, 64), BF16)[:, :32], w1, w2, w, ids)
