#!/usr/bin/env bash
# The wheel test (ctest: python_wheel, label wheel; scripts/test runs it): `pip wheel .` of the
# source tree SRC as a user runs it (the CPU build of pyproject.toml: fmt header-only, every
# library static inside the extension), then
#   - auditwheel show: the wheel needs no shared library outside a manylinux policy;
#   - the wheel installed into a fresh directory runs the bindings' test suite
#     (tests/python/bindings) from there.
# Prints the wall and CPU time the wheel took. Usage: run_wheel_test.sh SRC WORK PYTHON [compiler launcher]
set -euo pipefail
src=$1 work=$2 py=$3 launcher=${4:-}
rm -rf "$work"
mkdir -p "$work"

args=(-C build-dir="$work/build")
[ -n "$launcher" ] && args+=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER="$launcher")
# bash's time: wall and the CPU of every compiler process (what 2 cores of CI spend on it).
TIMEFORMAT="wheel test: built in %R s (CPU: %U s user + %S s system)"
time if ! "$py" -m pip wheel "$src" --no-deps --no-build-isolation --disable-pip-version-check -w "$work/dist" \
          "${args[@]}" > "$work/pip.log" 2>&1; then
  tail -40 "$work/pip.log" >&2
  exit 1
fi
wheel=$(ls "$work"/dist/fp8kit-*.whl)
echo "wheel test: $(basename "$wheel")"

"$py" -m auditwheel show "$wheel" > "$work/auditwheel.txt"
cat "$work/auditwheel.txt"
# auditwheel wraps its lines: match on the text joined into one line.
if ! tr '\n' ' ' < "$work/auditwheel.txt" |
     grep -qE 'consistent with the +following platform tag: +"manylinux_[0-9]+_[0-9]+_x86_64"'; then
  echo "wheel test: the wheel is not manylinux-compatible" >&2
  exit 1
fi
if grep -qiE 'libfmt|libpcre2|libutf8proc|libcudart|libcublas' "$work/auditwheel.txt"; then
  echo "wheel test: the wheel depends on a shared library it should hold" >&2
  exit 1
fi

"$py" -m pip install --no-deps --disable-pip-version-check -q --target "$work/site" "$wheel"
cd "$work"  # not a directory with a fp8kit package of its own (ctest runs tests in build/python)
PYTHONPATH="$work/site" "$py" -c "
import fp8kit, sys
assert fp8kit.__file__.startswith('$work/site'), fp8kit.__file__
assert not fp8kit.cuda_built()
print('wheel test: fp8kit', fp8kit.__version__, 'from', fp8kit.__file__)"
FP8KIT_PYTHON_MODULE_DIR="$work/site" PYTHONPATH="$work/site" "$py" -m pytest -q -p no:cacheprovider "$src/tests/python/bindings"
echo "wheel test: ok"
