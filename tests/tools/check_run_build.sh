#!/usr/bin/env bash
# scripts/run stays quick (ctest: run_script_builds_only_the_cli, label cpu): it builds the fp8kit
# tool alone on the CPU backend (no CUDA object, no test or benchmark, configured with CUDA, tests
# and benchmarks off), and no script needs ccache.
# Usage: check_run_build.sh REPO_ROOT SCRATCH_BUILD_DIR
set -euo pipefail
root=$(cd "$1" && pwd)
build=$2
rm -rf "$build"
commands=$(FP8KIT_RUN_BUILD_DIR="$build" "$root/scripts/run" --dry-run)
compiles=$(grep -E -- " -c [^ ]+\.(cpp|cxx|cu)\b" <<<"$commands" || true)  # .cxx: the CLI's unity file
fail=0
if grep -Eq -- "nvcc| -c [^ ]+\.cu\b" <<<"$commands"; then
  echo "scripts/run compiles CUDA code:"; grep -E -- "nvcc| -c [^ ]+\.cu\b" <<<"$commands" | head -3; fail=1
fi
if grep -Eq -- " -c $root/(tests|bench|fuzz)/" <<<"$compiles"; then
  echo "scripts/run builds tests or benchmarks:"; grep -E -- " -c $root/(tests|bench|fuzz)/" <<<"$compiles" | head -3; fail=1
fi
if ! tail -1 <<<"$commands" | grep -q -- "-o fp8kit "; then
  echo "scripts/run does not end by linking the fp8kit tool:"; tail -1 <<<"$commands" | cut -c1-200; fail=1
fi
for option in FP8KIT_CUDA FP8KIT_TESTS FP8KIT_BENCH; do  # tests and benchmarks need more packages to configure
  if ! grep -Eq "^$option:[A-Z]+=OFF$" "$build/CMakeCache.txt"; then
    echo "scripts/run configures with $(grep -E "^$option:" "$build/CMakeCache.txt" || echo "$option unset")"; fail=1
  fi
done
if grep -l ccache "$root"/scripts/*; then
  echo "the scripts above name ccache: a fresh machine has none"; fail=1
fi
rm -rf "$build"
[ $fail -eq 0 ] && echo "scripts/run runs the compiler $(grep -c . <<<"$compiles") times and links fp8kit"
exit $fail
