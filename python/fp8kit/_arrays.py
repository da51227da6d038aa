"""Arrays in and out of fp8kit, zero copy through DLPack, and the caller's CUDA stream.

An argument is any array with ``__dlpack__`` (numpy, torch, cupy, jax) or the buffer protocol; it
becomes an fp8kit Tensor that borrows its memory. Element types that DLPack cannot carry out of
numpy (ml_dtypes' ``float8_*`` and ``bfloat16``) or out of torch (its ``float8_*``) travel as
their unsigned-integer view and are named again on the other side. A result comes back in the
framework of the op's first array argument (numpy with ml_dtypes dtypes on the CPU, torch, cupy),
sharing fp8kit's memory.
"""

import sys

import ml_dtypes
import numpy as np

from . import _fp8kit

# fp8kit's dtype names ("e4m3fn", "bf16", ...) from the names numpy, ml_dtypes and torch use.
_FP8KIT_NAMES = {
    "float8_e4m3fn": "e4m3fn", "float8_e4m3fnuz": "e4m3fnuz", "float8_e5m2": "e5m2",
    "float8_e5m2fnuz": "e5m2fnuz", "float8_e8m0fnu": "ue8m0", "bfloat16": "bf16",
    "float16": "f16", "half": "f16", "float32": "f32", "float": "f32", "float64": "f64",
    "double": "f64", "int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16",
    "int32": "i32", "uint32": "u32", "int64": "i64", "uint64": "u64", "bool": "bool",
}
_FP8KIT_DTYPES = set(_FP8KIT_NAMES.values())

# The dtypes that leave fp8kit as unsigned views, and what numpy (ml_dtypes) calls them.
_NUMPY_VIEWED = {
    "e4m3fn": ml_dtypes.float8_e4m3fn, "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "e5m2": ml_dtypes.float8_e5m2, "e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "ue8m0": ml_dtypes.float8_e8m0fnu, "bf16": ml_dtypes.bfloat16,
}
_TORCH_VIEWED = {"e4m3fn": "float8_e4m3fn", "e4m3fnuz": "float8_e4m3fnuz", "e5m2": "float8_e5m2",
                 "e5m2fnuz": "float8_e5m2fnuz", "ue8m0": "float8_e8m0fnu"}


def dtype_name(dtype, default=None):
    """fp8kit's name of `dtype`: a string, a numpy / ml_dtypes dtype or type, or a torch.dtype."""
    if dtype is None:
        return default
    if isinstance(dtype, str):
        name = dtype
    elif type(dtype).__module__.startswith("torch"):
        name = str(dtype).removeprefix("torch.")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise TypeError(f"not a dtype: {dtype!r}") from None
    if name in _FP8KIT_DTYPES:
        return name
    if name in _FP8KIT_NAMES:
        return _FP8KIT_NAMES[name]
    raise ValueError(f"unknown dtype {dtype!r}")


def _module_of(x):
    return type(x).__module__.split(".", 1)[0]


def tensor(x, name, *, fp8=None, writable=False):
    """`x` as an fp8kit Tensor sharing its memory (None stays None). A uint8 array is read as the
    FP8 dtype `fp8` where the op implies one."""
    if x is None or isinstance(x, _fp8kit.Tensor):
        return x
    dtype = None
    framework = _module_of(x)
    if framework == "numpy" and isinstance(x, np.ndarray):
        if x.dtype.kind == "V" or x.dtype == ml_dtypes.bfloat16:  # ml_dtypes: no DLPack code in numpy
            dtype = dtype_name(x.dtype)
            x = x.view(np.dtype(f"u{x.dtype.itemsize}"))
        elif fp8 is not None and x.dtype == np.uint8:
            dtype = fp8
    elif framework == "torch":
        import torch
        name = str(x.dtype).removeprefix("torch.")
        if name.startswith("float8_"):  # torch's DLPack export has no FP8 codes in every version
            dtype = _FP8KIT_NAMES[name]
            x = x.view(torch.uint8)
        elif fp8 is not None and x.dtype == torch.uint8:
            dtype = fp8
    elif fp8 is not None and getattr(x, "dtype", None) is not None and str(x.dtype) == "uint8":
        dtype = fp8  # cupy and others: FP8 data as uint8
    return _fp8kit.Tensor.from_array(x, dtype, name, writable)


def array(t, like):
    """The Tensor `t` as an array of `like`'s framework, sharing its memory (None stays None)."""
    if t is None:
        return None
    framework = _module_of(like)
    name = t.dtype
    if framework == "torch":
        import torch
        if name in _TORCH_VIEWED:
            return torch.from_dlpack(t.to_array(raw=True)).view(getattr(torch, _TORCH_VIEWED[name]))
        return torch.from_dlpack(t.to_array())
    if framework == "cupy" or t.device != "cpu":
        module = sys.modules.get(framework)
        if module is not None and hasattr(module, "from_dlpack"):
            return module.from_dlpack(t.to_array(raw=name in _NUMPY_VIEWED))
        return t.to_array(raw=name in _NUMPY_VIEWED)  # any DLPack consumer takes it
    if name in _NUMPY_VIEWED:
        return np.from_dlpack(t.to_array(raw=True)).view(_NUMPY_VIEWED[name])
    return np.from_dlpack(t.to_array())


def stream_handle(stream, *arrays):
    """The cudaStream_t to run on, as an integer: `stream` (an int, or an object with
    `cuda_stream` as torch.cuda.Stream has, or `ptr` as cupy's streams have), or by default the
    current stream of the framework of the first CUDA array (torch, cupy), else 0."""
    if stream is None:
        for x in arrays:
            framework = _module_of(x)
            if framework == "torch" and getattr(x, "is_cuda", False):
                import torch
                return int(torch.cuda.current_stream(x.device).cuda_stream)
            if framework == "cupy":
                import cupy
                return int(cupy.cuda.get_current_stream().ptr)
        return 0
    if hasattr(stream, "cuda_stream"):
        stream = stream.cuda_stream
    elif hasattr(stream, "ptr"):
        stream = stream.ptr
    if isinstance(stream, bool) or not isinstance(stream, int) or stream < 0:
        raise TypeError(f"`stream` must be a CUDA stream handle (an int >= 0, or an object with "
                        f"`cuda_stream`), got {stream!r}")
    return stream
