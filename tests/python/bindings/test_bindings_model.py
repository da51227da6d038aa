# The model runner from Python (fp8kit.Model, fp8kit.eval) against the C++ tools on small random
# models (tests/python/random_models.py): generate gives the ids and text of `fp8kit generate
# --json` exactly, eval the figures of `fp8kit eval --json` exactly, logits the rows of
# tests/tools/fp8kit_logits.cpp bit for bit; arrays outlive the model; bad arguments raise with
# fp8kit's message; the GIL is released while a model runs.
import gc
import json
import os
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

import fp8kit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import random_models  # noqa: E402  (tests/python)

IDS = [int(i) for i in np.random.default_rng(5).integers(3, 211, 24)]
EVAL_IDS = [int(i) for i in np.random.default_rng(6).integers(3, 211, 100)]
# A Metaspace BPE over lowercase letters, its vocabulary filled up to the model's 211 ids: enough of
# a tokenizer.json for text in and out.
LETTERS = "abcdefghijklmnopqrstuvwxyz"
TOKENIZER = {
    "version": "1.0", "truncation": None, "padding": None, "normalizer": None, "post_processor": None,
    "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True} for i, t in enumerate(["<unk>", "<s>", "</s>"])],
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": False, "byte_fallback": False,
              "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, **{c: 4 + i for i, c in enumerate(LETTERS)},
                        "\u2581t": 30, "he": 31, "\u2581the": 32, **{f"x{i}": i for i in range(33, 211)}},
              "merges": [["\u2581", "t"], ["h", "e"], ["\u2581t", "he"]]},
}


def cli():
    path = os.environ.get("FP8KIT_CLI")
    if not path or not os.path.exists(path):
        pytest.fail("FP8KIT_CLI must name the built fp8kit (run through ctest)")
    return path


