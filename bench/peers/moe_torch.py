#!/usr/bin/env python3
"""PyTorch peer of bench/bench_moe: a fused-MoE layer written with torch ops the way a torch user
(or vLLM without its Triton kernels) would: quantize the tokens, then per expert with tokens
gather its rows, GEMM1, silu(gate) * up, quantize, GEMM2, scale by the routing weight and
index_add into the output. Variants: per_tensor (torch._scaled_mm, 0-dim scales), block (torch's
cuBLASLt 1x128 / 128x128 block mode where this torch has it) and bf16 (torch.matmul on the
dequantized experts). Same models, M grid, routing rule and timing as bench_moe (events per
launch, L2 flushed, median; CUDA graphs are impossible here: the per-expert loop needs the token
counts on the host). Writes JSON next to bench_moe.json."""

import argparse
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quant_torch import Timer  # noqa: E402  (same timing as bench_quant's peer)

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
MODELS = [("mixtral-8x7b", 8, 4096, 14336, 2, True), ("qwen3-30b-a3b", 128, 2048, 768, 8, True),
          ("deepseek-v3", 256, 7168, 2048, 8, False)]
MS = [1, 16, 64, 512, 4096]


def random_e4m3(shape, gen):
    """Uniform random e4m3fn codes without zeros or NaN, as bench_common's fill_random_e4m3."""
    c = torch.empty(shape, dtype=torch.uint8, device="cuda").random_(generator=gen)
    low = c & 0x7F
    c = torch.where(low == 0, c | 0x08, c)
    c = torch.where(low == 0x7F, c ^ 0x01, c)
    return c.view(FP8)


def routing(e, top_k, m, gen):
    scores = torch.rand((m, e), generator=gen, device="cuda")
    ids = scores.topk(top_k, dim=1).indices.to(torch.int32)  # uniform distinct experts
    w = 0.1 + 0.9 * torch.rand((m, top_k), generator=gen, device="cuda")
    return ids, w / w.sum(dim=1, keepdim=True)


def quant_tensor(x):
    s = (x.abs().amax().float() / FP8_MAX).clamp(min=1e-12)
    return (x.float() / s).clamp(-FP8_MAX, FP8_MAX).to(FP8), s


def quant_group(x):
    g = x.float().view(x.shape[0], -1, 128)
    s = (g.abs().amax(dim=2, keepdim=True) / FP8_MAX).clamp(min=1e-10)
    return (g / s).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(x.shape), s.squeeze(2)


