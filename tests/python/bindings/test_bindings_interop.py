# How arrays cross into fp8kit and back: zero copy both ways (the same data pointer), lifetimes
# (an fp8kit Tensor keeps the caller's array alive; a result outlives everything it came from),
# dtypes (ml_dtypes FP8 and bf16, uint8 views with dtype=), bad dtypes / shapes / strides / devices
# with messages naming the argument, fp8kit's error codes as Python exceptions, the stream
# argument, and the GIL released while an op runs.
import ctypes
import gc
import sys
import threading
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import fp8kit
from fp8kit import _arrays, _fp8kit
from binding_util import same_bits

E4M3 = ml_dtypes.float8_e4m3fn


def test_arrays_go_in_without_a_copy():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = fp8kit.Tensor.from_array(x)
    assert t.data_ptr == x.ctypes.data and t.shape == [4, 6] and t.strides == [6, 1] and t.dtype == "f32"
    view = x[1:, ::2]  # offset and strides, still no copy
    tv = fp8kit.Tensor.from_array(view)
    assert tv.data_ptr == view.ctypes.data and tv.shape == [3, 3] and tv.strides == [6, 2]
    q = np.zeros((2, 3), E4M3)
    tq = _arrays.tensor(q, "q")
    assert tq.dtype == "e4m3fn" and tq.data_ptr == q.ctypes.data
    b = np.zeros(5, ml_dtypes.bfloat16)
    assert _arrays.tensor(b, "b").dtype == "bf16"


def test_results_come_out_without_a_copy():
    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(4, 16)
    q, s = _fp8kit.scaled_fp8_quant(_arrays.tensor(x, "x"), None, None, None, False, None, "e4m3fn", 0)
    qa, sa = _arrays.array(q, x), _arrays.array(s, x)
    assert qa.ctypes.data == q.data_ptr and sa.ctypes.data == s.data_ptr
    assert qa.dtype == E4M3 and sa.dtype == np.float32


def test_a_tensor_keeps_the_callers_array_alive():
    x = np.arange(1000, dtype=np.float32)
    base = sys.getrefcount(x)
    t = fp8kit.Tensor.from_array(x)
    assert sys.getrefcount(x) > base  # held through the DLPack capsule
    del t
    gc.collect()
    assert sys.getrefcount(x) == base
    t = fp8kit.Tensor.from_array(np.arange(1000, dtype=np.float32) * 2)  # the only reference
    gc.collect()
    back = np.from_dlpack(t.to_array())
    assert back[999] == 1998.0


def test_results_outlive_their_inputs_and_the_call():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 128)).astype(np.float32)
    q, s = fp8kit.scaled_fp8_quant(x)
    expected_q, expected_s = q.copy(), s.copy()
    del x
    gc.collect()
    for _ in range(3):  # other calls reuse scratch memory; the results are fp8kit tensors of their own
        fp8kit.scaled_fp8_quant(rng.standard_normal((8, 128)).astype(np.float32))
    assert same_bits(q, expected_q) and same_bits(s, expected_s)
    view = q[2:4]
    del q
    gc.collect()
    assert same_bits(view, expected_q[2:4])


def test_uint8_views_with_a_dtype():
    codes = np.array([0x38, 0x40, 0xC0], np.uint8)  # 1, 2, -2 in e4m3fn
    t = fp8kit.Tensor.from_array(codes, dtype="e4m3fn")
    assert t.dtype == "e4m3fn" and t.data_ptr == codes.ctypes.data
    assert list(_arrays.array(t, codes).astype(np.float32)) == [1.0, 2.0, -2.0]
    with pytest.raises(ValueError, match=r"`array`: dtype=e4m3fn needs an array of e4m3fn or its 8-bit unsigned "
                                         r"integer view, got f32"):
        fp8kit.Tensor.from_array(np.zeros(3, np.float32), dtype="e4m3fn")
    with pytest.raises(ValueError, match="unknown dtype 'e3m4'"):
        fp8kit.Tensor.from_array(codes, dtype="e3m4")


