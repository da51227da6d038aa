# The model runner (fp8kit::Engine, driven through tests/tools/fp8kit_logits) against the numpy
# reference forward (reference_forward.py), on the small random models of every architecture:
# the 16-bit forward in f32 math, prefill and chunked prefill down to one token a step (the decode
# path). vLLM's choices where it differs from Hugging Face are taken into account: dynamic NTK RoPE
# keeps the base of max_position_embeddings (so it is the plain RoPE), which numpy gets with
# rope_scaling removed. FP8 checkpoints: tests/python/test_runner_fp8.py.
import os
import subprocess

import numpy as np
import pytest

import random_models
from reference_forward import Model, read_checkpoint

IDS = np.random.default_rng(11).integers(0, 211, 40).tolist()
# float32 numpy against fp8kit's f32 forward (the CPU reference sums in double): max abs logit
# difference over max abs logit, measured 3.0e-07-6.7e-07 on these models (docs/numerics.md, "Model
# runner"); bounded at 5e-6, below transformers' own difference from numpy (up to 2e-5).
F32_BOUND = 5e-6


def logits_tool():
    path = os.environ.get("FP8KIT_LOGITS")
    if not path or not os.path.exists(path):
        pytest.fail("FP8KIT_LOGITS must name the built fp8kit_logits (run through ctest)")
    return path


def fp8kit_logits(model_dir, ids, tmp_path, *flags):
    ids_file, out = tmp_path / "ids.txt", tmp_path / "logits.npy"
    ids_file.write_text(" ".join(map(str, ids)))
    # The CPU reference unless FP8KIT_CPU_BACKEND names a backend, so the fast one can be checked too.
    env = {"FP8KIT_CPU_BACKEND": "reference", **os.environ}
    r = subprocess.run([logits_tool(), str(model_dir), str(ids_file), str(out), *map(str, flags)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return np.load(out)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("runner_models")
    return {name: random_models.write_random_model(root / name, name) for name in random_models.SPECS}


def numpy_model(model_dir, dtype=np.float32):
    config, tensors = read_checkpoint(model_dir)
    if (config.get("rope_scaling") or {}).get("rope_type") == "dynamic":
        config = {**config, "rope_scaling": None}  # vLLM's dynamic NTK table: the base of max_position_embeddings
    return Model(config, tensors, dtype)


def relative_error(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b))) / float(np.max(np.abs(b)))


@pytest.mark.parametrize("name", list(random_models.SPECS))
def test_f32_forward_matches_numpy(models, tmp_path, name):
    expected = numpy_model(models[name]).forward(IDS)
    got = fp8kit_logits(models[name], IDS, tmp_path, "--dtype", "float32")
    assert got.shape == expected.shape
    err = relative_error(got, expected)
    print(f"{name}: f32 forward, max abs diff / max abs logit {err:.2e}")
    assert err <= F32_BOUND, f"{name}: {err}"


@pytest.mark.parametrize("name", ["llama2", "mistral", "qwen3-moe", "mixtral"])
@pytest.mark.parametrize("chunk", [7, 1])
def test_chunked_prefill_and_decode_are_the_prefill_exactly(models, tmp_path, name, chunk):
    # On the reference ops every row's arithmetic is independent of the other rows of the batch and
    # attention reads the same cached keys in the same order: bit-exact.
    prefill = fp8kit_logits(models[name], IDS, tmp_path, "--dtype", "float32")
    chunked = fp8kit_logits(models[name], IDS, tmp_path, "--dtype", "float32", "--chunk", chunk)
    np.testing.assert_array_equal(chunked, prefill)


@pytest.mark.parametrize("name", ["llama3", "qwen2", "qwen3"])
def test_bf16_forward_is_close_to_numpy(models, tmp_path, name):
    # The model dtype forward rounds activations to bf16 at every step vLLM does; against the f32
    # numpy forward the logits move by bf16 noise (measured 6.1e-3-8.0e-3), far less than a wrong
    # layer would.
    expected = numpy_model(models[name]).forward(IDS)
    got = fp8kit_logits(models[name], IDS, tmp_path)
    err = relative_error(got, expected)
    print(f"{name}: bf16 forward, max abs diff / max abs logit {err:.2e}")
    assert err <= 0.03, f"{name}: {err}"
    assert np.mean(np.argmax(got, -1) == np.argmax(expected, -1)) >= 0.9
