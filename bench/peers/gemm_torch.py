#!/usr/bin/env python3
"""PyTorch peer of bench/bench_gemm: torch._scaled_mm per-tensor and rowwise (what vLLM falls back
to, no fast accumulation), torch's cuBLASLt block-scaled mode, a Triton block-scaled GEMM written
here in the manner of vLLM's w8a8_block_fp8_matmul (default config), and torch.matmul in BF16, on
the same shape grid, timed like bench_gemm (events per launch, L2 flushed, inputs rotated, median;
CUDA-graph replays too at decode sizes). Writes JSON for bench/gemm_report.py."""

import argparse
import json
import math
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm_stated  # noqa: E402
from quant_torch import Timer, graphed, random_bf16  # noqa: E402  (same timing as bench_quant's peer)

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
BLOCK = 128
E4M3_RMS = 107.24  # RMS of a code drawn as random_e4m3 draws them
FP8_PEAK_TFLOPS, BF16_PEAK_TFLOPS = 1979.0, 989.5

SHAPES = [("llama3-8b", 6144, 4096), ("llama3-8b", 4096, 4096), ("llama3-8b", 28672, 4096),
          ("llama3-8b", 4096, 14336), ("llama3-70b", 8192, 8192), ("llama3-70b", 57344, 8192),
          ("llama3-70b", 8192, 28672), ("deepseek-v3", 24576, 7168), ("deepseek-v3", 7168, 18432),
          ("deepseek-v3", 2112, 7168), ("deepseek-v3", 7168, 2048)]
MS = [1, 16, 64, 128, 512, 2048, 8192]
DECODE_MAX_M = 16

# (scaling key shared with bench_gemm, variant): what each variant calls.
VARIANTS = {
    "scaled_mm": ("per_tensor", "torch._scaled_mm, 0-dim f32 scales, bf16 out, use_fast_accum=False"),
    "scaled_mm_fast_accum": ("per_tensor", "torch._scaled_mm, 0-dim scales, use_fast_accum=True (info)"),
    "scaled_mm_rowwise": ("per_token_channel", "torch._scaled_mm, scale_a [M,1], scale_b [1,N], bf16 out"),
    "scaled_mm_block": ("block", "torch scaled_mm BlockWise1x128 x BlockWise128x128 (cuBLASLt), M padded to 4"),
    "triton_block": ("block", "Triton block GEMM like vLLM's w8a8_block_fp8_matmul, its default config"),
    "matmul": ("bf16", "torch.matmul(x, w.t()) bf16"),
}


def random_e4m3(rows, cols, gen):
    """Uniform random e4m3fn codes without zeros (-> +-2^-6) or NaN (-> +-448), as bench_gemm's."""
    c = torch.empty((rows, cols), dtype=torch.uint8, device="cuda").random_(generator=gen)  # [0, 255]
    low = c & 0x7F
    c = torch.where(low == 0, c | 0x08, c)
    c = torch.where(low == 0x7F, c ^ 0x01, c)
    return c.view(FP8)


def random_scales(shape, base, gen):
    return base * (0.5 + torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32))


