# Tokenizer encode throughput, fp8kit against Hugging Face tokenizers on the same documents and
# the same number of threads (tokenizers' encode_batch: RAYON_NUM_THREADS; fp8kit's encode_batch:
# FP8KIT_NUM_THREADS). The ids are compared document by document before any time is reported.
# The corpus (about --mb MB, built here, deterministic): the Python standard library's own .py
# files (code, comments, docstrings) with the multilingual strings of tests/python/
# tokenizer_corpus.py (accents, CJK, emoji, whitespace runs, digits) between them, cut into
# documents of about 4 KB at line ends.
#   python bench/peers/tokenizer_hf.py --bench build-cpu/bench/bench_tokenizer [--threads 2] [--mb 10]
#          [--smollm2 DIR] [--families llama3,qwen2,llama2] [--join]
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))


def build_corpus(megabytes):
    import tokenizer_corpus
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    extra = [t for t in tokenizer_corpus.CORPUS if t]
    docs, current, size, k = [], [], 0, 0
    for path in sorted(stdlib.rglob("*.py")):
        if "test" in path.parts or "site-packages" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for line in text.splitlines(keepends=True):
            current.append(line)
            size += len(line.encode("utf-8"))
            if len(current) % 25 == 0:
                current.append(extra[k % len(extra)] + "\n")
                k += 1
            if sum(len(c) for c in current) >= 4096:
                docs.append("".join(current))
                current = []
            if size >= megabytes * 1e6:
                return docs
    return docs


def hf_worker(model_dir, docs_path, ids_path, repeat, join):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(pathlib.Path(model_dir) / "tokenizer.json"))
    docs = [json.loads(line) for line in open(docs_path, encoding="utf-8")]
    if join:
        docs = ["".join(docs)]
    expected = [line.split() for line in open(ids_path)]

    def encode():
        return [tok.encode(docs[0], add_special_tokens=False)] if join else tok.encode_batch(docs, add_special_tokens=False)
    got = encode()
    mismatches = sum(1 for e, g in zip(expected, got) if [int(x) for x in e] != g.ids)
    if mismatches or len(expected) != len(got):
        print(json.dumps({"error": f"{mismatches} of {len(docs)} documents differ"}))
        return
    seconds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        encode()
        seconds.append(time.perf_counter() - t0)
    seconds.sort()
    size = sum(len(d.encode("utf-8")) for d in docs)
    median = seconds[len(seconds) // 2]
    print(json.dumps({"impl": "tokenizers", "seconds_median": median, "mb_per_s": size / median / 1e6,
                      "tokens": sum(len(g.ids) for g in got)}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--smollm2", default=os.path.join(os.environ.get("FP8KIT_CACHE_DIR") or
                                                      os.path.expanduser("~/.cache/fp8kit"), "smollm2-135m-instruct"))
    ap.add_argument("--families", default="llama3,qwen2,llama2")
    ap.add_argument("--join", action="store_true",
                    help="encode the documents as one text with one encode() call on each side (one thread)")
    ap.add_argument("--hf-worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hf_worker:
        hf_worker(args.hf_worker[0], args.hf_worker[1], args.hf_worker[2], int(args.hf_worker[3]), args.join)
        return
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_tokenizer."))
    docs = build_corpus(args.mb)
    docs_path = work / "docs.jsonl"
    docs_path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    size = sum(len(d.encode("utf-8")) for d in docs)
    models = []
    if (pathlib.Path(args.smollm2) / "tokenizer.json").exists():
        models.append(("SmolLM2-135M-Instruct", pathlib.Path(args.smollm2)))
    else:
        print(f"(skipping SmolLM2: {args.smollm2}/tokenizer.json is missing)")
    import tokenizer_families
    for family in filter(None, args.families.split(",")):
        d = work / family
        d.mkdir()
        # Trained on the benchmark corpus with a larger vocabulary than the tests use.
        (d / "tokenizer.json").write_text(tokenizer_families.build(family, docs[:400], vocab_size=16000),
                                          encoding="utf-8")
        models.append((f"{family}-style, 16k vocab (trained)", d))
    mode = "one text, one encode() call, 1 thread" if args.join else f"encode_batch, {args.threads} threads"
    print(f"corpus: {len(docs)} documents, {size / 1e6:.2f} MB; {mode}")
    print("| tokenizer | tokens | fp8kit MB/s | tokenizers MB/s | ratio |")
    print("|---|---|---|---|---|")
    for name, model_dir in models:
        ids_path = work / f"{model_dir.name}.ids"
        env = dict(os.environ, FP8KIT_NUM_THREADS=str(args.threads))
        r = subprocess.run([args.bench, str(model_dir), str(docs_path), "--ids", str(ids_path), "--repeat",
                            str(args.repeat)] + (["--join"] if args.join else []), capture_output=True, text=True,
                           env=env, check=True)
        ours = json.loads(r.stdout)
        env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads), TOKENIZERS_PARALLELISM="true")
        r = subprocess.run([sys.executable, __file__, "--bench", args.bench, "--hf-worker", str(model_dir),
                            str(docs_path), str(ids_path), str(args.repeat)] + (["--join"] if args.join else []),
                           capture_output=True, text=True, env=env, check=True)
        peer = json.loads(r.stdout)
        if "error" in peer:
            print(f"| {name} | ids differ: {peer['error']} | | | |")
            continue
        print(f"| {name} | {ours['tokens']} | {ours['mb_per_s']:.2f} | {peer['mb_per_s']:.2f} | "
              f"{ours['mb_per_s'] / peer['mb_per_s']:.2f}x |")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
