# Fixtures of the interop suite: the fp8kit binaries under test (paths from ctest's environment).
import os
import subprocess

import pytest

# Before numpy loads: the reference forward's many small matrix products run faster on one BLAS thread
# than on threads that share the machine's two cores with everything else.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _binary(var):
    path = os.environ.get(var)
    if not path or not os.path.exists(path):
        pytest.fail(f"{var} must name the built binary (run through ctest)")
    return path


@pytest.fixture(scope="session")
def testtool():
    path = _binary("FP8KIT_TESTTOOL")
    return lambda *args: subprocess.run([path, *map(str, args)], check=True, capture_output=True, text=True)


@pytest.fixture(scope="session")
def fp8kit_cli():
    path = _binary("FP8KIT_CLI")
    return lambda *args: subprocess.run([path, *map(str, args)], capture_output=True, text=True)
