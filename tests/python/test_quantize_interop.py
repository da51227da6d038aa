# `fp8kit quantize` checked from the outside: a BF16 checkpoint written with the official
# safetensors package is quantized by the CLI, and the result is recomputed with numpy float32
# arithmetic and ml_dtypes casts (an implementation that shares no code with fp8kit). Scales must
# match bit for bit and FP8 codes exactly; names, dtypes, shapes and config keys are vLLM's.
import json

import ml_dtypes
import numpy as np
import pytest
import safetensors

FP8_MAX = np.float32(448.0)


def write_model(path, rng):
    weights = {
        "model.embed_tokens.weight": (64, 256),
        "model.layers.0.input_layernorm.weight": (256,),
        "model.layers.0.self_attn.q_proj.weight": (256, 256),
        "model.layers.0.self_attn.k_proj.weight": (128, 256),
        "model.layers.0.self_attn.v_proj.weight": (128, 256),
        "model.layers.0.self_attn.o_proj.weight": (256, 256),
        "model.layers.0.mlp.gate_proj.weight": (384, 256),
        "model.layers.0.mlp.up_proj.weight": (384, 256),
        "model.layers.0.mlp.down_proj.weight": (256, 384),
        "model.norm.weight": (256,),
        "lm_head.weight": (64, 256),
    }
    arrays = {}
    for name, shape in weights.items():
        a = rng.standard_normal(shape).astype(np.float32) * np.float32(0.02)
        a.flat[::97] *= np.float32(20.0)  # outliers, so blocks differ in scale
        arrays[name] = a.astype(ml_dtypes.bfloat16)
    specs = {k: safetensors.TensorSpec(dtype="bfloat16", shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
             for k, a in arrays.items()}
    path.mkdir()
    (path / "model.safetensors").write_bytes(safetensors.serialize(specs, {"format": "pt"}))
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 256,
                                                  "torch_dtype": "bfloat16"}))
    (path / "tokenizer.json").write_text("{}")
    return {k: a.astype(np.float32) for k, a in arrays.items()}


def read(path):
    return {name: t for name, t in safetensors.deserialize((path / "model.safetensors").read_bytes())}


def as_array(t, dtype):
    return np.frombuffer(bytes(t["data"]), dtype=dtype).reshape(t["shape"])


def fp8(values):
    return np.clip(values, -FP8_MAX, FP8_MAX).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def module(name):
    return name.replace(".weight", "")


@pytest.fixture
def model(tmp_path):
    return tmp_path / "bf16", write_model(tmp_path / "bf16", np.random.default_rng(11))


def test_block_scheme(fp8kit_cli, tmp_path, model):
    src, weights = model
    out = tmp_path / "fp8"
    r = fp8kit_cli("quantize", src, out, "--scheme", "block", "--block", "128,128", "-q")
    assert r.returncode == 0, r.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["quantization_config"] == {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                             "weight_block_size": [128, 128], "ignored_layers": ["lm_head"]}
    assert (out / "tokenizer.json").exists()
    tensors = read(out)
    for name, w in weights.items():
        if not any(f".{p}." in name for p in LINEARS):
            assert tensors[name]["dtype"] == "BF16"
            continue
        q, s = tensors[name], tensors[module(name) + ".weight_scale_inv"]
        assert q["dtype"] == "F8_E4M3" and s["dtype"] == "F32"
        n, k = w.shape
        assert s["shape"] == [(n + 127) // 128, (k + 127) // 128]
        scales = as_array(s, "<f4")
        blocks = w.reshape(n // 128, 128, k // 128, 128)
        want_scales = np.maximum(np.abs(blocks).max(axis=(1, 3)) / FP8_MAX, np.finfo(np.float32).tiny)
        assert np.array_equal(scales.view(np.uint32), want_scales.astype(np.float32).view(np.uint32)), name
        expanded = np.repeat(np.repeat(want_scales, 128, axis=0), 128, axis=1)
        assert np.array_equal(as_array(q, np.uint8), fp8(w / expanded)), name
    assert "lm_head.weight_scale_inv" not in tensors


def test_per_tensor_scheme_shares_fused_scales(fp8kit_cli, tmp_path, model):
    src, weights = model
    out = tmp_path / "fp8"
    r = fp8kit_cli("quantize", src, out, "--scheme", "per-tensor", "-q")
    assert r.returncode == 0, r.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["quantization_config"] == {"quant_method": "fp8", "activation_scheme": "dynamic",
                                             "ignored_layers": ["lm_head"]}
    tensors = read(out)
    groups = [["q_proj", "k_proj", "v_proj"], ["gate_proj", "up_proj"], ["o_proj"], ["down_proj"]]
    for group in groups:
        names = [n for n in weights if any(f".{p}." in n for p in group)]
        amax = max(np.abs(weights[n]).max() for n in names)
        want_scale = np.float32(amax) / FP8_MAX
        for name in names:
            s = tensors[module(name) + ".weight_scale"]
            assert s["dtype"] == "F32" and s["shape"] == []
            assert as_array(s, "<f4")[()] == want_scale, name
            inv = np.float32(1.0) / want_scale
            assert np.array_equal(as_array(tensors[name], np.uint8), fp8(weights[name] * inv)), name


def test_per_channel_scheme_is_compressed_tensors(fp8kit_cli, tmp_path, model):
    src, weights = model
    out = tmp_path / "fp8"
    r = fp8kit_cli("quantize", src, out, "--scheme", "per-channel", "-q")
    assert r.returncode == 0, r.stderr
    qc = json.loads((out / "config.json").read_text())["quantization_config"]
    assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "float-quantized"
    group = qc["config_groups"]["group_0"]
    assert group["weights"]["strategy"] == "channel" and group["input_activations"]["strategy"] == "token"
    assert group["input_activations"]["dynamic"] is True and qc["ignore"] == ["lm_head"]
    tensors = read(out)
    name = "model.layers.0.mlp.down_proj.weight"
    w = weights[name]
    s = tensors[module(name) + ".weight_scale"]
    assert s["shape"] == [w.shape[0], 1]
    want = (np.abs(w).max(axis=1, keepdims=True) / FP8_MAX).astype(np.float32)
    assert np.array_equal(as_array(s, "<f4").view(np.uint32), want.view(np.uint32))
    assert np.array_equal(as_array(tensors[name], np.uint8), fp8(w / want))
