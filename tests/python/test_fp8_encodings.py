# fp8kit's FP8 encoders and decoders against ml_dtypes, an independent implementation of the same
# formats: every bf16 and f16 value, random and boundary float32 values, all four formats, with
# and without saturation (saturation = clip to +-max before ml_dtypes' non-saturating cast).
import ml_dtypes
import numpy as np
import pytest

FORMATS = {
    "e4m3fn": ml_dtypes.float8_e4m3fn,
    "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "e5m2": ml_dtypes.float8_e5m2,
    "e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}


def probe_values():
    every16 = np.arange(1 << 16, dtype=np.uint32)
    from_bf16 = (every16 << 16).view(np.float32)
    from_f16 = every16.astype(np.uint16).view(np.float16).astype(np.float32)
    rng = np.random.default_rng(7)
    random_bits = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    in_range = rng.uniform(-70000, 70000, size=1 << 20).astype(np.float32)
    small = rng.uniform(-1, 1, size=1 << 20).astype(np.float32) * np.float32(1e-2)
    return np.concatenate([from_bf16, from_f16, random_bits, in_range, small])


def boundary_values(dtype):
    codes = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    finite = np.unique(codes[np.isfinite(codes)])
    mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2
    mids = mids.astype(np.float32)
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))])
    top = np.float32(ml_dtypes.finfo(dtype).max)
    return np.concatenate([finite, mids, near, [top * 1.03, top * 1.07, -top * 1.07]]).astype(np.float32)


def run_encode(testtool, tmp_path, name, sat, x):
    src, dst = tmp_path / "in.f32", tmp_path / "out.u8"
    x.astype("<f4").tofile(src)
    testtool("encode", name, sat, src, dst)
    return np.fromfile(dst, dtype=np.uint8)


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("sat", ["nosat", "sat"])
def test_encode_matches_ml_dtypes(testtool, tmp_path, name, sat):
    dtype = FORMATS[name]
    x = np.concatenate([probe_values(), boundary_values(dtype)])
    got = run_encode(testtool, tmp_path, name, sat, x)
    ref_input = x
    if sat == "sat":
        top = np.float32(ml_dtypes.finfo(dtype).max)
        ref_input = np.where(np.isnan(x), x, np.clip(x, -top, top)).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        want = ref_input.astype(dtype)
    want_nan = np.isnan(want.astype(np.float32))
    got_values = got.view(dtype).astype(np.float32)
    # NaN codes: both sides must give a NaN (ml_dtypes keeps the sign of a NaN, cuda_fp8.h does not).
    assert np.array_equal(np.isnan(got_values), want_nan), "NaN placement differs"
    same = got[~want_nan] == want.view(np.uint8)[~want_nan]
    assert same.all(), f"{(~same).sum()} codes differ, first input {x[~want_nan][~same][0]!r}"


@pytest.mark.parametrize("name", FORMATS)
def test_decode_matches_ml_dtypes(testtool, tmp_path, name):
    dtype = FORMATS[name]
    codes = np.arange(256, dtype=np.uint8)
    src, dst = tmp_path / "in.u8", tmp_path / "out.f32"
    codes.tofile(src)
    testtool("decode", name, src, dst)
    got = np.fromfile(dst, dtype="<f4")
    want = codes.view(dtype).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
