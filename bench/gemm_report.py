#!/usr/bin/env python3
"""Merges bench_gemm's JSON (fp8kit) and bench/peers/gemm_torch.py's JSON (PyTorch) into markdown
tables per scaling, with PERF_TARGETS.md's verdicts and the geometric mean of speedups. Standard
library only.
  python3 bench/gemm_report.py [bench_gemm.json [gemm_torch.json]] [--out FILE]
Defaults: both files in $FP8KIT_RESULTS_DIR, else ./gpu-results."""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import gemm_stated  # noqa: E402  (stdlib only)

COMMANDS = [
    "R=$FP8KIT_RESULTS_DIR   # default ./gpu-results",
    "bench_gemm $R/bench_gemm.json",
    "python3 bench/peers/gemm_torch.py --out $R/gemm_torch.json",
    "python3 bench/gemm_report.py $R/bench_gemm.json $R/gemm_torch.json",
]

# PERF_TARGETS.md
DENSE_GEOMEAN = 1.15      # geometric mean of speedups over torch._scaled_mm, per scaling
DENSE_MIN = 1.0           # no shape below
LARGE_TFLOPS = 1450.0     # M >= 2048 on the large shapes (weights >= 32 MiB)
LARGE_MIN_M = 2048
DECODE_PCT_COPY = 85.0    # weight bytes / time at M <= 16, weights >= 32 MiB (3.6 TB/s of a 4.27 TB/s copy)
DECODE_MAX_M = 16
BIG_WEIGHT = 32 * 1024 * 1024
BLOCK_VS_DEEPGEMM = 1.0
BLOCK_VS_TRITON = 2.0

# fp8kit scaling -> the torch variants it is compared with (the fastest that ran; *_graph = CUDA graph)
PEERS = {
    "per_tensor": ("scaled_mm", "scaled_mm_graph"),
    "per_token_channel": ("scaled_mm_rowwise", "scaled_mm_rowwise_graph"),
    "block": ("scaled_mm_block", "scaled_mm_block_graph"),
    "bf16": ("matmul", "matmul_graph"),
}
TRITON = ("triton_block", "triton_block_graph")
TITLES = {
    "per_tensor": "Dense W8A8, per-tensor x per-tensor (bf16 out) vs torch._scaled_mm",
    "per_token_channel": "Dense W8A8, per-token x per-channel (bf16 out) vs torch._scaled_mm rowwise",
    "block": "Block W8A8, 1x128 activations x 128x128 weights (bf16 out)",
    "bf16": "BF16 GEMM (the physical reference): cuBLASLt in bench_gemm vs torch.matmul",
}


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def us(v):
    if v is None:
        return "-"
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def best(torch_cases, variants, shape, m):
    ok = [c for c in torch_cases if c.get("variant") in variants and c["shape"] == shape and c["m"] == m
          and "error" not in c and c.get("median_us")]
    return min(ok, key=lambda c: c["median_us"]) if ok else None


def big_weight(c):
    return c["n"] * c["k"] >= BIG_WEIGHT


def absolute_checks(c):
    """(label, passed) for the absolute targets that apply to an fp8kit case."""
    checks = []
    if big_weight(c) and c["m"] >= LARGE_MIN_M:
        checks.append((f">= {LARGE_TFLOPS:.0f} TF/s", c["tflops"] >= LARGE_TFLOPS))
    if big_weight(c) and c["m"] <= DECODE_MAX_M:
        checks.append((f">= {DECODE_PCT_COPY:.0f}% copy", c["pct_copy"] >= DECODE_PCT_COPY))
    return checks


def verdict(c, checks):
    if "error" in c:
        return "FAIL (error)"
    if not c.get("verified"):
        return "FAIL (verify)"
    if not checks:
        return "info"
    missed = [label for label, ok in checks if not ok]
    return "pass" if not missed else "miss: " + ", ".join(missed)


def pct_read(c):
    """The weights' read floor (bench_gemm's stream-read kernel, same run) over fp8kit's time."""
    return f"{c['pct_read']:.1f}%" if c.get("pct_read") is not None else "-"


def error_row(c, columns):
    return f"| {c['model']} | {c['n']} x {c['k']} | {c['m']} | error: {c['error'][:80]} |" + " |" * (columns - 4)


