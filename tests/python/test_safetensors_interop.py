# Files written by the official safetensors package are read by fp8kit, and files written by
# fp8kit are read by the official package, byte for byte, for every dtype both know.
import ml_dtypes
import numpy as np
import safetensors

DTYPES = {  # safetensors TensorSpec dtype -> numpy dtype
    "float32": np.float32, "float16": np.float16, "float64": np.float64, "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16, "int32": np.int32,
    "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64, "bool": np.bool_,
}


def make_tensors():
    rng = np.random.default_rng(3)
    arrays = {}
    for i, (name, dtype) in enumerate(DTYPES.items()):
        shape = [(2, 3), (5,), (), (3, 0), (1, 2, 3)][i % 5]
        raw = rng.integers(0, 256, size=int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize, dtype=np.uint8)
        if dtype == np.bool_:
            raw = raw & 1
        arrays[f"t.{name}"] = (name, np.frombuffer(raw.tobytes(), dtype=dtype).reshape(shape))
    return arrays


def serialize(arrays, metadata):
    specs = {k: safetensors.TensorSpec(dtype=d, shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
             for k, (d, a) in arrays.items()}
    return safetensors.serialize(specs, metadata)


def test_python_writes_fp8kit_reads_and_writes_back(testtool, tmp_path):
    arrays = make_tensors()
    src, dst = tmp_path / "python.safetensors", tmp_path / "fp8kit.safetensors"
    src.write_bytes(serialize(arrays, {"format": "pt", "origin": "python"}))
    testtool("copy", src, dst)
    blob = dst.read_bytes()
    header_len = int.from_bytes(blob[:8], "little")
    assert (8 + header_len) % 8 == 0
    back = dict(safetensors.deserialize(blob))
    assert set(back) == set(arrays)
    for key, (dtype_name, array) in arrays.items():
        assert back[key]["shape"] == list(array.shape), key
        assert bytes(back[key]["data"]) == array.tobytes(), key
    with safetensors.safe_open(str(dst), framework="numpy") as f:
        assert f.metadata() == {"format": "pt", "origin": "python"}
        assert np.array_equal(f.get_tensor("t.float32"), arrays["t.float32"][1])


def test_fp8kit_output_is_naturally_aligned(testtool, tmp_path):
    arrays = make_tensors()
    src, dst = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    src.write_bytes(serialize(arrays, None))
    testtool("copy", src, dst)
    blob = dst.read_bytes()
    header_len = int.from_bytes(blob[:8], "little")
    import json
    header = json.loads(blob[8:8 + header_len])
    assert header["__metadata__"] == {"format": "pt"}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        itemsize = np.dtype(DTYPES[arrays[key][0]]).itemsize
        assert (8 + header_len + entry["data_offsets"][0]) % itemsize == 0, key