def run_cli(*args):
    r = subprocess.run([cli(), *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("model_bindings")
    llama = random_models.write_random_model(root / "llama2", "llama2")
    (llama / "tokenizer.json").write_text(json.dumps(TOKENIZER))
    (llama / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    qwen = random_models.write_random_model(root / "qwen3-moe", "qwen3-moe")
    return {"llama2": llama, "qwen3-moe": qwen}


@pytest.fixture(scope="module")
def llama(models):
    return fp8kit.Model.load(models["llama2"])


@pytest.mark.parametrize("sampling", [dict(temperature=0), dict(temperature=0.9, top_k=40, top_p=0.9, seed=7)])
def test_generate_gives_the_ids_of_the_cli(models, llama, sampling):
    flags = [x for k, v in sampling.items() for x in (f"--{k.replace('_', '-')}", v)]
    expected = run_cli("generate", models["llama2"], "--prompt-ids", " ".join(map(str, IDS)), "-n", 20, "--json",
                       *flags)[0]
    got = llama.generate(IDS, 20, **sampling)
    assert got.ids == expected["ids"]
    assert got.text == expected["text"]
    assert got.finish_reason == expected["finish_reason"]
    assert got.prompt_tokens == len(IDS)
    assert llama.generate(np.array(IDS, np.int64), 20, **sampling) == got  # numpy ids, and deterministic


def test_generate_from_text_and_an_fp8_model(models):
    model = fp8kit.Model.load(models["llama2"], quantization="fp8", kv_cache_dtype="fp8", threads=1)
    assert model.info["quantization"] != "none" and model.info["kv_cache_dtype"] == "fp8_e4m3"
    prompt = "the theme of the hat"
    expected = run_cli("generate", models["llama2"], "--prompt", prompt, "-n", 12, "--quantization", "fp8",
                       "--kv-cache-dtype", "fp8", "--temperature", 0.7, "--seed", 3, "--json")[0]
    got = model.generate(prompt, 12, temperature=0.7, seed=3)
    assert (got.ids, got.text, got.prompt_tokens) == (expected["ids"], expected["text"], expected["prompt_tokens"])
    assert model.encode(prompt)[:4] == [32, 32, 16, 8]  # "▁the", "▁the" "m" "e", ...
    assert model.decode(model.encode(prompt)) == prompt


def test_logits_are_the_runners_rows(models, llama, tmp_path):
    tool = os.environ.get("FP8KIT_LOGITS")
    if not tool or not os.path.exists(tool):
        pytest.fail("FP8KIT_LOGITS must name the built fp8kit_logits (run through ctest)")
    ids_file, out = tmp_path / "ids.txt", tmp_path / "logits.npy"
    ids_file.write_text(" ".join(map(str, IDS)))
    r = subprocess.run([tool, models["llama2"], ids_file, out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = llama.logits(IDS)
    assert got.dtype == np.float32 and got.shape == (len(IDS), 211) and got.flags.c_contiguous
    assert got.tobytes() == np.load(out).tobytes()
    # Greedy decoding takes the last row's argmax.
    assert llama.generate(IDS, 1, temperature=0).ids == [int(np.argmax(got[-1]))]


def test_eval_gives_the_figures_of_the_cli(models, tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(" ".join(map(str, EVAL_IDS)))
    expected = run_cli("eval", models["llama2"], "--base", models["llama2"], "--tokens", tokens, "--ctx", 32,
                       "--quantization", "fp8", "--json")[0]
    base = fp8kit.Model.load(models["llama2"])
    fp8 = fp8kit.Model.load(models["llama2"], quantization="fp8")
    windows = []
    got = fp8kit.eval(fp8, base, EVAL_IDS, 32, progress=lambda done, total: windows.append((done, total)))
    assert set(got) == set(expected)
    for key in expected:
        if key not in ("seconds", "base_seconds", "model"):
            assert got[key] == expected[key], key
    assert got["tokens"] == 3 * 15 and got["kld_mean"] > 0 and 0 < got["top1_agreement"] <= 1
    assert windows[-1] == (3, 3)
    # Without a base: perplexity alone, as the CLI gives it; the method is the same function.
    alone = run_cli("eval", models["llama2"], "--tokens", tokens, "--ctx", 32, "--first", 0, "--json")[0]
    got = base.eval(EVAL_IDS, ctx=32, first=0)
    assert got["ppl"] == alone["ppl"] and got["tokens"] == alone["tokens"] == 3 * 31
    assert got["kld_mean"] is None and got["base_ppl"] is None


def test_eval_perplexity_is_that_of_the_logits(llama):
    # ppl = exp(mean NLL of the scored tokens) from the logits rows: the eval and the logits agree.
    window = EVAL_IDS[:32]
    logits = llama.logits(window).astype(np.float64)
    logp = logits - np.log(np.sum(np.exp(logits - logits.max(1, keepdims=True)), 1, keepdims=True)) - logits.max(1, keepdims=True)
    nll = -np.mean([logp[p, window[p + 1]] for p in range(16, 31)])
    assert abs(fp8kit.eval(llama, None, window, 32)["ppl"] / np.exp(nll) - 1) < 1e-3


def test_a_returned_array_outlives_the_model(models):
    model = fp8kit.Model.load(models["qwen3-moe"], dtype="float32")
    logits = model.logits(IDS)
    copy = logits.copy()
    gone = weakref.ref(model._impl)
    del model
    gc.collect()
    assert gone() is None  # the model is freed; the array keeps only its own buffer
    np.testing.assert_array_equal(logits, copy)
    assert np.isfinite(logits).all() and logits.shape == (len(IDS), 211)
    assert sys.getrefcount(logits) == 2


def test_bad_arguments_raise_with_fp8kits_message(models, llama, tmp_path):
    with pytest.raises(OSError, match="not a directory"):
        fp8kit.Model.load(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"`dtype` must be 'auto', 'bfloat16', 'float16' or 'float32', got 'int8'"):
        fp8kit.Model.load(models["llama2"], dtype="int8")
    with pytest.raises(ValueError, match=r"`kv_cache_dtype` must be 'auto', 'fp8', 'fp8_e4m3' or 'fp8_e5m2', got 'int4'"):
        fp8kit.Model.load(models["llama2"], kv_cache_dtype="int4")
    with pytest.raises(ValueError, match=r"`quantization` must be 'auto' or 'fp8', got 'awq'"):
        fp8kit.Model.load(models["llama2"], quantization="awq")
    with pytest.raises(ValueError, match="give `kv_cache_tokens` or `kv_cache_memory`, not both"):
        fp8kit.Model.load(models["llama2"], kv_cache_tokens=64, kv_cache_memory=1 << 20)
    with pytest.raises(ValueError, match=r"`threads` must be 1 to 1024, got 0"):
        fp8kit.Model.load(models["llama2"], threads=0)
    with pytest.raises(ValueError, match="211"):  # the engine's message: the id and the vocabulary
        llama.generate([5, 211], 4)
    with pytest.raises(ValueError, match=r"`top_p` must be in \(0, 1\], got 0"):
        llama.generate(IDS, 4, top_p=0)
    with pytest.raises(ValueError, match=r"`max_tokens` must be at least 1, got 0"):
        llama.generate(IDS, 0)
    with pytest.raises(ValueError, match="`prompt` has no tokens"):
        llama.generate([], 4)
    with pytest.raises(ValueError, match=r"`prompt`: -1 is not a token id"):
        llama.generate([3, -1], 4)
    with pytest.raises(TypeError, match=r"`ids` must be text or a 1-D sequence of token ids \(ints\), got ndarray of shape \[2, 2\]"):
        llama.logits(np.ones((2, 2), np.int32))
    with pytest.raises(TypeError, match="of float64"):
        llama.logits(np.ones(3))
    with pytest.raises(ValueError, match="`ctx` must be at least 2, got 1"):
        fp8kit.eval(llama, None, EVAL_IDS, 1)
    qwen = fp8kit.Model.load(models["qwen3-moe"], kv_cache_tokens=16)
    with pytest.raises(ValueError, match="generate: .*qwen3-moe has no tokenizer.json|encode: .*qwen3-moe has no tokenizer.json"):
        qwen.generate("text", 4)
    with pytest.raises(ValueError, match="block"):  # the request needs more KV blocks than the pool has
        qwen.generate(IDS, 4)
    with pytest.raises(ValueError, match="llama2.*qwen3-moe|qwen3-moe.*llama2"):
        fp8kit.eval(llama, qwen, EVAL_IDS, 8)
    # After the errors the models still run: nothing was left queued.
    assert len(llama.generate(IDS, 3, temperature=0, ignore_eos=True).ids) == 3
    assert qwen.logits(IDS[:8]).shape == (8, 211)


def test_the_gil_is_released_while_a_model_generates(llama):
    # Calls of 200 new tokens (about 10 ms each on the fast CPU backend) for at least 0.3 s on
    # another thread, while this one ticks every millisecond: with the GIL released during a
    # call, about one tick a millisecond of the calls falls inside them; with it held, none could
    # (this thread would only run between calls).
    n = 200
    spans = []

    def run():
        until = time.perf_counter() + 0.3
        while time.perf_counter() < until or len(spans) < 3:
            start = time.perf_counter()
            ids = llama.generate(IDS, n, temperature=0, ignore_eos=True).ids
            spans.append((start, time.perf_counter(), len(ids)))

    thread = threading.Thread(target=run)
    ticks = []
    thread.start()
    while thread.is_alive():  # Python code on this thread, while the model runs on the other
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    thread.join()
    assert all(k == n for _, _, k in spans)
    inside = [t for t in ticks if any(s < t < e for s, e, _ in spans)]
    busy = sum(e - s for s, e, _ in spans)
    assert len(inside) >= max(10, busy / 0.001 / 10), (len(inside), busy, len(spans))


def test_the_readme_runner_example_runs(models, tmp_path):
    # README.md's second Python example, on the random model (its ctx within the model's 256
    # positions) and a text file of its tokenizer's letters.
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    section = readme[readme.index("## Python"):]
    code = section[section.index("```python", section.index("```python") + 1) + len("```python"):]
    code = code[:code.index("```")]
    text = tmp_path / "wiki.test.raw"
    text.write_text(" ".join(["the theme of the hat is a cat"] * 40))
    code = (code.replace('"SmolLM2-135M"', repr(str(models["llama2"]))).replace('"wiki.test.raw"', repr(str(text)))
            .replace("ctx=512", "ctx=64"))
    assert code.count(str(models["llama2"])) == 2 and str(text) in code and "ctx=64" in code
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    out, logits, stats = scope["out"], scope["logits"], scope["stats"]
    assert out.text is not None and 1 <= len(out.ids) <= 16
    assert logits.shape == (len(out.ids), 211) and logits.dtype == np.float32
    assert stats["windows"] >= 3 and stats["kld_mean"] > 0 and stats["ppl"] > 1


def test_two_threads_share_models(models, llama):
    # Calls on one model run one at a time; eval(a, b) and eval(b, a) at once take both locks in
    # one order (no deadlock). Each thread gets what it gets alone.
    other = fp8kit.Model.load(models["llama2"], quantization="fp8")
    alone = {"gen": llama.generate(IDS, 30, temperature=0.8, seed=1), "ab": fp8kit.eval(llama, other, EVAL_IDS, 32),
             "ba": fp8kit.eval(other, llama, EVAL_IDS, 32)}
    got = {}

    def run(key):
        for _ in range(3):
            got.setdefault(key, []).append(
                llama.generate(IDS, 30, temperature=0.8, seed=1) if key.startswith("gen") else
                fp8kit.eval(llama, other, EVAL_IDS, 32) if key == "ab" else fp8kit.eval(other, llama, EVAL_IDS, 32))

    threads = [threading.Thread(target=run, args=(k,)) for k in ("gen1", "gen2", "ab", "ba")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert got["gen1"] == got["gen2"] == [alone["gen"]] * 3
    for key in ("ab", "ba"):
        assert [{k: v for k, v in r.items() if "seconds" not in k} for r in got[key]] == \
               [{k: v for k, v in alone[key].items() if "seconds" not in k}] * 3