def test_bad_arrays_are_value_errors_naming_the_argument():
    with pytest.raises(ValueError, match=r"`input`: unsupported dtype"):
        fp8kit.scaled_fp8_quant(np.zeros((2, 2), np.complex64))
    with pytest.raises(ValueError, match=r"`input`: expected an array"):
        fp8kit.scaled_fp8_quant([[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"`x`: negative strides are not supported"):
        fp8kit.per_token_group_quant_fp8(np.zeros((2, 128), np.float32)[::-1], 128)
    with pytest.raises(ValueError, match=r"scaled_fp8_quant: .*f32, f16 or bf16"):
        fp8kit.scaled_fp8_quant(np.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match=r"2-D"):
        fp8kit.scaled_fp8_quant(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"last dimension"):
        fp8kit.scaled_fp8_quant(np.zeros((4, 4), np.float32).T)


def test_error_codes_become_python_exceptions(tmp_path):
    with pytest.raises(OSError, match="nothing-here"):  # ErrorCode::kIo
        fp8kit.inspect(tmp_path / "nothing-here")
    with pytest.raises(ValueError):  # kInvalidArgument
        fp8kit.quantize(tmp_path, tmp_path / "out", scheme="per-row")
    # kUnsupported: a CUDA array in a CPU-only build (a hand-made DLPack capsule on device 2).
    capsule, keep = cuda_capsule()
    if fp8kit.cuda_built():
        assert fp8kit.Tensor.from_array(capsule).device == "cuda:0"
    else:
        with pytest.raises(NotImplementedError, match=r"`array` is on cuda:0, and this fp8kit was built without"):
            fp8kit.Tensor.from_array(capsule)


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


def cuda_capsule():
    """An unversioned DLPack capsule of 4 f32 on cuda:0 (its memory is never touched)."""
    shape = (ctypes.c_int64 * 1)(4)
    managed = DLManagedTensor(DLTensor(0x1000, 2, 0, 1, 2, 32, 1, shape, None, 0), None, None)
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new_capsule(ctypes.addressof(managed), b"dltensor", None), (shape, managed)


def test_stream_argument():
    x = np.ones((2, 16), np.float32)
    fp8kit.scaled_fp8_quant(x, stream=0)

    class TorchLike:
        cuda_stream = 0
    fp8kit.scaled_fp8_quant(x, stream=TorchLike())
    assert _arrays.stream_handle(None, x) == 0
    assert _arrays.stream_handle(1234) == 1234
    assert _arrays.stream_handle(TorchLike()) == 0
    for bad in ("0", -1, 1.5, True):
        with pytest.raises(TypeError, match="`stream` must be a CUDA stream handle"):
            fp8kit.scaled_fp8_quant(x, stream=bad)


def test_dtype_names():
    assert _arrays.dtype_name(np.float32) == "f32"
    assert _arrays.dtype_name(ml_dtypes.float8_e4m3fn) == "e4m3fn"
    assert _arrays.dtype_name("float8_e5m2") == "e5m2"
    assert _arrays.dtype_name("bf16") == "bf16"
    assert _arrays.dtype_name(None, "e4m3fn") == "e4m3fn"
    with pytest.raises(ValueError, match="unknown dtype"):
        _arrays.dtype_name("float7")


def test_the_gil_is_released_while_an_op_runs():
    one = np.ones(1, np.float32)
    w = np.ones((1024, 4096), E4M3)
    m = 16
    while True:  # a GEMM that takes at least 0.3 s here (2 cores: ~140 GFLOP at M = 16384)
        a = np.ones((m, 4096), E4M3)
        start = time.perf_counter()
        fp8kit.scaled_mm(a, w.T, one, one, "f32")
        alone = time.perf_counter() - start
        if alone >= 0.3 or m >= 65536:
            break
        m *= 2
    span = {}

    def run():
        span["start"] = time.perf_counter()
        fp8kit.scaled_mm(a, w.T, one, one, "f32")
        span["end"] = time.perf_counter()

    thread = threading.Thread(target=run)
    ticks = []
    thread.start()
    while thread.is_alive():  # Python code on this thread, while the op runs on the other
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    thread.join()
    during = [t for t in ticks if span["start"] < t < span["end"]]
    duration = span["end"] - span["start"]
    assert duration >= 0.2, duration
    assert len(during) >= 10, (len(during), duration)
    gaps = np.diff([span["start"], *during, span["end"]])
    assert gaps.max() < duration / 2, (gaps.max(), duration)


def test_the_readme_example_runs():
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    section = readme[readme.index("## Python"):]
    code = section[section.index("```python") + len("```python"):]
    code = code[:code.index("```")]
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    x, w, y = scope["x"], scope["w"], scope["y"]
    assert y.shape == (16, 256) and y.dtype == np.float32
    exact = x @ np.asarray(scope["w"].astype(np.float32) * scope["w_scale"]).T
    assert np.abs(y - exact).max() <= 0.1 * np.abs(exact).max()
