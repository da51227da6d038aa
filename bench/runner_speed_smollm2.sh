#!/bin/sh
# The model runner's CPU speed and memory on the real-model fixture: SmolLM2-135M-Instruct
# (scripts/fetch-smollm2) as BF16, quantized by `fp8kit quantize` per tensor and in 64x64 blocks,
# and quantized online, each through bench_runner (prompt and decode tokens/s, medians of RUNS
# after an untimed run; peak RSS against the resident weights + the KV pool), one after the other,
# with `uptime` before and after each. docs/PERFORMANCE.md, "Model runner (CPU reference path)".
# Usage: bench/runner_speed_smollm2.sh BUILD_DIR OUT_DIR [PROMPT DECODE RUNS]   (writes OUT_DIR/*.json)
set -eu
build=$1
out=$2
prompt=${3:-64}
decode=${4:-16}
runs=${5:-3}
model=${FP8KIT_CACHE_DIR:-$HOME/.cache/fp8kit}/smollm2-135m-instruct
mkdir -p "$out"
[ -d "$out/per-tensor" ] || "$build/fp8kit" quantize "$model" "$out/per-tensor" --scheme per-tensor -q
[ -d "$out/block-64x64" ] || "$build/fp8kit" quantize "$model" "$out/block-64x64" --scheme block --block 64,64 -q
run() {  # NAME MODEL ARGS...: one bench_runner process, its JSON, the uptime before and after it
  name=$1
  shift
  echo "$name: $(uptime)" >> "$out/uptime.txt"
  "$build/bench/bench_runner" "$@" --prompt "$prompt" --decode "$decode" --runs "$runs" > "$out/$name.json.partial"
  mv "$out/$name.json.partial" "$out/$name.json"
  echo "$name done: $(uptime)" >> "$out/uptime.txt"
}
run bf16 "$model"
run per-tensor "$out/per-tensor"
run block-64x64 "$out/block-64x64"
run online "$model" --quantization fp8
