#!/usr/bin/env bash
# The CPU benchmark peer, benchmark-only (never an fp8kit dependency): a venv .venv-bench/ with
# llama-cpp-python built from source by pip (CPU, GGML_NATIVE: the instructions of the machine it builds on), gguf
# and tokenizers; then the SmolLM2 fixture's BF16 weights as GGUF BF16 and Q8_0 files next to the
# fixture, and a chat answer from each as the check that llama.cpp loads them. The build took 41.5 min
# on the 2-core machine shared at load 11-14 (12.3 CPU-minutes; bench/peers/README.md).
# Then: .venv-bench/bin/python bench/peers/llama_cpp_bench.py
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv-bench
cache="${FP8KIT_CACHE_DIR:-$HOME/.cache/fp8kit}"
packages=(llama-cpp-python==0.3.36 gguf==0.19.0 tokenizers==0.23.3 numpy==2.4.6 ml_dtypes==0.6.0 safetensors==0.8.0)

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import llama_cpp, gguf, tokenizers, safetensors, ml_dtypes" 2>/dev/null; then
  echo "setup_llama_cpp: building llama-cpp-python from source (CPU, GGML_NATIVE=ON, 2 jobs)"
  start=$(date +%s)
  CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_BLAS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL=2 \
    "$venv/bin/pip" install -q --disable-pip-version-check --no-binary llama-cpp-python "${packages[@]}"
  echo "setup_llama_cpp: installed in $(( $(date +%s) - start )) s"
fi

model_dir=$("$venv/bin/python" tests/fixtures/fetch_smollm2.py)
out="$cache/smollm2-135m-instruct-gguf"
mkdir -p "$out"
for kind in bf16 q8_0; do
  file="$out/smollm2-135m-instruct-$kind.gguf"
  if [ ! -f "$file" ]; then
    "$venv/bin/python" bench/peers/hf_to_gguf.py "$model_dir" "$cache/downloads/SmolLM2-135M-Instruct.Q4_1.gguf" \
      "$file" "$kind" >/dev/null
  fi
  echo "setup_llama_cpp: $file"
done
"$venv/bin/python" bench/peers/llama_cpp_bench.py --check-only