def group_quant(x):
    """1 x 128 groups: codes and row-major f32 dequantization scales [M, K/128] (vLLM's rule)."""
    m, k = x.shape
    xg = x.view(m, k // BLOCK, BLOCK).to(torch.float32)
    s = xg.abs().amax(dim=-1, keepdim=True).clamp(min=1e-10) / FP8_MAX
    q = (xg / s).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(m, k)
    return q, s.view(m, k // BLOCK).contiguous()


def column_major(s, rows=None):
    """[R, C] f32 as a column-major view (strides (1, R)), R padded to `rows` with ones."""
    r, c = s.shape
    rows = rows or r
    out = torch.ones((c, rows), dtype=s.dtype, device=s.device)
    out[:, :r] = s.t()
    return out.t()


# ------------------------------------------------------------------------------------------------
# Block-scaled GEMM in Triton, written in the manner of vLLM's w8a8_block_fp8_matmul: one program
# per BLOCK_M x BLOCK_N output tile (grouped launch order), one 128-wide K step per iteration, the
# tile's partial product promoted to f32 with its activation and weight scales each step.
# ------------------------------------------------------------------------------------------------
def make_triton_block_gemm():
    import triton
    import triton.language as tl

    @triton.jit
    def block_gemm_kernel(a_ptr, w_ptr, y_ptr, sa_ptr, sw_ptr, M, N, K,
                          sa_stride_m, sa_stride_k, sw_stride_n, sw_stride_k,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                          SCALE_BN: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        per_group = GROUP_M * tiles_n
        first_m = (pid // per_group) * GROUP_M
        group_rows = min(tiles_m - first_m, GROUP_M)  # as Triton's matmul tutorial
        tile_m = first_m + (pid % group_rows)
        tile_n = (pid % per_group) // group_rows

        rows = (tile_m * BM + tl.arange(0, BM)) % M
        cols = (tile_n * BN + tl.arange(0, BN)) % N
        ks = tl.arange(0, BK)
        a_tile = a_ptr + rows[:, None].to(tl.int64) * K + ks[None, :]
        w_tile = w_ptr + cols[None, :].to(tl.int64) * K + ks[:, None]  # [BK, BN] view of w [N, K]
        sa_row = sa_ptr + rows * sa_stride_m
        sw_col = sw_ptr + (cols // SCALE_BN) * sw_stride_n
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in range(0, tl.cdiv(K, BK)):
            left = K - kb * BK
            a = tl.load(a_tile, mask=ks[None, :] < left, other=0.0)
            w = tl.load(w_tile, mask=ks[:, None] < left, other=0.0)
            sa = tl.load(sa_row + kb * sa_stride_k)
            sw = tl.load(sw_col + kb * sw_stride_k)
            acc += tl.dot(a, w) * sa[:, None] * sw[None, :]
            a_tile += BK
            w_tile += BK
        out_rows = tile_m * BM + tl.arange(0, BM)
        out_cols = tile_n * BN + tl.arange(0, BN)
        y = y_ptr + out_rows[:, None].to(tl.int64) * N + out_cols[None, :]
        tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))

    # vLLM's fallback when it has no tuned table for the shape.
    config = {"BM": 64, "BN": BLOCK, "BK": BLOCK, "GROUP_M": 32, "num_warps": 4, "num_stages": 2}

    def run(a, w, sa, sw, out):
        m, k = a.shape
        n = w.shape[0]
        grid = (triton.cdiv(m, config["BM"]) * triton.cdiv(n, config["BN"]),)
        block_gemm_kernel[grid](a, w, out, sa, sw, m, n, k, sa.stride(0), sa.stride(1), sw.stride(0), sw.stride(1),
                                SCALE_BN=BLOCK, **config)
        return out

    return run, config


# ------------------------------------------------------------------------------------------------
# Inputs and calls
# ------------------------------------------------------------------------------------------------
class WeightSet:
    def __init__(self, n, k, copies, gen, need_fp8, need_bf16):
        base = math.sqrt(8.0 / (math.sqrt(k) * E4M3_RMS * E4M3_RMS))
        self.w8 = [random_e4m3(n, k, gen) for _ in range(copies)] if need_fp8 else []
        self.wbf = [random_bf16(n, k, 977 + n * 31 + k + c) for c in range(copies)] if need_bf16 else []
        self.sb_tensor = random_scales((), base, gen)
        self.sb_row = random_scales((1, n), base, gen)
        nb, kb = -(-n // BLOCK), k // BLOCK
        self.sb_block = random_scales((nb, kb), 8.0 * math.sqrt(3.0) / (math.sqrt(k) * E4M3_RMS), gen)
        # cuBLASLt's 128x128 layout: [L4, ceil(N/128)] with K-blocks contiguous, L4 = K/128 rounded up to 4.
        l4 = -(-kb // 4) * 4
        padded = torch.ones((nb, l4), dtype=torch.float32, device="cuda")
        padded[:, :kb] = self.sb_block
        self.sb_block_lt = padded.t()


class ActSet:
    def __init__(self, m, k, copies, gen, base, need_a8, need_bf16, need_block):
        self.m = m
        self.a8 = [random_e4m3(m, k, gen) for _ in range(copies)] if need_a8 else []
        self.abf = ([random_bf16(m, k, 4242 + m * 1000003 + k * 31 + c) for c in range(copies)]
                    if (need_bf16 or need_block) else [])
        self.sa_tensor = random_scales((), base, gen)
        self.sa_row = random_scales((m, 1), base, gen)
        self.ablock, self.sa_block, self.ablock_lt, self.sa_block_lt = [], [], [], []
        if need_block:
            m4 = -(-m // 4) * 4
            for x in self.abf:
                q, s = group_quant(x)
                self.ablock.append(q)
                self.sa_block.append(s)
                pad = torch.full((m4, k), 0x38, dtype=torch.uint8, device="cuda")  # pad rows: 1.0
                pad[:m] = q.view(torch.uint8)
                self.ablock_lt.append(pad.view(FP8))
                self.sa_block_lt.append(column_major(s, m4))


def make_call(variant, ws, acts, n, triton_block):
    """fn(i) -> output tensor of copy i, and the argument tuples per copy (for CUDA graphs)."""
    bf16 = torch.bfloat16
    if variant in ("scaled_mm", "scaled_mm_fast_accum"):
        fast = variant == "scaled_mm_fast_accum"

        def f(a, w):
            return torch._scaled_mm(a, w.t(), scale_a=acts.sa_tensor, scale_b=ws.sb_tensor, out_dtype=bf16,
                                    use_fast_accum=fast)
        args = list(zip(acts.a8, ws.w8))
    elif variant == "scaled_mm_rowwise":
        def f(a, w):
            return torch._scaled_mm(a, w.t(), scale_a=acts.sa_row, scale_b=ws.sb_row, out_dtype=bf16,
                                    use_fast_accum=False)
        args = list(zip(acts.a8, ws.w8))
    elif variant == "scaled_mm_block":
        m = acts.m
        F = torch.nn.functional
        if hasattr(F, "scaled_mm") and hasattr(F, "ScalingType"):
            st = F.ScalingType
            plain = F.SwizzleType.NO_SWIZZLE if hasattr(F, "SwizzleType") else None

            def f(a, sa, w):
                return F.scaled_mm(a, w.t(), sa, st.BlockWise1x128, ws.sb_block_lt, st.BlockWise128x128,
                                   swizzle_a=plain, swizzle_b=plain, output_dtype=bf16)[:m]
        else:
            def f(a, sa, w):
                return torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=ws.sb_block_lt, out_dtype=bf16)[:m]
        args = list(zip(acts.ablock_lt, acts.sa_block_lt, ws.w8))
    elif variant == "triton_block":
        outs = [torch.empty((acts.m, n), dtype=bf16, device="cuda") for _ in acts.ablock]

        def f(a, sa, w, out):
            return triton_block(a, w, sa, ws.sb_block, out)
        args = list(zip(acts.ablock, acts.sa_block, ws.w8, outs))
    elif variant == "matmul":
        def f(x, w):
            return torch.matmul(x, w.t())
        args = list(zip(acts.abf, ws.wbf))
    else:
        raise ValueError(variant)
    return f, args


def reference_slice(variant, ws, acts, rows, cols):
    """f32 emulation of copy 0's output rows [:rows] x columns [:cols]."""
    f32 = torch.float32
    if variant.startswith("scaled_mm") and variant != "scaled_mm_block":
        a = acts.a8[0][:rows].to(f32)
        w = ws.w8[0][:cols].to(f32)
        if variant == "scaled_mm_rowwise":
            return (a @ w.t()) * acts.sa_row[:rows] * ws.sb_row[:, :cols]
        return (a @ w.t()) * acts.sa_tensor * ws.sb_tensor
    if variant in ("scaled_mm_block", "triton_block"):
        a = acts.ablock[0][:rows].to(f32) * acts.sa_block[0][:rows].repeat_interleave(BLOCK, dim=1)
        sw = ws.sb_block.repeat_interleave(BLOCK, dim=0)[:cols].repeat_interleave(BLOCK, dim=1)
        w = ws.w8[0][:cols].to(f32) * sw
        return a @ w.t()
    x = acts.abf[0][:rows].to(torch.float64)
    return (x @ ws.wbf[0][:cols].to(torch.float64).t()).to(f32)


def run(args):
    timer = Timer(args.flush, args.target_ms, args.min_reps, args.max_reps)
    results = {
        "benchmark": "gemm_torch",
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": {"name": torch.cuda.get_device_name(0), "l2_bytes": timer.l2_bytes,
                   "sm_count": torch.cuda.get_device_properties(0).multi_processor_count},
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "method": {"flush": args.flush, "target_ms": args.target_ms, "min_reps": args.min_reps,
                   "max_reps": args.max_reps, "graphs_at_decode": not args.no_graphs,
                   "statistic": "median of per-launch CUDA event times"},
        "variants": {k: {"scaling": v[0], "description": v[1]} for k, v in VARIANTS.items()},
        "stated": {"block": gemm_stated.block_rows(), "cublaslt": gemm_stated.cublaslt_rows()},
        "notes": [],
        "cases": [],
    }
    triton_block = None
    try:
        import triton
        results["triton"] = triton.__version__
        triton_block, config = make_triton_block_gemm()
        results["triton_block_config"] = config
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        results["notes"].append(f"triton unavailable: {e!r}")
    if not (hasattr(torch.nn.functional, "scaled_mm") and hasattr(torch.nn.functional, "ScalingType")):
        results["notes"].append("torch.nn.functional.scaled_mm missing: block mode tried through torch._scaled_mm")

    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    t = timer.time(lambda i: dst.copy_(src))
    results["copy"] = dict(t, what="torch copy_ 1 GiB D2D", bytes=2.0 * (1 << 30),
                           gbps=2.0 * (1 << 30) / (t["median_us"] * 1e3))
    print(f"copy ceiling (torch copy_): {results['copy']['gbps']:.0f} GB/s", flush=True)
    del src, dst

    variants = [v for v in VARIANTS if v in args.variants]
    for model, n, k in args.shapes:
        work = []
        for m in args.ms:
            wanted = [v for v in variants
                      if not args.filter or args.filter in f"{VARIANTS[v][0]} {v} {n}x{k} M={m}"]
            if wanted:
                work.append((m, wanted))
        if not work:
            continue
        gen = torch.Generator(device="cuda").manual_seed(n * 7919 + k)
        need_bf16 = any("matmul" in w for _, w in work)
        need_fp8 = any(v != "matmul" for _, w in work for v in w)
        copies_w = int(min(max(math.ceil(2.0 * timer.l2_bytes / (n * k)), 1), 8))
        ws = WeightSet(n, k, copies_w, gen, need_fp8, need_bf16)
        base = math.sqrt(8.0 / (math.sqrt(k) * E4M3_RMS * E4M3_RMS))
        for m, wanted in work:
            copies = int(min(max(math.ceil(2.0 * timer.l2_bytes / (n * k + m * k + 2 * m * n)), 1), copies_w))
            need_a8 = any(v.startswith("scaled_mm") and v != "scaled_mm_block" for v in wanted)
            need_block = any(v in ("scaled_mm_block", "triton_block") for v in wanted)
            acts = ActSet(m, k, copies, gen, base, need_a8, "matmul" in wanted, need_block)
            torch.cuda.synchronize()
            for variant in wanted:
                scaling = VARIANTS[variant][0]
                bf16 = scaling == "bf16"
                case = {"scaling": scaling, "variant": variant, "model": model, "shape": f"{n}x{k}", "m": m, "n": n,
                        "k": k, "input_copies": copies, "flops": 2.0 * m * n * k,
                        "weight_bytes": (2.0 if bf16 else 1.0) * n * k}
                peak = BF16_PEAK_TFLOPS if bf16 else FP8_PEAK_TFLOPS
                try:
                    f, fargs = make_call(variant, ws, acts, n, triton_block)
                    out = f(*fargs[0])
                    torch.cuda.synchronize()
                    rows, cols = min(m, 8), min(n, 256)
                    ref = reference_slice(variant, ws, acts, rows, cols).to(torch.float64)
                    got = out[:rows, :cols].to(torch.float64)
                    rel = float((got - ref).norm() / ref.norm().clamp(min=1e-30))
                    case["rel_l2_vs_emulation"] = rel if math.isfinite(rel) else "nan"
                    case["check_ok"] = bool(math.isfinite(rel) and rel <= 1e-2)
                    del out
                    launch = lambda i, f=f: f(*fargs[i % copies])  # noqa: E731
                    case.update(timer.time(launch))
                    if m <= DECODE_MAX_M:
                        case["b2b_us"] = timer.back_to_back_us(launch)
                    finish(case, peak, results)
                    print(line(case), flush=True)
                except Exception as e:  # noqa: BLE001 - a failing variant is reported, not fatal
                    case["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                    if args.verbose:
                        traceback.print_exc()
                    print(f"  {variant:<22} {n}x{k:<7} M={m:<5} error: {case['error']}", flush=True)
                    fargs = None
                results["cases"].append(case)
                # Host overhead shows at decode sizes: a CUDA-graph replay of the same call gives the GPU time.
                if m <= DECODE_MAX_M and not args.no_graphs and "error" not in case:
                    g = {key: case[key] for key in ("scaling", "model", "shape", "m", "n", "k", "input_copies",
                                                    "flops", "weight_bytes")}
                    g["variant"] = variant + "_graph"
                    try:
                        replay, keep = graphed(f, fargs[:copies])
                        g.update(timer.time(replay))
                        finish(g, peak, results)
                        del keep, replay
                        print(line(g), flush=True)
                    except Exception as e:  # noqa: BLE001
                        g["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                        print(f"  {g['variant']:<22} {n}x{k:<7} M={m:<5} error: {g['error']}", flush=True)
                    results["cases"].append(g)
            del acts
        del ws
        torch.cuda.empty_cache()
    return results


def finish(case, peak, results):
    t = case["median_us"]
    case["tflops"] = case["flops"] / (t * 1e6)
    case["pct_peak"] = 100.0 * case["tflops"] / peak
    case["weight_gbps"] = case["weight_bytes"] / (t * 1e3)
    case["pct_copy"] = 100.0 * case["weight_gbps"] / results["copy"]["gbps"]


def line(c):
    chk = "" if c.get("check_ok", True) else f"  CHECK FAIL (rel L2 {c.get('rel_l2_vs_emulation')})"
    return (f"  {c['variant']:<22} {c['shape']:>11} M={c['m']:<5} {c['median_us']:>10.2f} us {c['tflops']:>7.1f} TF/s "
            f"{c['weight_gbps'] / 1e3:>6.2f} TB/s w{chk}")


def parse_shapes(text):
    if not text:
        return SHAPES
    out = []
    for item in text.split(","):
        hits = [s for s in SHAPES if s[0] == item or f"{s[1]}x{s[2]}" == item]
        if not hits:
            n, k = (int(v) for v in item.split("x"))
            hits = [("custom", n, k)]
        out += hits
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_dir = os.environ.get("FP8KIT_RESULTS_DIR") or "gpu-results"
    p.add_argument("--json", "--out", dest="json", default=os.path.join(default_dir, "gemm_torch.json"),
                   help="where the JSON goes (default: $FP8KIT_RESULTS_DIR or ./gpu-results, gemm_torch.json)")
    p.add_argument("--m", default="", help="comma-separated M list (default: 1,16,64,128,512,2048,8192)")
    p.add_argument("--shapes", default="", help="comma-separated NxK pairs or models (llama3-8b, llama3-70b, "
                                                 "deepseek-v3); default: the whole grid")
    p.add_argument("--variants", default="scaled_mm,scaled_mm_rowwise,scaled_mm_block,triton_block,matmul",
                   help="comma-separated, from: " + ", ".join(VARIANTS))
    p.add_argument("--fast-accum", action="store_true", help="also time scaled_mm_fast_accum (info only)")
    p.add_argument("--filter", default="", help="keep cases whose 'SCALING VARIANT NxK M=m' contains this")
    p.add_argument("--flush", choices=("read", "write"), default="read")
    p.add_argument("--target-ms", type=float, default=25.0)
    p.add_argument("--min-reps", type=int, default=10)
    p.add_argument("--max-reps", type=int, default=1000)
    p.add_argument("--no-graphs", action="store_true", help="no CUDA-graph variants at M <= 16")
    p.add_argument("--quick", action="store_true", help="8 ms per case, 5-200 launches")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.target_ms, args.min_reps, args.max_reps = 8.0, 5, 200
    args.ms = [int(v) for v in args.m.split(",")] if args.m else MS
    args.shapes = parse_shapes(args.shapes)
    args.variants = [v for v in args.variants.split(",") if v]
    if args.fast_accum and "scaled_mm_fast_accum" not in args.variants:
        args.variants.append("scaled_mm_fast_accum")
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}")
    if not torch.cuda.is_available():
        print("gemm_torch: no CUDA device: skipped")
        return 77
    start = time.perf_counter()
    results = run(args)
    results["wall_s"] = time.perf_counter() - start
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
    print(f"stated figures ({gemm_stated.SOURCE}):")
    for r in gemm_stated.block_rows():
        print(f"  block M={r['m']:<5} {r['n']}x{r['k']}: vLLM Triton {r['vllm_triton_us']:.1f} us, "
              f"DeepGEMM {r['deepgemm_us']:.1f} us")
    print(f"wrote {args.json} ({results['wall_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
