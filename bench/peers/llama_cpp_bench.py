#!/usr/bin/env python3
"""llama.cpp (through llama-cpp-python, benchmark venv only) as the CPU peer of fp8kit on the SmolLM2
fixture, for the BF16 and Q8_0 GGUF files bench/peers/setup_llama_cpp.sh writes:
- speed as `llama-bench -p 512 -n 128 -r 3` measures it: a 512-token prompt in one batch and 128 one-token
  steps from an empty context, n_threads 2, the median of --runs timed runs after one untimed run;
- accuracy over tests/fixtures/eval_text_sqlite_docs.txt: perplexity at ctx 512 (non-overlapping windows,
  every token but a window's first scored, the definition of tests/fixtures/check_with_transformers.py),
  and Q8_0 against BF16: mean KL divergence KL(P_bf16 || P_q8_0) and top-1 agreement over the same tokens;
- a greedy chat answer from each file. Prints a table and writes JSON (--out).
Usage: llama_cpp_bench.py [--gguf-dir D] [--runs 3] [--threads 2] [--check-only | --speed-only] [--out FILE]"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import llama_cpp
import numpy as np
import tokenizers

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("FP8KIT_CACHE_DIR") or Path.home() / ".cache" / "fp8kit")
TEXT = ROOT / "tests" / "fixtures" / "eval_text_sqlite_docs.txt"
KINDS = ("q8_0", "bf16")
CTX, PROMPT, GENERATE = 512, 512, 128


def load(path, threads, n_ctx, logits_all=False):
    return llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_threads=threads,
                           n_threads_batch=threads, logits_all=logits_all, verbose=False)


def timed(fn, runs):
    fn()  # untimed: first touch of the weights and buffers
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def speed(path, ids, threads, runs):
    llm = load(path, threads, PROMPT + GENERATE)

    def prompt():
        llm.reset()
        llm.eval(ids[:PROMPT])

    def generate():
        llm.reset()
        for token in ids[:GENERATE]:
            llm.eval([token])

    pp, pp_runs = timed(prompt, runs)
    tg, tg_runs = timed(generate, runs)
    return {"pp512_tok_s": PROMPT / pp, "tg128_tok_s": GENERATE / tg,
            "pp512_runs_s": pp_runs, "tg128_runs_s": tg_runs}


def log_softmax(logits):
    x = logits.astype(np.float64)
    x -= x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def accuracy(paths, ids, threads):
    """Perplexity of each file, and KL / top-1 of Q8_0 against BF16, window by window."""
    models = {k: load(p, threads, CTX, logits_all=True) for k, p in paths.items()}
    nll = {k: 0.0 for k in models}
    kl_sum, agree, count = 0.0, 0, 0
    for start in range(0, len(ids) - CTX + 1, CTX):
        window = ids[start:start + CTX]
        logp = {}
        for kind, llm in models.items():
            llm.reset()
            llm.eval(window)
            logp[kind] = log_softmax(np.asarray(llm.scores[:CTX - 1]))
            nll[kind] -= logp[kind][np.arange(CTX - 1), window[1:]].sum()
        p = np.exp(logp["bf16"])
        kl_sum += float((p * (logp["bf16"] - logp["q8_0"])).sum())
        agree += int((logp["bf16"].argmax(-1) == logp["q8_0"].argmax(-1)).sum())
        count += CTX - 1
    return {"scored_tokens": count, "perplexity": {k: float(np.exp(v / count)) for k, v in nll.items()},
            "q8_0_vs_bf16_mean_kld": kl_sum / count, "q8_0_vs_bf16_top1_agreement": agree / count}


def chat_answer(path, threads):
    llm = load(path, threads, 512)
    out = llm.create_chat_completion(messages=[{"role": "user", "content": "What is the capital of France?"}],
                                     temperature=0.0, top_k=1, max_tokens=32, seed=0)
    return out["choices"][0]["message"]["content"]


def machine():
    load_avg = os.getloadavg()
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo"], capture_output=True, text=True).stdout
    return {"nproc": os.cpu_count(), "loadavg_1_5_15": [round(x, 2) for x in load_avg],
            "cpu": cpu.split(":", 1)[-1].strip(), "llama_cpp_python": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode().strip()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf-dir", default=str(CACHE / "smollm2-135m-instruct-gguf"))
    parser.add_argument("--model-dir", default=str(CACHE / "smollm2-135m-instruct"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--check-only", action="store_true", help="only the chat answer of each file")
    parser.add_argument("--speed-only", action="store_true", help="no perplexity / KL pass")
    parser.add_argument("--out")
    args = parser.parse_args()
    paths = {k: Path(args.gguf_dir) / f"smollm2-135m-instruct-{k}.gguf" for k in KINDS}
    missing = [str(p) for p in paths.values() if not p.exists()]
    if missing:
        print(f"llama_cpp_bench: no {', '.join(missing)}: run bench/peers/setup_llama_cpp.sh", file=sys.stderr)
        return 1
    result = {"machine": machine(), "answers": {k: chat_answer(p, args.threads) for k, p in paths.items()}}
    print(json.dumps(result["answers"], indent=2))
    if not args.check_only:
        tokenizer = tokenizers.Tokenizer.from_file(str(Path(args.model_dir) / "tokenizer.json"))
        text = TEXT.read_text(encoding="utf-8")
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        llama_ids = load(paths["q8_0"], args.threads, 512).tokenize(text.encode(), add_bos=False, special=False)
        result["eval_tokens"] = len(ids)
        result["llama_cpp_tokenizer_same_ids"] = llama_ids == ids
        result["speed"] = {k: speed(p, ids, args.threads, args.runs) for k, p in paths.items()}
        if not args.speed_only:
            result["accuracy"] = accuracy(paths, ids, args.threads)
        result["machine"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        print(f"\nllama.cpp {result['machine']['llama_cpp_python']} (llama-cpp-python), n_threads {args.threads}, "
              f"median of {args.runs}, nproc {result['machine']['nproc']}, load {result['machine']['loadavg_1_5_15']}")
        a = result.get("accuracy")
        print("| type | size MiB | pp512 tok/s | tg128 tok/s | perplexity ctx 512 |\n|---|---:|---:|---:|---:|")
        for k in KINDS:
            s = result["speed"][k]
            ppl = f"{a['perplexity'][k]:.3f}" if a else "-"
            print(f"| {k.upper()} | {paths[k].stat().st_size / 2**20:.0f} | {s['pp512_tok_s']:.1f} | "
                  f"{s['tg128_tok_s']:.1f} | {ppl} |")
        if a:
            print(f"Q8_0 vs BF16: mean KLD {a['q8_0_vs_bf16_mean_kld']:.5f}, top-1 agreement "
                  f"{100 * a['q8_0_vs_bf16_top1_agreement']:.2f}% over {a['scored_tokens']} tokens")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
