# The checkpoint tools from Python: fp8kit.quantize / dequantize / inspect give the files and the
# report the CLI gives (byte for byte), call progress between tensors, and stop cleanly (nothing
# left behind) when progress raises.
import json

import ml_dtypes
import numpy as np
import pytest

import fp8kit

SHAPES = {
    "model.embed_tokens.weight": (64, 128),
    "model.layers.0.input_layernorm.weight": (128,),
    "model.layers.0.self_attn.q_proj.weight": (128, 128),
    "model.layers.0.self_attn.k_proj.weight": (128, 128),
    "model.layers.0.self_attn.v_proj.weight": (128, 128),
    "model.layers.0.self_attn.o_proj.weight": (128, 128),
    "model.layers.0.post_attention_layernorm.weight": (128,),
    "model.layers.0.mlp.gate_proj.weight": (256, 128),
    "model.layers.0.mlp.up_proj.weight": (256, 128),
    "model.layers.0.mlp.down_proj.weight": (128, 256),
    "model.norm.weight": (128,),
    "lm_head.weight": (64, 128),
}


def write_model(path):
    rng = np.random.default_rng(7)
    header, blobs, offset = {}, [], 0
    for name, shape in SHAPES.items():
        data = (rng.standard_normal(shape) * 0.02).astype(ml_dtypes.bfloat16).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.mkdir()
    (path / "model.safetensors").write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))
    (path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 64,
        "torch_dtype": "bfloat16"}))


@pytest.fixture()
def model(tmp_path):
    write_model(tmp_path / "bf16")
    return tmp_path


@pytest.mark.parametrize("scheme", ["block", "per-tensor", "per-channel"])
def test_quantize_as_the_cli(model, fp8kit_cli, scheme):
    # 64 x 64 blocks: every weight has several (a one-block scale reads as per-tensor to inspect).
    report = fp8kit.quantize(model / "bf16", model / "py", scheme=scheme, block_size=(64, 64),
                             ignore=["re:.*down_proj$"])
    assert report["tensors_quantized"] == 6 and report["tensors_copied"] == 6
    assert "model.layers.0.mlp.down_proj" in report["ignored_layers"]
    assert report["input_tensor_bytes"] > report["output_tensor_bytes"] > 0 and report["seconds"] >= 0
    r = fp8kit_cli("quantize", model / "bf16", model / "cli", "--scheme", scheme, "--block", "64,64",
                   "--ignore", "re:.*down_proj$", "-q")
    assert r.returncode == 0, r.stderr
    assert (model / "py" / "model.safetensors").read_bytes() == (model / "cli" / "model.safetensors").read_bytes()
    assert (model / "py" / "config.json").read_text() == (model / "cli" / "config.json").read_text()

    info = fp8kit.inspect(model / "py", loading=True)
    r = fp8kit_cli("inspect", model / "cli", "--json", "--loading")
    cli = json.loads(r.stdout)
    assert info.pop("dir") == str(model / "py") and cli.pop("dir") == str(model / "cli")
    assert info == cli and info["problems"] == [] and ("loading" in info or "loading_note" in info)


def test_dequantize_as_the_cli(model, fp8kit_cli):
    fp8kit.quantize(model / "bf16", model / "fp8", block_size=(64, 64))
    report = fp8kit.dequantize(model / "fp8", model / "py", dtype="f16")
    assert report["tensors_quantized"] == 7
    assert fp8kit_cli("dequantize", model / "fp8", model / "cli", "--dtype", "f16").returncode == 0
    assert (model / "py" / "model.safetensors").read_bytes() == (model / "cli" / "model.safetensors").read_bytes()
    assert fp8kit.inspect(model / "py")["format"] == "unquantized"


def test_progress_and_stopping(model):
    seen = []
    fp8kit.quantize(model / "bf16", model / "out", progress=lambda done, total, name: seen.append((done, total, name)))
    assert len(seen) == len(SHAPES)
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen) and seen[-1][0] == seen[-1][1]
    assert {name for _, _, name in seen} == set(SHAPES)

    class Stop(Exception):
        pass

    def stop(done, total, name):
        if done > total // 2:
            raise Stop(name)

    with pytest.raises(Stop):
        fp8kit.quantize(model / "bf16", model / "stopped", progress=stop)
    assert sorted(p.name for p in model.iterdir()) == ["bf16", "out"]  # no output, no partial directory


def test_checkpoint_errors(model):
    fp8kit.quantize(model / "bf16", model / "out")
    with pytest.raises(ValueError, match="--force"):
        fp8kit.quantize(model / "bf16", model / "out")
    fp8kit.quantize(model / "bf16", model / "out", force=True, scheme="per-tensor")
    assert fp8kit.inspect(model / "out")["format"] == "fp8"
    with pytest.raises(ValueError, match="`scheme`"):
        fp8kit.quantize(model / "bf16", model / "x", scheme="per-row")
    with pytest.raises(ValueError, match="block_size"):
        fp8kit.quantize(model / "bf16", model / "x", block_size=[128])
    with pytest.raises(ValueError, match="`dtype`"):
        fp8kit.dequantize(model / "out", model / "x", dtype="e4m3fn")
