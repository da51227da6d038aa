#!/usr/bin/env bash
# The install test (ctest: install_consumer): installs the build tree BUILD into a fresh prefix
# under WORK, then builds tests/install/consumer against that prefix alone, three ways, and runs
# each program:
#   find_package(fp8kit): consumer_shared (fp8kit::fp8kit = libfp8kit.so) and consumer_static
#   (libfp8kit.a, plus every public header in one translation unit);
#   pkg-config: `pkg-config --cflags --libs fp8kit`.
# Also checks the installed tree (no private header, the CLI's --version).
# Usage: run_install_test.sh BUILD WORK WITH_CUDA(ON|OFF) [compiler launcher]
set -euo pipefail
build=$1 work=$2 with_cuda=$3 launcher=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"

cmake --install "$build" --prefix "$prefix" > "$work/install.log"

# The installed headers name only installed headers and nlohmann/json.hpp or json_fwd.hpp among
# non-standard ones.
bad=$(grep -rhoE '#include [<"][^>"]+[>"]' "$prefix/include/fp8kit" | sed -E 's/#include [<"]([^>"]+)[>"]/\1/' |
      sort -u | while read -r h; do
        case "$h" in
          fp8kit/*) [ -f "$prefix/include/$h" ] || echo "$h" ;;
          nlohmann/json.hpp | nlohmann/json_fwd.hpp) ;;
          */*|*.h|*.hpp|*.cuh) echo "$h" ;;
        esac
      done)
if [ -n "$bad" ]; then
  echo "install test: installed headers include headers outside the package: $bad" >&2
  exit 1
fi
[ -f "$prefix/include/fp8kit/version.h" ] || { echo "install test: no fp8kit/version.h" >&2; exit 1; }
version=$("$prefix/bin/fp8kit" --version)
echo "installed CLI: $version"

cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DFP8KIT_EXPECT_CUDA="$with_cuda")
[ -n "$launcher" ] && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
cmake -S "$here/consumer" -B "$work/consumer" "${cmake_args[@]}" > "$work/configure.log" ||
  { cat "$work/configure.log" >&2; exit 1; }
grep 'consumer: fp8kit' "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log" || { cat "$work/build.log" >&2; exit 1; }

"$work/consumer/consumer_shared"
"$work/consumer/consumer_static"
ldd "$work/consumer/consumer_shared" > "$work/ldd_shared.txt"
ldd "$work/consumer/consumer_static" > "$work/ldd_static.txt"
grep -q "$prefix/lib/libfp8kit.so" "$work/ldd_shared.txt" ||
  { echo "install test: consumer_shared does not load the installed libfp8kit.so" >&2; exit 1; }
if grep -q libfp8kit "$work/ldd_static.txt"; then
  echo "install test: consumer_static loads libfp8kit.so" >&2; exit 1
fi

# pkg-config, as a Makefile would use it (the run path to find libfp8kit.so in the prefix).
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pc_version=$(pkg-config --modversion fp8kit)
[ "fp8kit $pc_version" = "$version" ] || { echo "install test: fp8kit.pc says $pc_version, the CLI $version" >&2; exit 1; }
${CXX:-c++} -std=c++20 -O1 -DFP8KIT_EXPECT_CUDA=$([ "$with_cuda" = ON ] && echo 1 || echo 0) \
  "$here/consumer/main.cpp" -o "$work/consumer_pkgconfig" $(pkg-config --cflags --libs fp8kit) -Wl,-rpath,"$prefix/lib"
"$work/consumer_pkgconfig"
echo "install test: ok"
