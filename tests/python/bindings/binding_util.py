# Helpers of the bindings' tests: safetensors files for the C++ oracle (written and read here, so
# that any dtype fp8kit knows goes through), and an exact comparison.
import json

import ml_dtypes
import numpy as np

# numpy dtype <-> safetensors dtype name, for the oracle's files.
_ST_NAMES = {
    np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(ml_dtypes.bfloat16): "BF16",
    np.dtype(ml_dtypes.float8_e4m3fn): "F8_E4M3", np.dtype(ml_dtypes.float8_e4m3fnuz): "F8_E4M3FNUZ",
    np.dtype(ml_dtypes.float8_e5m2): "F8_E5M2", np.dtype(ml_dtypes.float8_e8m0fnu): "F8_E8M0",
    np.dtype(np.int32): "I32", np.dtype(np.int64): "I64", np.dtype(np.uint8): "U8",
}
_ST_DTYPES = {name: dtype for dtype, name in _ST_NAMES.items()}


def write_safetensors(path, arrays):
    header, blobs, offset = {}, [], 0
    for name, a in arrays.items():
        data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": _ST_NAMES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def read_safetensors(path):
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=_ST_DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


def same_bits(a, b):
    """Equal shape, dtype and bytes (NaN payloads included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
