#!/usr/bin/env python3
"""PyTorch peer of bench/bench_attention: torch.nn.functional.scaled_dot_product_attention on the
same shapes (32 query heads, 8 KV heads, head size 128, GQA through enable_gqa) over the same cache
dequantized to bf16 and laid out densely ([batch, kv_heads, len, head_size]: SDPA reads no block
table). Decode: one query per sequence; prefill: causal (bottom-right aligned for a chunk over
cached context, torch.nn.attention.bias.causal_lower_right). Timed like bench_attention (events per
launch, L2 flushed by a read of twice its size, median). Writes JSON next to bench_attention's.
"""

import argparse
import json
import os
import statistics
import traceback

import torch
import torch.nn.functional as F

HEADS, KV_HEADS, HEAD_SIZE = 32, 8, 128


def cases(quick):
    out = []
    for ctx in (1024, 2048, 4096, 8192, 16384):
        if quick and ctx != 4096:
            continue
        out.append(("decode", max(131072 // ctx, 1), 1, ctx - 1))
    out.append(("decode", 1, 1, 16383))
    out.append(("prefill", 4, 2048, 0))
    if not quick:
        out.append(("prefill", 2, 4096, 0))
    out.append(("prefill", 4, 2048, 6144))
    return out


def time_us(fn, flush, target_ms=25.0, min_reps=10, max_reps=500):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    torch.cuda.synchronize()
    reps = int(min(max(target_ms / max(start.elapsed_time(stop), 1e-3), min_reps), max_reps))
    times = []
    for _ in range(reps):
        flush()
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times), reps


def run_case(kind, batch, q_len, ctx, flush):
    length = ctx + q_len
    gen = torch.Generator(device="cuda").manual_seed(length + batch)
    q = torch.randn(batch, HEADS, q_len, HEAD_SIZE, device="cuda", dtype=torch.bfloat16, generator=gen)
    k = torch.randn(batch, KV_HEADS, length, HEAD_SIZE, device="cuda", dtype=torch.bfloat16, generator=gen)
    v = torch.randn(batch, KV_HEADS, length, HEAD_SIZE, device="cuda", dtype=torch.bfloat16, generator=gen)
    mask = None
    causal = kind == "prefill"
    if causal and ctx > 0:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(q_len, length)
        causal = False

    def call():
        if mask is not None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)

    out = call()
    assert torch.isfinite(out).all(), "non-finite output"
    us, reps = time_us(call, flush)
    kv_bytes = 2.0 * batch * length * KV_HEADS * HEAD_SIZE * 2
    visible = sum(ctx + i + 1 for i in range(q_len))
    flops = 4.0 * HEADS * HEAD_SIZE * visible * batch
    return {"kind": kind, "batch": batch, "q_len": q_len, "ctx": ctx, "median_us": us, "reps": reps,
            "kv_bytes_bf16": kv_bytes, "kv_gbps": kv_bytes / (us * 1e3), "tflops": flops / (us * 1e6)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("FP8KIT_RESULTS_DIR", "gpu-results"),
                                                  "attention_torch.json"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    l2 = torch.empty(2 * props.L2_cache_size, dtype=torch.uint8, device="cuda")

    def flush():  # reads every line of twice the L2
        l2.sum(dtype=torch.int64)

    results = []
    print(f"attention_torch on {props.name}, torch {torch.__version__}")
    print("| kind | batch | q_len | context | us | bf16 KV GB/s | TFLOP/s |\n|---|---|---|---|---|---|---|")
    for kind, batch, q_len, ctx in cases(args.quick):
        try:
            r = run_case(kind, batch, q_len, ctx, flush)
            print(f"| {kind} | {batch} | {q_len} | {ctx} | {r['median_us']:.1f} | {r['kv_gbps']:.0f} | "
                  f"{r['tflops']:.1f} |", flush=True)
        except Exception as e:  # recorded, the other cases still run
            traceback.print_exc()
            r = {"kind": kind, "batch": batch, "q_len": q_len, "ctx": ctx, "error": str(e)}
        results.append(r)
        torch.cuda.empty_cache()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"peer": "torch.nn.functional.scaled_dot_product_attention", "torch": torch.__version__,
                   "device": props.name, "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