def dense_table(scaling, fp_cases, torch_cases, out, summary):
    rows = ["| model | N x K | M | fp8kit µs | TFLOP/s | weight TB/s | % copy | % read | torch µs (variant) | speedup "
            "| targets | verdict |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|"]
    speedups = []
    verdicts = []
    for c in fp_cases:
        if c["scaling"] != scaling:
            continue
        if "error" in c:
            rows.append(error_row(c, 12))
            verdicts.append("FAIL")
            continue
        t = best(torch_cases, PEERS[scaling], c["shape"], c["m"])
        checks = absolute_checks(c)
        speed = None
        if t:
            speed = t["median_us"] / c["median_us"]
            speedups.append(speed)
            checks.insert(0, (f">= {DENSE_MIN:.1f}x torch", speed >= DENSE_MIN))
        v = verdict(c, checks)
        verdicts.append(v.split(" ")[0].rstrip(":"))
        rows.append(f"| {c['model']} | {c['n']} x {c['k']} | {c['m']} | {fp_us(c)} | {c['tflops']:.0f} "
                    f"| {c['weight_gbps'] / 1e3:.2f} | {c['pct_copy']:.1f}% | {pct_read(c)} "
                    f"| {us(t['median_us']) + ' (' + t['variant'] + ')' if t else '-'} "
                    f"| {format(speed, '.2f') + 'x' if speed else '-'} "
                    f"| {'; '.join(label for label, _ in checks) or '-'} | {v} |")
    if len(rows) == 2:
        return
    g = geomean(speedups)
    low = min(speedups) if speedups else None
    if g is None:
        line = "no torch results to compare with"
    else:
        ok = g >= DENSE_GEOMEAN and low >= DENSE_MIN
        line = (f"geometric mean of speedups over torch: **{g:.3f}x** over {len(speedups)} cases "
                f"(target >= {DENSE_GEOMEAN}x), lowest {low:.2f}x (target >= {DENSE_MIN}x): "
                f"**{'pass' if ok else 'miss'}**")
    out += [f"### {TITLES[scaling]}", "", *rows, "", line + "; " + counts(verdicts) + ".", ""]
    summary.append((scaling, g, len(speedups), low, counts(verdicts)))


def counts(verdicts):
    keys = ("pass", "miss", "info", "FAIL")
    return ", ".join(f"{k} {verdicts.count(k)}" for k in keys if verdicts.count(k))


