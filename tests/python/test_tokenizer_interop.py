# `fp8kit tokenize` against the Hugging Face `tokenizers` package (the oracle): tokenizers of every
# family fp8kit serves are trained here (tokenizer_families.py) and each string of the corpus
# (tokenizer_corpus.py, and 300 random strings of its pieces) must give the same ids and token
# strings; decoding, skipping special tokens and streamed decoding must give the package's text. SmolLM2-135M-Instruct's real
# tokenizer is compared too when its fixture directory exists (skipped with a message otherwise).
import json
import os
import pathlib

import pytest
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

import tokenizer_corpus
import tokenizer_families

FAMILIES = ["gpt2", "gpt2_prefix_space", "llama3", "qwen2", "nemo", "smollm", "llama2", "mistral", "metaspace_split",
            "metaspace_never"]
# Byte-level BPE without a normalizer (qwen2 applies NFC) and without an added prefix space.
LOSSLESS = {"gpt2", "llama3", "nemo", "smollm"}


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenizers")
    text = tokenizer_corpus.training_text()
    dirs = {}
    for family in FAMILIES:
        d = root / family
        d.mkdir()
        (d / "tokenizer.json").write_text(tokenizer_families.build(family, text), encoding="utf-8")
        dirs[family] = d
    return dirs


def smollm2_dir():
    cache = os.environ.get("FP8KIT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fp8kit")
    return pathlib.Path(cache) / "smollm2-135m-instruct"


def encode(fp8kit_cli, model_dir, text, tmp_path, *flags):
    path = tmp_path / "input.txt"
    path.write_bytes(text.encode("utf-8"))
    r = fp8kit_cli("tokenize", model_dir, "--text", path, "--json", *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def decode(fp8kit_cli, model_dir, ids, *flags):
    r = fp8kit_cli("tokenize", model_dir, "--decode", " ".join(map(str, ids)), "--json", *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def check_corpus(fp8kit_cli, model_dir, tmp_path):
    oracle = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokens = 0
    # Every string of the corpus, the random ones and the long runs, each encoded by itself
    # (--batch: one JSON string per line).
    texts = tokenizer_corpus.CORPUS + tokenizer_corpus.random_texts() + tokenizer_corpus.long_runs()
    lines = tmp_path / "corpus.jsonl"
    lines.write_text("".join(json.dumps(t) + "\n" for t in texts), encoding="utf-8")
    r = fp8kit_cli("tokenize", model_dir, "--text", lines, "--batch", "--json")
    assert r.returncode == 0, r.stderr
    results = [json.loads(line) for line in r.stdout.split("\n")[:-1]]
    assert len(results) == len(texts)
    for text, got in zip(texts, results):
        expected = oracle.encode(text)
        assert got["ids"] == expected.ids, repr(text)
        assert got["tokens"] == expected.tokens, repr(text)
        tokens += len(expected.ids)
    joined = tokenizer_corpus.joined_corpus()
    for flags, add_special in (((), True), (("--no-special-tokens",), False)):
        expected = oracle.encode(joined, add_special_tokens=add_special)
        assert encode(fp8kit_cli, model_dir, joined, tmp_path, *flags)["ids"] == expected.ids
        tokens += len(expected.ids)
    print(f"{model_dir.name}: {len(texts) + 2} texts, {tokens} tokens equal")
    return oracle


def check_decoding(fp8kit_cli, model_dir, oracle, lossless):
    joined = tokenizer_corpus.joined_corpus()
    ids = oracle.encode(joined).ids
    for flags, skip in (((), False), (("--skip-special-tokens",), True)):
        text = decode(fp8kit_cli, model_dir, ids, *flags)["text"]
        assert text == oracle.decode(ids, skip_special_tokens=skip)
    if lossless:
        # Byte-level BPE loses nothing, except the whitespace that an added token's lstrip/rstrip eats.
        kept = "\n".join(t for t in tokenizer_corpus.CORPUS if "[MASK]" not in t)
        assert decode(fp8kit_cli, model_dir, oracle.encode(kept, add_special_tokens=False).ids)["text"] == kept
    stream = DecodeStream(skip_special_tokens=False)
    expected_chunks = [stream.step(oracle, i) or "" for i in ids]
    got = decode(fp8kit_cli, model_dir, ids, "--stream")
    assert got["chunks"] == expected_chunks
    assert "".join(got["chunks"]) + got["rest"] == oracle.decode(ids, skip_special_tokens=False)


@pytest.mark.parametrize("family", FAMILIES)
def test_encode_and_decode_match_tokenizers(fp8kit_cli, family_dirs, family, tmp_path):
    oracle = check_corpus(fp8kit_cli, family_dirs[family], tmp_path)
    check_decoding(fp8kit_cli, family_dirs[family], oracle, lossless=family in LOSSLESS)


def test_smollm2_tokenizer_matches_tokenizers(fp8kit_cli, tmp_path):
    model_dir = smollm2_dir()
    if not (model_dir / "tokenizer.json").exists():
        pytest.skip(f"{model_dir}/tokenizer.json is missing: the SmolLM2-135M-Instruct fixture is not cached")
    oracle = check_corpus(fp8kit_cli, model_dir, tmp_path)
    check_decoding(fp8kit_cli, model_dir, oracle, lossless=True)
    # tokenizer_config.json's special tokens reach the CLI's decoding of them.
    assert decode(fp8kit_cli, model_dir, [1, 2])["text"] == oracle.decode([1, 2], skip_special_tokens=False)


def test_invalid_utf8_input_is_refused(fp8kit_cli, family_dirs, tmp_path):
    # Python strings cannot hold invalid UTF-8, so tokenizers never sees it; fp8kit refuses it.
    path = tmp_path / "bad.txt"
    path.write_bytes(b"abc\xff\xfedef")
    r = fp8kit_cli("tokenize", family_dirs["gpt2"], "--text", path)
    assert r.returncode == 1
    assert r.stderr == f"fp8kit: error: {path}: not valid UTF-8 (byte 3 of 8)\n"