def padded_rows(a, multiple, fill_code=0):
    """a [n, K] (codes) padded with rows of `fill_code` to a multiple of `multiple` rows: cuBLASLt's
    FP8 kernels want 16-row multiples (vLLM pads the same way)."""
    n = a.shape[0]
    rows = -(-n // multiple) * multiple
    if rows == n:
        return a.contiguous()
    out = torch.full((rows, a.shape[1]), fill_code, dtype=torch.uint8, device=a.device)
    out[:n] = a.view(torch.uint8)
    return out.view(a.dtype)


def column_major(s, rows):
    """[R, C] f32 as a column-major view (strides (1, rows)), R padded to `rows` with ones."""
    r, c = s.shape
    out = torch.ones((c, rows), dtype=s.dtype, device=s.device)
    out[:, :r] = s.t()
    return out.t()


def lt_block_scales(s):
    """[N/128, K/128] weight block scales in cuBLASLt's 128x128 layout: [L4, N/128] with K-blocks
    contiguous, L4 = K/128 rounded up to 4 (as gemm_torch.py)."""
    nb, kb = s.shape
    l4 = -(-kb // 4) * 4
    padded = torch.ones((nb, l4), dtype=torch.float32, device=s.device)
    padded[:, :kb] = s
    return padded.t()


def tensor_mm(q, s, w, sw):
    """Per-tensor FP8 GEMM of q [n, K] and w [N, K] through torch._scaled_mm, rows padded to 16."""
    n = q.shape[0]
    return torch._scaled_mm(padded_rows(q, 16), w.t(), scale_a=s, scale_b=sw, out_dtype=torch.bfloat16)[:n]


def block_mm(q, s, w, sw_lt):
    """1x128 x 128x128 block FP8 GEMM through torch's cuBLASLt block mode (F.scaled_mm)."""
    F = torch.nn.functional
    if not (hasattr(F, "scaled_mm") and hasattr(F, "ScalingType")):
        raise RuntimeError("this torch has no torch.nn.functional.scaled_mm block mode")
    n = q.shape[0]
    a = padded_rows(q, 16, fill_code=0x38)  # pad rows: code 1.0, scale 1.0
    plain = F.SwizzleType.NO_SWIZZLE if hasattr(F, "SwizzleType") else None
    return F.scaled_mm(a, w.t(), column_major(s, a.shape[0]), F.ScalingType.BlockWise1x128, sw_lt,
                       F.ScalingType.BlockWise128x128, swizzle_a=plain, swizzle_b=plain,
                       output_dtype=torch.bfloat16)[:n]


def moe_layer(variant, x, w1, w2, s1, s2, ids, weights):
    m, h = x.shape
    top_k = ids.shape[1]
    out = torch.zeros_like(x)
    flat = ids.flatten().long()
    order = flat.argsort(stable=True)
    counts = torch.bincount(flat, minlength=w1.shape[0]).tolist()  # the host synchronization
    token_of = order // top_k
    xq, xs = (None, None)
    if variant == "per_tensor":
        xq, xs = quant_tensor(x)
    elif variant == "block":
        xq, xs = quant_group(x)
    start = 0
    for e, n in enumerate(counts):
        if n == 0:
            continue
        rows = token_of[start:start + n]
        slot = order[start:start + n]
        start += n
        if variant == "bf16":
            c1 = x[rows] @ w1[e].t()
        elif variant == "per_tensor":
            c1 = tensor_mm(xq[rows], xs, w1[e], s1[e])
        else:
            c1 = block_mm(xq[rows], xs[rows], w1[e], s1[e])
        i = c1.shape[1] // 2
        c2 = torch.nn.functional.silu(c1[:, :i]) * c1[:, i:]
        if variant == "bf16":
            c3 = c2 @ w2[e].t()
        elif variant == "per_tensor":
            q, s = quant_tensor(c2)
            c3 = tensor_mm(q, s, w2[e], s2[e])
        else:
            q, s = quant_group(c2)
            c3 = block_mm(q, s, w2[e], s2[e])
        out.index_add_(0, rows, c3 * weights.flatten()[slot].unsqueeze(1).to(c3.dtype))
    return out


def run(args):
    timer = Timer(args.flush, args.target_ms, args.min_reps, args.max_reps)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    results = {"peer": "moe_torch", "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cases": []}
    for name, e, h, inter, top_k, per_tensor in MODELS:
        if args.models and name not in args.models:
            continue
        w1 = random_e4m3((e, 2 * inter, h), gen)
        w2 = random_e4m3((e, h, inter), gen)
        s1t = (torch.rand(e, generator=gen, device="cuda") + 0.5) / (100.0 * h ** 0.5)
        s2t = (torch.rand(e, generator=gen, device="cuda") + 0.5) / (100.0 * inter ** 0.5)
        s1b = (torch.rand((e, 2 * inter // 128, h // 128), generator=gen, device="cuda") + 0.5) / (100.0 * h ** 0.5)
        s2b = (torch.rand((e, h // 128, inter // 128), generator=gen, device="cuda") + 0.5) / (100.0 * inter ** 0.5)
        for variant in args.variants:
            if variant == "per_tensor" and not per_tensor:
                continue
            if variant == "bf16":  # dequantized experts: 2 bytes per weight (skip what does not fit)
                try:
                    w1v, w2v = (w1.to(torch.bfloat16), w2.to(torch.bfloat16))
                except torch.OutOfMemoryError:
                    continue
                s1, s2 = None, None
            else:
                w1v, w2v = w1, w2
                if variant == "per_tensor":  # own allocations: cuBLASLt wants 16-byte aligned scales
                    s1 = [s1t[j].clone() for j in range(e)]
                    s2 = [s2t[j].clone() for j in range(e)]
                else:  # cuBLASLt's block-scale layout, prepared once per expert outside the timing
                    s1 = [lt_block_scales(s1b[j]) for j in range(e)]
                    s2 = [lt_block_scales(s2b[j]) for j in range(e)]
            for m in args.ms:
                case = {"model": name, "variant": variant, "m": m, "e": e, "h": h, "i": inter, "top_k": top_k}
                try:
                    x = torch.randn((m, h), generator=gen, device="cuda").to(torch.bfloat16)
                    ids, weights = routing(e, top_k, m, gen)
                    fn = lambda _i: moe_layer(variant, x, w1v, w2v, s1, s2, ids, weights)  # noqa: E731
                    case.update(timer.time(fn))
                    touched = int(torch.unique(ids).numel())
                    case["touched_experts"] = touched
                    case["tflops"] = 2.0 * m * top_k * 3 * h * inter / (case["median_us"] * 1e6)
                    case["weight_gbps"] = touched * 3.0 * h * inter * (2 if variant == "bf16" else 1) / (case["median_us"] * 1e3)
                except Exception as ex:  # noqa: BLE001  (report and go on: e.g. no block mode in this torch)
                    case["error"] = f"{type(ex).__name__}: {ex}"
                    if args.verbose:
                        traceback.print_exc()
                results["cases"].append(case)
                print(f"{name:<14} {variant:<10} M={m:<5} " +
                      (f"{case['median_us']:10.1f} us {case['tflops']:8.1f} TF/s" if "median_us" in case
                       else case["error"][:120]), flush=True)
            del w1v, w2v
            torch.cuda.empty_cache()
        del w1, w2
        torch.cuda.empty_cache()
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_dir = os.environ.get("FP8KIT_RESULTS_DIR") or "gpu-results"
    p.add_argument("--json", "--out", dest="json", default=os.path.join(default_dir, "moe_torch.json"))
    p.add_argument("--m", default="", help="comma-separated M list (default: 1,16,64,512,4096)")
    p.add_argument("--models", default="", help="comma-separated: mixtral-8x7b, qwen3-30b-a3b, deepseek-v3")
    p.add_argument("--variants", default="per_tensor,block,bf16")
    p.add_argument("--flush", choices=("read", "write"), default="read")
    p.add_argument("--target-ms", type=float, default=25.0)
    p.add_argument("--min-reps", type=int, default=5)
    p.add_argument("--max-reps", type=int, default=200)
    p.add_argument("--quick", action="store_true", help="8 ms per case, 3-50 launches")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.target_ms, args.min_reps, args.max_reps = 8.0, 3, 50
    args.ms = [int(v) for v in args.m.split(",")] if args.m else MS
    args.models = [v for v in args.models.split(",") if v]
    args.variants = [v for v in args.variants.split(",") if v]
    if not torch.cuda.is_available():
        print("moe_torch: no CUDA device: skipped")
        return 77
    start = time.perf_counter()
    results = run(args)
    results["wall_s"] = time.perf_counter() - start
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.json} ({results['wall_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
