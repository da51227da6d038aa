#!/bin/sh
# The model runner's accuracy on the real-model fixture: SmolLM2-135M-Instruct (scripts/fetch-smollm2)
# quantized by fp8kit with each scheme (and online) and evaluated with `fp8kit eval` against the BF16
# checkpoint over tests/fixtures/eval_text_sqlite_docs.txt at ctx 512 (every window; one BF16 pass
# serves the models of a line), plus the BF16 perplexity scored as tests/fixtures/README.md's
# transformers figure is (every token but a window's first).
# Usage: bench/runner_eval_smollm2.sh BUILD_DIR OUT_DIR   (writes OUT_DIR/*.json; hours on 2 cores)
set -eu
build=$1
out=$2
model=${FP8KIT_CACHE_DIR:-$HOME/.cache/fp8kit}/smollm2-135m-instruct
text=$(dirname "$0")/../tests/fixtures/eval_text_sqlite_docs.txt
fp8kit="$build/fp8kit"
mkdir -p "$out"
[ -d "$out/per-tensor" ] || "$fp8kit" quantize "$model" "$out/per-tensor" --scheme per-tensor -q
[ -d "$out/block-64x64" ] || "$fp8kit" quantize "$model" "$out/block-64x64" --scheme block --block 64,64 -q
run() {  # NAME ARGS...: one eval (JSON lines), the machine load before and after it
  name=$1
  shift
  [ -s "$out/$name.json" ] && return 0
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  "$fp8kit" eval "$@" --text "$text" --ctx 512 --json > "$out/$name.json.partial"
  echo "{\"load_before\": \"$load_before\", \"load_after\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"args\": \"$*\"}" \
    > "$out/$name.load.json"
  mv "$out/$name.json.partial" "$out/$name.json"
}
run bf16-first0 "$model" --first 0
# per-tensor, block 64x64 and the BF16 checkpoint quantized online, against BF16
run schemes "$out/per-tensor" "$out/block-64x64" "$model" --quantization fp8 --base "$model"
# the FP8 KV cache (scales 1.0: fp8kit quantize writes none) on BF16 and on per-tensor weights
run kv-fp8 "$model" "$out/per-tensor" --kv-cache-dtype fp8 --base "$model"
