#!/usr/bin/env python3
"""PyTorch peer of bench/bench_quant: the same FP8 quantization ops on the same shapes, written the
PyTorch way (vLLM's forward_native style), eager, torch.compile'd and, at decode sizes, replayed from
CUDA graphs; plus a per-token-group Triton kernel written here in the manner of vLLM's. Timed like
bench_quant (events per launch, L2 flushed, inputs rotated, median). Writes JSON for quant_report.py.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback

import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
MIN_SCALING_FACTOR = 1.0 / (FP8_MAX * 512.0)
FLT_MIN = torch.finfo(torch.float32).tiny
GROUP = 128

LARGE = [(8192, 4096), (16384, 8192), (32768, 16384), (2048, 18432)]
DECODE = [(m, k) for m in (1, 16, 64) for k in (4096, 7168, 16384)]
WEIGHT_SHAPES = LARGE[:3]
# torch.compile is slow to build: by default only these shapes get compiled variants.
COMPILE_SUBSET = {(16384, 8192), (2048, 18432), (16, 7168)}

STATED = [
    {
        "kernel": kernel,
        "shape": "2048x18432",
        "us": 160.0,
        "peer": "vLLM Triton per_token_group_quant_fp8",
        "source": "from PERF_TARGETS, not measured here",
    }
    for kernel in ("group128_rowmajor", "group128_colmajor_tma")
]


# ------------------------------------------------------------------------------------------------
# The ops, the PyTorch way. Scales are dequantization multipliers (x ~= q * s), as in fp8kit.
# ------------------------------------------------------------------------------------------------
def quant_static(x, s):
    return (x.to(torch.float32) * s.reciprocal()).clamp(-FP8_MAX, FP8_MAX).to(FP8)


def quant_dynamic_per_tensor(x):
    amax = x.abs().max().unsqueeze(-1).to(torch.float32)
    s = (amax / FP8_MAX).clamp(min=MIN_SCALING_FACTOR)
    q = (x.to(torch.float32) * s.reciprocal()).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, s


def quant_dynamic_per_token(x):
    amax = x.abs().amax(dim=-1, keepdim=True).to(torch.float32)
    s = (amax / FP8_MAX).clamp(min=MIN_SCALING_FACTOR)
    q = (x.to(torch.float32) * s.reciprocal()).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, s


def _group_quant(x, colmajor):
    m, k = x.shape
    xg = x.view(m, k // GROUP, GROUP)
    amax = xg.abs().amax(dim=-1, keepdim=True).to(torch.float32).clamp(min=1e-10)
    s = amax / FP8_MAX
    q = (xg.to(torch.float32) / s).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(m, k)
    s = s.view(m, k // GROUP)
    if colmajor:  # [M, K/128] with strides (1, align(M, 4)): what block GEMMs read through TMA
        out = torch.empty_strided((m, k // GROUP), (1, (m + 3) // 4 * 4), dtype=torch.float32, device=x.device)
        out.copy_(s)
        s = out
    return q, s


def quant_group_rowmajor(x):
    return _group_quant(x, False)


def quant_group_colmajor_tma(x):
    return _group_quant(x, True)


def quant_weight_block(w):
    n, k = w.shape
    wb = w.view(n // 128, 128, k // 128, 128)
    amax = wb.abs().amax(dim=(1, 3), keepdim=True).to(torch.float32)
    s = (amax / FP8_MAX).clamp(min=FLT_MIN)
    q = (wb.to(torch.float32) / s).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(n, k)
    return q, s.view(n // 128, k // 128)


def quant_weight_per_channel(w):
    amax = w.abs().amax(dim=1, keepdim=True).to(torch.float32)
    s = (amax / FP8_MAX).clamp(min=FLT_MIN)
    return (w.to(torch.float32) / s).clamp(-FP8_MAX, FP8_MAX).to(FP8), s


def dequant_block(q, s):
    n, k = q.shape
    w = q.view(n // 128, 128, k // 128, 128).to(torch.float32) * s.view(n // 128, 1, k // 128, 1)
    return w.to(torch.bfloat16).view(n, k)


# ------------------------------------------------------------------------------------------------
# Per-token-group quantization as a Triton kernel in the manner of vLLM's fallback: one program per
# group of 128, one warp, grid = number of groups.
# ------------------------------------------------------------------------------------------------
def make_triton_group_quant():
    import triton
    import triton.language as tl

    @triton.jit
    def group_quant_kernel(x_ptr, q_ptr, s_ptr, k, x_row_stride, s_row_stride, s_group_stride, eps, fp8_max,
                           GROUP_SIZE: tl.constexpr):
        g = tl.program_id(0)
        groups_per_row = k // GROUP_SIZE
        row = g // groups_per_row
        col_group = g % groups_per_row
        cols = tl.arange(0, GROUP_SIZE)
        x = tl.load(x_ptr + row.to(tl.int64) * x_row_stride + col_group * GROUP_SIZE + cols).to(tl.float32)
        s = tl.maximum(tl.max(tl.abs(x)), eps) / fp8_max
        q = tl.clamp(x / s, -fp8_max, fp8_max).to(q_ptr.dtype.element_ty)
        tl.store(q_ptr + g.to(tl.int64) * GROUP_SIZE + cols, q)
        tl.store(s_ptr + row.to(tl.int64) * s_row_stride + col_group * s_group_stride, s)

    def run(x, colmajor):
        m, k = x.shape
        q = torch.empty((m, k), dtype=FP8, device=x.device)
        if colmajor:
            s = torch.empty_strided((m, k // GROUP), (1, (m + 3) // 4 * 4), dtype=torch.float32, device=x.device)
        else:
            s = torch.empty((m, k // GROUP), dtype=torch.float32, device=x.device)
        group_quant_kernel[(m * (k // GROUP),)](x, q, s, k, x.stride(0), s.stride(0), s.stride(1), 1e-10, FP8_MAX,
                                                GROUP_SIZE=GROUP, num_warps=1, num_stages=1)
        return q, s

    return run


# ------------------------------------------------------------------------------------------------
# Timing: as bench_quant and bench_gemm (bench/bench_common.cpp).
# ------------------------------------------------------------------------------------------------
class Timer:
    def __init__(self, flush_mode, target_ms, min_reps, max_reps):
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.l2_bytes = l2
        self.flush_mode = flush_mode
        self.flush_buf = torch.ones(2 * l2 // 4, dtype=torch.float32, device="cuda")
        self.target_ms, self.min_reps, self.max_reps = target_ms, min_reps, max_reps

    def flush(self):
        if self.flush_mode == "read":
            self.flush_buf.sum()  # reads 2x L2; leaves clean lines (no write-back charged to the next kernel)
        else:
            self.flush_buf.zero_()

    def _flushed_runs(self, fn, reps, first):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        stops = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            self.flush()
            starts[i].record()
            fn(first + i)
            stops[i].record()
        torch.cuda.synchronize()
        return [1000.0 * a.elapsed_time(b) for a, b in zip(starts, stops)]

    def time(self, fn, warmup=3):
        for i in range(warmup):
            fn(i)
        torch.cuda.synchronize()
        estimate = statistics.median(self._flushed_runs(fn, 5, 0))
        reps = int(min(max(math.ceil(self.target_ms * 1000.0 / max(estimate, 0.5)), self.min_reps), self.max_reps))
        us = sorted(self._flushed_runs(fn, reps, 5))
        return {
            "median_us": statistics.median(us),
            "min_us": us[0],
            "p90_us": us[min(len(us) - 1, int(0.9 * (len(us) - 1) + 0.5))],
            "reps": reps,
        }

    def back_to_back_us(self, fn, calls=100, trials=5):
        for i in range(3):
            fn(i)
        per_call = []
        for _ in range(trials):
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for c in range(calls):
                fn(c)
            b.record()
            torch.cuda.synchronize()
            per_call.append(1000.0 * a.elapsed_time(b) / calls)
        return statistics.median(per_call)


def graphed(fn, args_per_copy):
    """One CUDA graph per input copy, each replaying fn(*args) (outputs live in the graph's pool)."""
    graphs = []
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for args in args_per_copy:  # warm up outside capture (allocator, compiled code)
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    keep = []
    for args in args_per_copy:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            keep.append(fn(*args))
        graphs.append(g)
    return lambda i: graphs[i % len(graphs)].replay(), keep


# ------------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------------
def random_bf16(m, k, seed):
    """Rows of u * 2^e, u uniform in (-1, 1), e in [-4, 3] per row (as bench_quant's inputs)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    u = torch.rand((m, k), generator=gen, device="cuda", dtype=torch.float32) * 2 - 1
    e = torch.randint(-4, 4, (m, 1), generator=gen, device="cuda").to(torch.float32)
    return (u * torch.exp2(e)).to(torch.bfloat16)


def op_table():
    """kernel key -> (eager callable taking the input x, bytes(m, k), weight op?)"""
    def nbytes(extra_out):
        return lambda m, k: 3.0 * m * k + extra_out(m, k)

    return {
        "static": (None, nbytes(lambda m, k: 4), False),  # bound per shape (needs the scale)
        "dynamic_per_tensor": (quant_dynamic_per_tensor, nbytes(lambda m, k: 4), False),
        "dynamic_per_token": (quant_dynamic_per_token, nbytes(lambda m, k: 4.0 * m), False),
        "group128_rowmajor": (quant_group_rowmajor, nbytes(lambda m, k: 4.0 * m * (k // GROUP)), False),
        "group128_colmajor_tma": (quant_group_colmajor_tma, nbytes(lambda m, k: 4.0 * m * (k // GROUP)), False),
        "weight_block128": (quant_weight_block, nbytes(lambda m, k: 4.0 * (m // 128) * (k // 128)), True),
        "weight_per_channel": (quant_weight_per_channel, nbytes(lambda m, k: 4.0 * m), True),
        "dequant_block128": (None, nbytes(lambda m, k: 4.0 * (m // 128) * (k // 128)), True),
    }


def agree_fraction(a, b):
    """Share of equal FP8 codes between two results (first output), on at most the first 64 rows."""
    qa, qb = a[0] if isinstance(a, tuple) else a, b[0] if isinstance(b, tuple) else b
    qa, qb = qa[:64].reshape(-1).view(torch.uint8), qb[:64].reshape(-1).view(torch.uint8)
    return float((qa == qb).float().mean().item())


def run(args):
    timer = Timer(args.flush, args.target_ms, 20, args.max_reps)
    results = {
        "benchmark": "quant_torch",
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": {"name": torch.cuda.get_device_name(0), "l2_bytes": timer.l2_bytes,
                   "sm_count": torch.cuda.get_device_properties(0).multi_processor_count},
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "method": {"flush": args.flush, "target_ms": args.target_ms, "max_reps": args.max_reps,
                   "compile": args.compile, "statistic": "median of per-launch CUDA event times"},
        "stated_references": STATED,
        "notes": [],
        "cases": [],
    }
    try:
        import triton
        results["triton"] = triton.__version__
        triton_group = make_triton_group_quant()
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        triton_group = None
        results["notes"].append(f"triton unavailable: {e!r}")

    try:  # small graphs: one compile thread avoids starting a worker pool
        # `from` imports: a plain `import torch._dynamo` here would make `torch` a local name.
        from torch._dynamo import config as dynamo_config
        from torch._inductor import config as inductor_config
        inductor_config.compile_threads = 1
        limit = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
        setattr(dynamo_config, limit, 64)  # one compile per shape and function
    except Exception as e:  # noqa: BLE001
        results["notes"].append(f"inductor config: {e!r}")

    # The copy ceiling, timed the same way: 1 GiB device to device, read + write.
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    t = timer.time(lambda i: dst.copy_(src))
    results["copy"] = dict(t, what="torch copy_ 1 GiB D2D", bytes=2.0 * (1 << 30),
                           gbps=2.0 * (1 << 30) / (t["median_us"] * 1e3))
    print(f"copy ceiling (torch copy_): {results['copy']['gbps']:.0f} GB/s", flush=True)
    del src, dst

    table = op_table()
    compiled = {}

    def compiled_fn(key, fn):
        if key not in compiled:
            compiled[key] = torch.compile(fn, dynamic=False, fullgraph=True)
        return compiled[key]

    for m, k in LARGE + DECODE:
        decode = (m, k) in DECODE
        shape = f"{m}x{k}"
        copies = int(min(max(math.ceil(2.0 * timer.l2_bytes / (2.0 * m * k)), 1), 8))
        x0 = random_bf16(m, k, 1234 + m * 31 + k)
        xs = [x0] + [x0.clone() for _ in range(copies - 1)]
        for key, (fn, nbytes_of, weight_op) in table.items():
            if weight_op and (m, k) not in WEIGHT_SHAPES:
                continue
            if args.filter and args.filter not in f"{key} {shape}":
                continue
            # Per-copy argument tuples and the function of them.
            if key == "static":
                s = (x0.abs().max().to(torch.float32) / FP8_MAX).reshape(())
                fn_args, call = [(x, s) for x in xs], quant_static
            elif key == "dequant_block128":
                fn_args, call = [quant_weight_block(x) for x in xs], dequant_block
            else:
                fn_args, call = [(x,) for x in xs], fn
            variants = [("eager", call)]
            want_compile = args.compile == "all" or (args.compile == "subset" and (m, k) in COMPILE_SUBSET)
            if want_compile:
                variants.append(("compiled", compiled_fn(key, call)))
            if triton_group is not None and key.startswith("group128"):
                colmajor = key == "group128_colmajor_tma"
                variants.append(("triton_vllm_style", lambda x, c=colmajor: triton_group(x, c)))
            reference = None
            for variant, f in variants:
                case = {"kernel": key, "shape": shape, "m": m, "k": k, "decode": decode, "variant": variant,
                        "input_copies": copies, "bytes": nbytes_of(m, k)}
                try:
                    t0 = time.perf_counter()
                    out = f(*fn_args[0])
                    torch.cuda.synchronize()
                    case["first_call_s"] = time.perf_counter() - t0  # compile time for compiled variants
                    if reference is None:
                        reference = out
                    elif key != "dequant_block128":
                        case["agree_with_eager"] = agree_fraction(out, reference)
                    del out
                    launch = lambda i, f=f: f(*fn_args[i % copies])  # noqa: E731
                    case.update(timer.time(launch))
                    case["gbps"] = case["bytes"] / (case["median_us"] * 1e3)
                    if decode:
                        case["b2b_us"] = timer.back_to_back_us(launch)
                    print(f"  {key:<22} {shape:>12} {variant:<18} {case['median_us']:>10.2f} us "
                          f"{case['gbps']:>6.0f} GB/s", flush=True)
                except Exception as e:  # noqa: BLE001 - a failing variant is reported, not fatal
                    case["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                    if args.verbose:
                        traceback.print_exc()
                    print(f"  {key:<22} {shape:>12} {variant:<18} error: {case['error']}", flush=True)
                results["cases"].append(case)
                # At decode sizes eager and compiled are host-bound: their graph replays give the GPU time.
                if decode and "error" not in case and variant in ("eager", "compiled"):
                    gcase = dict(case, variant=variant + "_graph")
                    for field in ("median_us", "min_us", "p90_us", "reps", "gbps", "b2b_us", "first_call_s",
                                  "agree_with_eager"):
                        gcase.pop(field, None)
                    try:
                        replay, keep = graphed(f, fn_args)
                        gcase.update(timer.time(replay))
                        gcase["gbps"] = gcase["bytes"] / (gcase["median_us"] * 1e3)
                        del keep, replay
                        print(f"  {key:<22} {shape:>12} {gcase['variant']:<18} {gcase['median_us']:>10.2f} us",
                              flush=True)
                    except Exception as e:  # noqa: BLE001
                        gcase["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                        print(f"  {key:<22} {shape:>12} {gcase['variant']:<18} error: {gcase['error']}", flush=True)
                    results["cases"].append(gcase)
            del reference
        del xs, x0
        torch.cuda.empty_cache()
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_dir = os.environ.get("FP8KIT_RESULTS_DIR") or "gpu-results"
    p.add_argument("--json", "--out", dest="json", default=os.path.join(default_dir, "quant_torch.json"),
                   help="where the JSON goes (default: $FP8KIT_RESULTS_DIR or ./gpu-results, quant_torch.json)")
    p.add_argument("--flush", choices=("read", "write"), default="read")
    p.add_argument("--compile", choices=("none", "subset", "all"), default="subset")
    p.add_argument("--target-ms", type=float, default=50.0)
    p.add_argument("--max-reps", type=int, default=1000)
    p.add_argument("--filter", default="")
    p.add_argument("--quick", action="store_true", help="10 ms per case, at most 200 launches")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.target_ms, args.max_reps = 10.0, 200
    if not torch.cuda.is_available():
        print("quant_torch: no CUDA device: skipped")
        return 77
    start = time.perf_counter()
    results = run(args)
    results["wall_s"] = time.perf_counter() - start
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
    for ref in STATED:
        print(f"stated reference: {ref['peer']} {ref['shape']}: {ref['us']:.0f} us ({ref['source']})")
    print(f"wrote {args.json} ({results['wall_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
