# The KV-cache store and the norms from Python: fp8kit.reshape_and_cache_flash (auto and FP8
# caches, NHD and the HND layout as a strided view, skipped slots), rms_norm and
# fused_add_rms_norm, in place on numpy arrays, bit for bit against the C++ library.
import ml_dtypes
import numpy as np
import pytest

import fp8kit
from binding_util import same_bits

BF16 = ml_dtypes.bfloat16


def step(rng, tokens=5, heads=2, dim=16):
    key = rng.standard_normal((tokens, heads, dim)).astype(BF16)
    value = rng.standard_normal((tokens, heads, dim)).astype(BF16)
    slots = np.array([3, 0, -1, 9, 14][:tokens], np.int64)
    return key, value, slots


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8", "fp8_e5m2"])
def test_reshape_and_cache_flash(oracle, kv_cache_dtype):
    rng = np.random.default_rng(1)
    key, value, slots = step(rng)
    cache_dtype = BF16 if kv_cache_dtype == "auto" else np.uint8
    key_cache, value_cache = np.zeros((4, 4, 2, 16), cache_dtype), np.zeros((4, 4, 2, 16), cache_dtype)
    k_scale, v_scale = np.array([0.5], np.float32), np.array([0.25], np.float32)
    fp8kit.reshape_and_cache_flash(key, value, key_cache, value_cache, slots, kv_cache_dtype, k_scale, v_scale)
    ref = oracle("reshape_and_cache_flash", {"key": key, "value": value, "key_cache": np.zeros_like(key_cache),
                                             "value_cache": np.zeros_like(value_cache), "slot_mapping": slots,
                                             "k_scale": k_scale, "v_scale": v_scale}, kv_cache_dtype=kv_cache_dtype)
    assert same_bits(key_cache, ref["key_cache"]) and same_bits(value_cache, ref["value_cache"])
    assert np.any(key_cache.view(np.uint8) != 0)


def test_reshape_and_cache_flash_hnd_layout_is_a_strided_view():
    rng = np.random.default_rng(2)
    key, value, slots = step(rng)
    nhd_k, nhd_v = np.zeros((4, 4, 2, 16), BF16), np.zeros((4, 4, 2, 16), BF16)
    fp8kit.reshape_and_cache_flash(key, value, nhd_k, nhd_v, slots, "auto", None, None)
    hnd_k, hnd_v = np.zeros((4, 2, 4, 16), BF16), np.zeros((4, 2, 4, 16), BF16)  # [blocks, heads, block_size, D]
    fp8kit.reshape_and_cache_flash(key, value, hnd_k.transpose(0, 2, 1, 3), hnd_v.transpose(0, 2, 1, 3), slots,
                                   "auto", None, None)
    assert same_bits(hnd_k.transpose(0, 2, 1, 3), nhd_k) and same_bits(hnd_v.transpose(0, 2, 1, 3), nhd_v)


def test_kv_cache_errors():
    rng = np.random.default_rng(3)
    key, value, slots = step(rng)
    cache = np.zeros((4, 4, 2, 16), BF16)
    with pytest.raises(ValueError, match="Unsupported data type of kv cache: fp4"):
        fp8kit.reshape_and_cache_flash(key, value, cache, cache.copy(), slots, "fp4", None, None)
    with pytest.raises(ValueError, match="`key_cache`"):
        ro = cache.copy()
        ro.flags.writeable = False
        fp8kit.reshape_and_cache_flash(key, value, ro, cache, slots, "auto", None, None)


def test_rms_norms(oracle):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 64)).astype(BF16)
    weight = rng.standard_normal(64).astype(BF16)
    out = np.zeros_like(x)
    fp8kit.rms_norm(out, x, weight, 1e-6)
    assert same_bits(out, oracle("rms_norm", {"x": x, "weight": weight}, eps=1e-6)["y"])
    residual = rng.standard_normal((3, 64)).astype(BF16)
    xi, ri = x.copy(), residual.copy()
    fp8kit.fused_add_rms_norm(xi, ri, weight, 1e-5)
    ref = oracle("fused_add_rms_norm", {"x": x, "residual": residual, "weight": weight}, eps=1e-5)
    assert same_bits(xi, ref["x"]) and same_bits(ri, ref["residual"])
