#!/usr/bin/env bash
# The fast CPU backend side by side with its floors and llama.cpp, in one run on the same threads:
#   1. kernels: bench_cpu_gemm --quick (decode GEMV GB/s against the read bandwidth of the same
#      bytes, prefill GEMM GFLOP/s against the f32 FMA peak, both measured in the same run);
#   2. end to end on SmolLM2-135M-Instruct (the fixture's BF16 checkpoint, quantized here per
#      tensor and in 64x64 blocks by `fp8kit quantize`): bench_engine_cpu's pp512 / tg128 tok/s
#      (llama-bench's definitions) with the decode floor (bytes touched per token / read bandwidth);
#   3. llama.cpp Q8_0 and BF16 on the same model and threads (bench/peers/llama_cpp_bench.py
#      --speed-only, in its benchmark-only venv);
#   4. the ratios. Every figure carries the load average it was measured at.
# Usage: bench/cpu_end_to_end.sh [BUILD_DIR (build-cpu)]
#   THREADS (2), RUNS (3), PEER_PYTHON (.venv-bench/bin/python: bench/peers/setup_llama_cpp.sh),
#   OUT (a new temporary directory: the JSON of each part), SKIP_KERNELS=1 (only steps 2-4).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-cpu}
threads=${THREADS:-2}
runs=${RUNS:-3}
peer_python=${PEER_PYTHON:-$root/.venv-bench/bin/python}
cache=${FP8KIT_CACHE_DIR:-$HOME/.cache/fp8kit}
model=$cache/smollm2-135m-instruct
out=${OUT:-$(mktemp -d /tmp/fp8kit-cpu-e2e.XXXXXX)}
mkdir -p "$out"

for f in "$build/fp8kit" "$build/bench/bench_engine_cpu" "$build/bench/bench_cpu_gemm"; do
  [[ -x $f ]] || { echo "cpu_end_to_end: no $f (build with -DFP8KIT_CUDA=OFF first)" >&2; exit 1; }
done
[[ -f $model/model.safetensors ]] || { echo "cpu_end_to_end: no $model: run scripts/fetch-smollm2" >&2; exit 1; }
[[ -x $peer_python ]] || { echo "cpu_end_to_end: no $peer_python: run bench/peers/setup_llama_cpp.sh" >&2; exit 1; }

export FP8KIT_NUM_THREADS=$threads
echo "# fp8kit CPU end to end, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$root" rev-parse --short HEAD)," \
  "$threads threads, nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# start: $(uptime)"

if [[ ${SKIP_KERNELS:-0} != 1 ]]; then
  "$build/bench/bench_cpu_gemm" --threads "$threads" --quick | tee "$out/kernels.md"
  echo "# after the kernels: $(uptime)"
fi

for scheme in per-tensor block; do
  if [[ ! -f $out/$scheme/config.json ]]; then
    extra=()
    [[ $scheme == block ]] && extra=(--block 64,64)  # 576 features are not a multiple of 128
    "$build/fp8kit" quantize "$model" "$out/$scheme" --scheme "$scheme" "${extra[@]}" -q --force
  fi
done

# fp8kit and llama.cpp alternate (fp8kit FP8 schemes, llama.cpp, fp8kit BF16) so that a change of
# the machine's load during the run shows in both.
for scheme in per-tensor block; do
  "$build/bench/bench_engine_cpu" "$out/$scheme" --threads "$threads" --runs "$runs" | tee "$out/fp8kit-$scheme.json"
done
"$peer_python" "$root/bench/peers/llama_cpp_bench.py" --speed-only --runs "$runs" --threads "$threads" \
  --out "$out/llama_cpp.json" > "$out/llama_cpp.log"
echo "# llama.cpp done: $(uptime)"
"$build/bench/bench_engine_cpu" "$model" --threads "$threads" --runs "$runs" | tee "$out/fp8kit-bf16.json"
echo "# end: $(uptime)"

"$peer_python" - "$out" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
peer = json.loads((out / "llama_cpp.json").read_text())
q8, bf16 = peer["speed"]["q8_0"], peer["speed"]["bf16"]
print(f"\nllama.cpp {peer['machine']['llama_cpp_python']}: load {peer['machine']['loadavg_1_5_15']} -> "
      f"{peer['machine']['loadavg_after']}")
print("| model | pp512 tok/s | tg128 tok/s | pp / llama Q8_0 | tg / llama Q8_0 | tg / llama BF16 | "
      "bytes / token MB | read GB/s | floor tok/s | tg / floor | load |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for name in ("per-tensor", "block", "bf16"):
    r = json.loads((out / f"fp8kit-{name}.json").read_text())
    label = {"per-tensor": "fp8kit FP8 per-tensor", "block": "fp8kit FP8 block 64x64", "bf16": "fp8kit BF16"}[name]
    print(f"| {label} | {r['pp_tok_s']:.1f} | {r['tg_tok_s']:.1f} | {r['pp_tok_s'] / q8['pp512_tok_s']:.2f} | "
          f"{r['tg_tok_s'] / q8['tg128_tok_s']:.2f} | {r['tg_tok_s'] / bf16['tg128_tok_s']:.2f} | "
          f"{r['bytes_per_token'] / 1e6:.1f} | {r['read_gbs']:.2f} | {r['floor_tok_s']:.1f} | "
          f"{r['tg_tok_s'] / r['floor_tok_s']:.2f} | {r['load_before']} -> {r['load_after']} |")
for kind, s in (("Q8_0", q8), ("BF16", bf16)):
    print(f"| llama.cpp {kind} | {s['pp512_tok_s']:.1f} | {s['tg128_tok_s']:.1f} | | | | | | | | |")
EOF
echo "# JSON of every part: $out"