def block_table(fp_cases, torch_cases, out, summary):
    rows = ["| model | N x K | M | fp8kit µs | TFLOP/s | weight TB/s | torch cuBLASLt block µs (x) "
            "| Triton vLLM-style µs (x) | DeepGEMM µs, stated (x) | vLLM Triton µs, stated (x) | targets | verdict |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    vs_torch, vs_triton, vs_deepgemm = [], [], []
    verdicts = []
    for c in fp_cases:
        if c["scaling"] != "block":
            continue
        if "error" in c:
            rows.append(error_row(c, 12))
            verdicts.append("FAIL")
            continue
        t_lt = best(torch_cases, PEERS["block"], c["shape"], c["m"])
        t_tr = best(torch_cases, TRITON, c["shape"], c["m"])
        stated = gemm_stated.BLOCK.get((c["m"], c["n"], c["k"]))
        mine = c["median_us"]

        def ratio(peer_us):
            return peer_us / mine if peer_us else None

        r_lt = ratio(t_lt["median_us"] if t_lt else None)
        r_tr = ratio(t_tr["median_us"] if t_tr else None)
        r_dg = ratio(stated[1] if stated else None)
        r_vt = ratio(stated[0] if stated else None)
        if r_lt:
            vs_torch.append(r_lt)
        if r_tr:
            vs_triton.append(r_tr)
        if r_dg:
            vs_deepgemm.append(r_dg)
        checks = []
        if r_dg is not None:
            checks.append((f">= {BLOCK_VS_DEEPGEMM:.1f}x DeepGEMM*", r_dg >= BLOCK_VS_DEEPGEMM))
        # The vLLM Triton target against the faster of the measured default-config kernel and the stated one.
        triton_ratios = [r for r in (r_tr, r_vt) if r]
        if triton_ratios:
            checks.append((f">= {BLOCK_VS_TRITON:.0f}x vLLM Triton", min(triton_ratios) >= BLOCK_VS_TRITON))
        checks += absolute_checks(c)
        v = verdict(c, checks)
        verdicts.append(v.split(" ")[0].rstrip(":"))

        def cell(peer_us, r):
            return f"{us(peer_us)} ({r:.2f}x)" if peer_us else "-"

        rows.append(f"| {c['model']} | {c['n']} x {c['k']} | {c['m']} | {fp_us(c)} | {c['tflops']:.0f} "
                    f"| {c['weight_gbps'] / 1e3:.2f} "
                    f"| {cell(t_lt['median_us'] if t_lt else None, r_lt)} "
                    f"| {cell(t_tr['median_us'] if t_tr else None, r_tr)} "
                    f"| {cell(stated[1] if stated else None, r_dg)} | {cell(stated[0] if stated else None, r_vt)} "
                    f"| {'; '.join(label for label, _ in checks) or '-'} | {v} |")
    if len(rows) == 2:
        return
    parts = []
    for name, vals in (("torch cuBLASLt block mode", vs_torch), ("Triton vLLM-style (measured)", vs_triton),
                       ("DeepGEMM (stated)", vs_deepgemm)):
        g = geomean(vals)
        if g:
            parts.append(f"vs {name}: **{g:.3f}x** ({len(vals)} cases, lowest {min(vals):.2f}x)")
    out += [f"### {TITLES['block']}", "", *rows, "",
            "Geometric means of speedups: " + ("; ".join(parts) if parts else "no peer results") + "; "
            + counts(verdicts) + ".",
            "",
            f"\\* stated: {gemm_stated.SOURCE}. The vLLM Triton target is judged against the faster of the Triton "
            "kernel measured here (vLLM's default config; vLLM ships tuned tables for some shapes) and the stated "
            "figure.", ""]
    g = geomean(vs_torch) or geomean(vs_triton)
    summary.append(("block", g, len(vs_torch) or len(vs_triton), min(vs_torch or vs_triton or [0]) or None,
                    counts(verdicts)))


def bf16_table(fp_cases, torch_cases, out, summary):
    fp8 = {(c["shape"], c["m"]): c for c in fp_cases if c["scaling"] == "per_tensor" and "error" not in c}
    rows = ["| model | N x K | M | cuBLASLt bf16 µs | TFLOP/s | weight TB/s | torch.matmul µs (variant) "
            "| torch / cuBLASLt | fp8kit per-tensor FP8 speedup over bf16 |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    ratios = []
    for c in fp_cases:
        if c["scaling"] != "bf16":
            continue
        if "error" in c:
            rows.append(error_row(c, 9))
            continue
        t = best(torch_cases, PEERS["bf16"], c["shape"], c["m"])
        r = t["median_us"] / c["median_us"] if t else None
        if r:
            ratios.append(r)
        f = fp8.get((c["shape"], c["m"]))
        rows.append(f"| {c['model']} | {c['n']} x {c['k']} | {c['m']} | {fp_us(c)} | {c['tflops']:.0f} "
                    f"| {c['weight_gbps'] / 1e3:.2f} | {us(t['median_us']) + ' (' + t['variant'] + ')' if t else '-'} "
                    f"| {format(r, '.2f') if r else '-'} "
                    f"| {format(c['median_us'] / f['median_us'], '.2f') + 'x' if f else '-'} |")
    if len(rows) == 2:
        return
    g = geomean(ratios)
    out += [f"### {TITLES['bf16']}", "", *rows, "",
            (f"Geometric mean of torch.matmul / cuBLASLt time: {g:.3f} ({len(ratios)} cases)." if g else
             "No torch.matmul results.") + " No target: this is the reference for the weight-only FP8 comparison.",
            ""]


WEIGHT_ONLY_VS_BF16 = 1.7   # weight-only decode (M <= 16) over the BF16 GEMM of the same shape


def weight_only_table(scaling, fp_cases, torch_cases, out, summary):
    bf16 = {(c["shape"], c["m"]): c for c in fp_cases if c["scaling"] == "bf16" and "error" not in c}
    rows = ["| model | N x K | M | fp8kit weight-only µs | weight TB/s | % copy | bf16 µs (fastest of cuBLASLt, "
            "torch.matmul) | speedup over bf16 | target | verdict |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    speedups, verdicts = [], []
    for c in fp_cases:
        if c["scaling"] != scaling:
            continue
        if "error" in c:
            rows.append(error_row(c, 10))
            verdicts.append("FAIL")
            continue
        refs = [x["median_us"] for x in (bf16.get((c["shape"], c["m"])),
                                         best(torch_cases, PEERS["bf16"], c["shape"], c["m"])) if x]
        ref = min(refs) if refs else None
        r = ref / c["median_us"] if ref else None
        if r:
            speedups.append(r)
        target = f">= {WEIGHT_ONLY_VS_BF16}x bf16" if c["m"] <= DECODE_MAX_M else ""
        if not c.get("verify_ok", True):
            verdict = "FAIL"
        elif target and r:
            verdict = "pass" if r >= WEIGHT_ONLY_VS_BF16 else "miss"
        else:
            verdict = "info"
        verdicts.append(verdict)
        rows.append(f"| {c['model']} | {c['n']} x {c['k']} | {c['m']} | {fp_us(c)} "
                    f"| {c['weight_gbps'] / 1e3:.2f} | {c['pct_copy']:.1f}% | {us(ref) if ref else '-'} "
                    f"| {format(r, '.2f') + 'x' if r else '-'} | {target} | {verdict} |")
    if len(rows) == 2:
        return
    g = geomean(speedups)
    scales = "128 x 128 block" if scaling == "weight_only_block" else "per-channel"
    out += [f"### Weight-only FP8 (W8A16, weight_only_mm, {scales} scales) vs the BF16 GEMM of the same shape", "",
            *rows, "",
            (f"Geometric mean speedup over bf16: {g:.3f}x ({len(speedups)} cases)" if g else "No bf16 reference")
            + "; " + counts(verdicts) + ".", ""]
    summary.append((scaling, g, len(speedups), min(speedups or [0]) or None, counts(verdicts)))


def prefer_graph_times(cases):
    """At decode sizes bench_gemm also times CUDA-graph replays of the call (graph_us), as the torch
    peer does its *_graph variants: the faster of the two is fp8kit's time, marked 'graph'."""
    for c in cases:
        g = c.get("graph_us")
        if "error" in c or not g or g >= c["median_us"]:
            continue
        f = c["median_us"] / g
        c["median_us"] = g
        c["timed_as"] = "graph"
        for key in ("tflops", "pct_peak", "weight_gbps", "pct_copy", "pct_read"):
            if c.get(key) is not None:
                c[key] *= f


def fp_us(c):
    return us(c["median_us"]) + (" (graph)" if c.get("timed_as") == "graph" else "")


def report(fp, th):
    torch_cases = th["cases"] if th else []
    prefer_graph_times(fp["cases"])
    out = []
    dev = fp["device"]
    out.append(f"## FP8 GEMM ({dev['name']}, {fp['time_utc']})")
    out.append("")
    m = fp["method"]
    out.append(f"Copy ceiling in the same run: cudaMemcpyAsync 1 GiB D2D {fp['copy']['gbps']:.0f} GB/s (read + write)"
               + (f"; torch copy_ {th['copy']['gbps']:.0f} GB/s" if th and "copy" in th else "") + ". "
               f"L2 flush ({m['flush']}, 2x L2) before every timed launch; median of {m['min_reps']}-{m['max_reps']} "
               f"launches (~{m['target_ms']:.0f} ms per case); operands under 2x L2 rotated. Data: {m['data']}. "
               f"Block activation scales: {m.get('block_act_scales', 'column-major')}. % read (M <= 64): the time "
               "of streaming the same weight bytes alone (a read kernel, same run) over fp8kit's time.")
    if th:
        out.append(f"PyTorch {th.get('torch', '?')} (CUDA {th.get('cuda', '?')}), Triton {th.get('triton', 'n/a')}; "
                   "torch variants at M <= 16 also timed as CUDA-graph replays (*_graph), and fp8kit's calls "
                   "too ('graph' where faster); the fastest of each is compared.")
    else:
        out.append("No PyTorch results (gemm_torch.json missing): torch columns are empty.")
    out.append("")
    summary = []
    fp_cases = fp["cases"]
    dense_table("per_tensor", fp_cases, torch_cases, out, summary)
    dense_table("per_token_channel", fp_cases, torch_cases, out, summary)
    block_table(fp_cases, torch_cases, out, summary)
    bf16_table(fp_cases, torch_cases, out, summary)
    weight_only_table("weight_only", fp_cases, torch_cases, out, summary)
    weight_only_table("weight_only_block", fp_cases, torch_cases, out, summary)
    out.append("Columns: *fp8kit µs* median time of one scaled_mm call (CUDA events around it, L2 flushed before); "
               "*TFLOP/s* 2MNK / time; *weight TB/s* N*K weight bytes (2*N*K for bf16) / time, the decode figure "
               "of merit; *% copy* that over the copy ceiling; *speedup* torch µs / fp8kit µs. Targets "
               f"(PERF_TARGETS.md): dense geometric mean >= {DENSE_GEOMEAN}x torch._scaled_mm and no case below "
               f"{DENSE_MIN}x; >= {LARGE_TFLOPS:.0f} TFLOP/s at M >= {LARGE_MIN_M} and >= {DECODE_PCT_COPY:.0f}% of "
               f"copy (~3.6 TB/s) at M <= {DECODE_MAX_M}, both for weights >= 32 MiB; block >= "
               f"{BLOCK_VS_DEEPGEMM:.1f}x DeepGEMM and >= {BLOCK_VS_TRITON:.0f}x vLLM's Triton kernel.")
    out.append("")
    out.append("| scaling | geometric mean speedup | cases | lowest | verdicts |")
    out.append("|---|---:|---:|---:|---|")
    for scaling, g, n, low, verdicts in summary:
        peer = {"block": "torch cuBLASLt block (else Triton)", "weight_only": "bf16 GEMM",
                "weight_only_block": "bf16 GEMM"}.get(scaling, "torch")
        out.append(f"| {scaling} (vs {peer}) | {format(g, '.3f') + 'x' if g else '-'} | {n} "
                   f"| {format(low, '.2f') + 'x' if low else '-'} | {verdicts} |")
    failed = [c for c in torch_cases if "error" in c]
    bad_checks = [c for c in torch_cases if c.get("check_ok") is False]
    if failed or bad_checks or (th and th.get("notes")):
        out.append("")
        out.append("PyTorch variants that did not run or did not match their f32 emulation:")
        for note in (th.get("notes", []) if th else []):
            out.append(f"- {note}")
        seen = set()
        for c in failed:
            key = (c["variant"], c["error"])
            if key not in seen:
                seen.add(key)
                out.append(f"- {c['variant']} ({c['shape']}, M={c['m']}): {c['error']}")
        for c in bad_checks:
            out.append(f"- {c['variant']} ({c['shape']}, M={c['m']}): rel L2 vs emulation {c['rel_l2_vs_emulation']}")
    out.append("")
    out.append("Produced by:")
    out.append("")
    out.append("```")
    out += COMMANDS
    out.append("```")
    return "\n".join(out) + "\n"


def main():
    d = os.environ.get("FP8KIT_RESULTS_DIR") or "gpu-results"
    p = argparse.ArgumentParser(description="Markdown report of bench_gemm and its PyTorch peer.")
    p.add_argument("inputs", nargs="*", help="bench_gemm.json [gemm_torch.json] (same as --fp8kit, --torch)")
    p.add_argument("--fp8kit", default=os.path.join(d, "bench_gemm.json"))
    p.add_argument("--torch", default=os.path.join(d, "gemm_torch.json"))
    p.add_argument("--out", default="", help="also write the markdown here")
    args = p.parse_args()
    if len(args.inputs) > 2:
        p.error("at most two positional inputs: bench_gemm.json [gemm_torch.json]")
    if args.inputs:
        args.fp8kit = args.inputs[0]
    if len(args.inputs) > 1:
        args.torch = args.inputs[1]
    fp = load(args.fp8kit)
    if fp is None:
        print(f"gemm_report: {args.fp8kit} not found", file=sys.stderr)
        return 1
    text = report(fp, load(args.torch))
    sys.stdout.write(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
