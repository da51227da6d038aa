# Tests of the Python package (python/fp8kit) against the C++ library. ctest's python_bindings
# runs them with FP8KIT_PYTHON_MODULE_DIR (and PYTHONPATH) naming the built package; without it
# (the python_interop run of tests/python) they are not collected.
import os
import subprocess

import pytest

from binding_util import read_safetensors, write_safetensors

if not os.environ.get("FP8KIT_PYTHON_MODULE_DIR"):
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def oracle(tmp_path_factory):
    """oracle(op, inputs, **options): the C++ library's results of `op` (tests/tools/fp8kit_op_oracle.cpp)."""
    tool = os.environ.get("FP8KIT_OP_ORACLE")
    if not tool or not os.path.exists(tool):
        pytest.fail("FP8KIT_OP_ORACLE must name the built fp8kit_op_oracle (run through ctest)")
    root = tmp_path_factory.mktemp("oracle")
    count = [0]

    def run(op, inputs, **options):
        count[0] += 1
        src, dst = root / f"in{count[0]}.safetensors", root / f"out{count[0]}.safetensors"
        write_safetensors(src, inputs)
        args = [f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in options.items()]
        r = subprocess.run([tool, op, str(src), str(dst), *args], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return read_safetensors(dst)

    return run
