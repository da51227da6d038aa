#!/usr/bin/env python3
"""Re-runs the reliability probe of 2026-12-01 against a built fp8kit, one line per case.

Each case is a reproducer of the probe's table (every failing row, F1-F16, and the held rows that
touch the output life cycle, the checkpoint path policy and the parsers), plus the CLI checks of
the new-user issues. A line is `id | expectation | observed | HOLDS or FAILS`; the exit status
is 1 when a case fails. Everything happens in a scratch directory (removed at the end unless
--keep); tmpfs mounts and another uid are used only as root, else those cases say SKIPPED.
  tests/tools/probe_rerun.py [--fp8kit build-cpu/fp8kit] [--san build-san/fp8kit] [--only f3]
                             [--markdown FILE]
--san names an ASan+UBSan build of the CLI (scripts/test-san's configuration): the parser and
hostile-FP8 cases run again under it and hold only without a sanitizer report. About a minute.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
I64 = 2**63 - 1
RESULTS = []
SAN_REPORTS = []  # sanitizer reports of the runs since the last recorded case


class Run:
    """A finished command: rc (None on timeout), stdout, stderr, seconds, peak RSS in MiB."""

    def __init__(self, rc, out, err, secs, rss):
        self.rc, self.out, self.err, self.secs, self.rss = rc, out, err, secs, rss

    def lines(self):
        return [line for line in self.err.splitlines() if line.strip()]

    def one_line(self):
        return len(self.lines()) == 1 and self.err.startswith("fp8kit: ")

    def brief(self):
        rc = "timeout" if self.rc is None else f"rc {self.rc}"
        text = self.err.strip().replace("\n", "\\n")
        return f"{rc}, {self.secs:.1f} s, {text[:150]!r}" if text else f"{rc}, {self.secs:.1f} s"


def limits(mem_gib=None, nproc=None, uid=None):
    def apply():
        if mem_gib and not SAN:  # ASan reserves terabytes of address space
            resource.setrlimit(resource.RLIMIT_AS, (mem_gib << 30, mem_gib << 30))
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
    return apply


def start(args, cwd, env=None, pre=None):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.Popen(args, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace", start_new_session=True, preexec_fn=pre)


def finish(proc, timeout, t0=None):
    """Waits for `proc` (killing its process group after `timeout` s); its own peak RSS via wait4."""
    t0 = t0 or time.time()
    texts = {}
    readers = [threading.Thread(target=lambda k=k, f=f: texts.__setitem__(k, f.read()))
               for k, f in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    rc, usage = None, None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            rc = os.waitstatus_to_exitcode(status)
            break
        if time.time() - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    proc.returncode = -9 if rc is None else rc
    for r in readers:
        r.join()
    err = texts.get("err", "")
    if SAN and any(mark in err for mark in ("runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer")):
        SAN_REPORTS.append(err.strip().splitlines()[0][:120])
    return Run(rc, texts.get("out", ""), texts.get("err", ""), time.time() - t0, usage.ru_maxrss / 1024)


def fp8(*args, cwd, timeout=60, env=None, pre=None, tool=None):
    t0 = time.time()
    return finish(start([tool or FP8KIT, *args], cwd, env, pre), timeout, t0)


def traced(trace, inject, args, cwd):
    """fp8kit under strace, with a delay injected into the syscalls `trace`."""
    return start(["strace", "-f", "-o", "/dev/null", "-e", f"trace={trace}", "-e", f"inject={inject}", FP8KIT, *args], cwd)


def traced_child(strace_proc):
    """The pid of the fp8kit that a strace runs (never looked up by name: other runs may exist).
    strace forks short-lived test children first: the one wanted has fp8kit's executable."""
    tool = os.path.realpath(FP8KIT)
    for _ in range(200):
        try:
            with open(f"/proc/{strace_proc.pid}/task/{strace_proc.pid}/children") as f:
                for pid in f.read().split():
                    if os.path.realpath(f"/proc/{pid}/exe") == tool:
                        return int(pid)
        except OSError:
            pass
        time.sleep(0.02)
    raise RuntimeError("strace started no fp8kit")


def record(case, expectation, observed, holds):
    case = ("[san] " if SAN else "") + case
    if SAN_REPORTS:
        observed, holds = f"{observed}; sanitizer: {SAN_REPORTS[0]!r}", False
        SAN_REPORTS.clear()
    RESULTS.append((case, expectation, observed, holds))
    print(f"{case} | {expectation} | {observed} | {'HOLDS' if holds else 'FAILS'}", flush=True)


def skipped(case, expectation, why):
    case = ("[san] " if SAN else "") + case
    RESULTS.append((case, expectation, f"SKIPPED ({why})", None))
    print(f"{case} | {expectation} | SKIPPED ({why}) | SKIPPED", flush=True)


# ---- files ---------------------------------------------------------------------------------------

def new_case(name):
    """A new, empty case directory (a name used before gets a number)."""
    case, n = os.path.join(SCRATCH, name), 1
    while os.path.exists(case):
        n += 1
        case = os.path.join(SCRATCH, f"{name}.{n}")
    os.makedirs(case)
    return case


def fresh(name):
    """A new case directory holding a copy of the demo (d/bf16, d/block, d/per-tensor, ...)."""
    case = new_case(name)
    shutil.copytree(DEMO, os.path.join(case, "d"), symlinks=True)
    return case


def edit(path, change):
    with open(path) as f:
        c = json.load(f)
    change(c)
    with open(path, "w") as f:
        json.dump(c, f)


def safetensors(path, tensors, raw=None):
    """tensors: name -> (dtype, shape, bytes)."""
    header, blobs, at = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    h = raw if raw is not None else json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def one(d, n, k, config=None):
    """The probe's `one DIR N K`: a BF16 checkpoint holding one down_proj N x K of 1.0."""
    os.makedirs(d, exist_ok=True)
    safetensors(d + "/model.safetensors", {"model.layers.0.mlp.down_proj.weight": ("BF16", [n, k], b"\x80\x3f" * (n * k))})
    with open(d + "/config.json", "w") as f:
        json.dump(config or {"architectures": ["Qwen3ForCausalLM"]}, f)


def fp8_block_checkpoint(d, block, scale_shape, weight_shape=(256, 256)):
    """An FP8 block checkpoint with one weight and a chosen weight_block_size and scale shape."""
    os.makedirs(d, exist_ok=True)
    n, k = weight_shape
    scale_count = 1
    for s in scale_shape:
        scale_count *= s
    safetensors(d + "/model.safetensors", {
        "model.layers.0.mlp.down_proj.weight": ("F8_E4M3", [n, k], b"\x38" * (n * k)),
        "model.layers.0.mlp.down_proj.weight_scale_inv": ("F32", list(scale_shape), struct.pack("<f", 1.0) * scale_count)})
    with open(d + "/config.json", "w") as f:
        json.dump({"architectures": ["Qwen3ForCausalLM"], "quantization_config": {
            "quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": block}}, f)


def listing(case, prefix):
    return sorted(n for n in os.listdir(case) if n.startswith(prefix) or n.startswith("." + prefix))


def leftovers(case, out):
    """What a run left beside OUT: work directories and old trees (the lock file is harmless)."""
    return [n for n in listing(case, out) if n != out and n != f".{out}.lock"]


def inspect_ok(case, d):
    return fp8("inspect", d, cwd=case).rc == 0


def clean_error(r, *words):
    return r.rc == 1 and r.one_line() and "internal error" not in r.err and all(w in r.err for w in words)


def set_nan_scale(path, suffix, value):
    """The first `suffix` tensor's first F32 value of a safetensors file, set to `value`."""
    with open(path, "rb") as f:
        b = bytearray(f.read())
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    s = sorted(k for k in h if k.endswith(suffix))[0]
    o = 8 + n + h[s]["data_offsets"][0]
    b[o:o + 4] = struct.pack("<f", value)
    with open(path, "wb") as f:
        f.write(b)


# ---- the failing rows ----------------------------------------------------------------------------

def f1_zero_block_sizes():
    for block in ([0, 128], [128, 0], [0, 0]):
        case = fresh(f"f1-{block[0]}-{block[1]}")
        edit(case + "/d/block/config.json", lambda c: c["quantization_config"].__setitem__("weight_block_size", block))
        i = fp8("inspect", "d/block", cwd=case)
        q = fp8("dequantize", "-q", "d/block", "dq", cwd=case)
        record(f"F1 weight_block_size {block}", "inspect rc 3 naming it; dequantize one-line error, nothing left",
               f"inspect rc {i.rc}; dequantize {q.brief()}; left {listing(case, 'dq')}",
               i.rc == 3 and "weight_block_size" in i.out + i.err and clean_error(q) and not listing(case, "dq"))
    case = fresh("f1-ct")
    def ct_block(c):
        w = c["quantization_config"]["config_groups"]["group_0"]["weights"]
        w["strategy"], w["block_structure"] = "block", [0, 128]
    edit(case + "/d/per-channel/config.json", ct_block)
    i = fp8("inspect", "d/per-channel", cwd=case)
    q = fp8("dequantize", "-q", "d/per-channel", "dq", cwd=case)
    record("F1 compressed-tensors block_structure [0,128]", "problem reported, no signal",
           f"inspect rc {i.rc}; dequantize {q.brief()}", i.rc == 3 and clean_error(q) and not listing(case, "dq"))


def f2_concurrent_runs():
    case = fresh("f2")
    a = traced("rename", "rename:delay_exit=2000000:when=1", ["quantize", "-q", "d/bf16", "out"], case)
    time.sleep(1)
    b = traced("pwrite64", "pwrite64:delay_enter=3000000:when=3", ["quantize", "-q", "d/bf16", "out"], case)
    ra, rb = finish(a, 60), finish(b, 60)
    files = sorted(os.listdir(case + "/out")) if os.path.isdir(case + "/out") else []
    ok = sorted([ra.rc, rb.rc]) == [0, 1] and clean_error(rb if rb.rc else ra, "out") and inspect_ok(case, "out")
    record("F2 two quantize runs to one OUT (strace reproducer)", "one wins, the other fails clearly; OUT valid",
           f"A {ra.brief()}; B {rb.brief()}; OUT {files}; left {leftovers(case, 'out')}",
           ok and "model.safetensors" in files and not leftovers(case, "out"))
    # Four runs at once, no strace: exactly one may win, every loser fails with one line.
    case = fresh("f2-four")
    one(case + "/m", 2048, 2048)
    procs = [start([FP8KIT, "quantize", "-q", "m", "out"], case) for _ in range(4)]
    runs = [finish(p, 120) for p in procs]
    rcs = sorted(r.rc for r in runs)
    record("F2 four quantize runs to one OUT at once", "one rc 0, the others one-line errors; OUT valid",
           f"rcs {rcs}; errors {[r.err.strip()[:80] for r in runs if r.rc]}; left {leftovers(case, 'out')}",
           rcs == [0, 1, 1, 1] and all(clean_error(r) for r in runs if r.rc) and inspect_ok(case, "out")
           and not leftovers(case, "out"))


def f3_block_overflow():
    for block in (f"{I64},128", "99999999999999999999,128"):
        case = fresh("f3-cli")
        one(case + "/m", 256, 256)
        q = fp8("quantize", "-q", "--block", block, "m", "q", cwd=case)
        extra = ""
        holds = q.rc == 1 and q.one_line() and not listing(case, "q")
        if q.rc == 0:  # a valid checkpoint would do too: it must inspect clean and dequantize
            i = fp8("inspect", "q", cwd=case)
            d = fp8("dequantize", "-q", "q", "dq", cwd=case)
            extra = f"; inspect rc {i.rc}; dequantize {d.brief()}"
            holds = i.rc == 0 and d.rc == 0
        record(f"F3 quantize --block {block}", "one-line error, or a checkpoint that inspects and dequantizes",
               q.brief() + extra, holds)
    for block, scale in (([I64, 128], [0, 2]), ([128, I64], [2, 0]), ([-128, 128], [0, 2])):
        case = new_case(f"f3-{block[0]}-{block[1]}")
        fp8_block_checkpoint(case + "/c", block, scale)
        i = fp8("inspect", "c", cwd=case)
        d = fp8("dequantize", "-q", "c", "dq", cwd=case)
        record(f"F3 weight_block_size {block}, weight_scale_inv {scale}",
               "inspect rc 3; dequantize one-line error naming the checkpoint, nothing left",
               f"inspect rc {i.rc}; dequantize {d.brief()}",
               i.rc == 3 and clean_error(d, "error: c") and not listing(case, "dq"))
    case = fresh("f3-max-max")
    edit(case + "/d/block/config.json", lambda c: c["quantization_config"].__setitem__("weight_block_size", [I64, I64]))
    i = fp8("inspect", "d/block", cwd=case)
    d = fp8("dequantize", "-q", "d/block", "dq", cwd=case)
    record("F3 weight_block_size [2^63-1, 2^63-1] on the demo's block scales", "inspect rc 3; dequantize refuses",
           f"inspect rc {i.rc}; dequantize {d.brief()}", i.rc == 3 and clean_error(d) and not listing(case, "dq"))
    # One block per weight: the [1, 1] scale is the block scale (fp8kit's own output of a 128 x 128
    # weight), so inspect and dequantize both accept it.
    for label, block in (("[2^63-1, 256]", [I64, 256]), ("[128, 128], fp8kit's own output", None)):
        case = new_case(f"f3-one-block-{block is None}")
        if block:
            fp8_block_checkpoint(case + "/c", block, [1, 1])
        else:
            one(case + "/m", 128, 128)
            fp8("quantize", "-q", "--block", "128,128", "m", "c", cwd=case)
        i = fp8("inspect", "c", cwd=case)
        d = fp8("dequantize", "-q", "c", "dq", cwd=case)
        record(f"F3 one-block weight, weight_block_size {label}, scale [1, 1]",
               "a valid checkpoint: inspect rc 0, dequantize rc 0",
               f"inspect rc {i.rc} {i.out.strip().splitlines()[-1][:90]!r}; dequantize {d.brief()}", i.rc == 0 and d.rc == 0)
    case = new_case("f3-shape")
    os.makedirs(case + "/m")
    safetensors(case + "/m/model.safetensors", {"model.layers.0.mlp.down_proj.weight": ("BF16", [I64, 0], b"")})
    with open(case + "/m/config.json", "w") as f:
        json.dump({"architectures": ["Qwen3ForCausalLM"]}, f)
    q = fp8("quantize", "-q", "m", "q", cwd=case)
    record("F3 shape [2^63-1, 0] quantized", "one-line error or a valid output, no UB",
           q.brief(), (q.rc == 1 and q.one_line()) or (q.rc == 0 and inspect_ok(case, "q")))


def f4_threads():
    case = fresh("f4")
    for value in ("100000", "1e6", "99999999999", "0", "-1", "abc", "", "2147483648", "1000"):
        r = fp8("quantize", "-q", "d/bf16", "o", cwd=case, timeout=30, env={"FP8KIT_NUM_THREADS": value})
        record(f"F4 FP8KIT_NUM_THREADS={value!r}", "rc 2, one line naming the variable (empty: the default)",
               r.brief(), (r.rc == 2 and r.one_line() and "FP8KIT_NUM_THREADS" in r.err) or (value == "" and r.rc == 0))
        shutil.rmtree(case + "/o", ignore_errors=True)
    for value in ("64", "1"):
        r = fp8("quantize", "-q", "d/bf16", "o", cwd=case, timeout=60, env={"FP8KIT_NUM_THREADS": value})
        record(f"F4 FP8KIT_NUM_THREADS={value}", "works", r.brief(), r.rc == 0)
        shutil.rmtree(case + "/o", ignore_errors=True)
    if os.geteuid() != 0:
        return skipped("F4 thread creation failing (RLIMIT_NPROC as uid 65534)", "no hang", "needs root")
    os.makedirs(case + "/o4")
    os.chmod(case + "/o4", 0o777)
    os.chmod(case, 0o755)
    for nproc in (1, 4):
        r = fp8("quantize", "-q", "d/bf16", f"o4/q{nproc}", cwd=case, timeout=60, env={"FP8KIT_NUM_THREADS": "64"},
                pre=limits(nproc=nproc, uid=65534))
        record(f"F4 64 threads, RLIMIT_NPROC {nproc}, uid 65534", "no hang: works with the threads it got, or one line",
               r.brief(), r.rc == 0 or (r.rc is not None and r.rc in (1, 2) and r.one_line()))


def f5_truncated_while_read():
    case = new_case("f5")
    one(case + "/big1", 1024, 1024)
    p = traced("pwrite64", "pwrite64:delay_enter=2000000:when=1", ["quantize", "-q", "big1", "out"], case)
    time.sleep(1)
    os.truncate(case + "/big1/model.safetensors", 4096)
    r = finish(p, 60)
    record("F5 shard truncated while quantize reads it", "one-line error naming the file, nothing left",
           f"{r.brief()}; left {listing(case, 'out')}",
           clean_error(r, "big1/model.safetensors") and not leftovers(case, "out") and not os.path.exists(case + "/out"))


def f6_hf_quant_config():
    case = fresh("f6")
    os.mkfifo(case + "/d/bf16/hf_quant_config.json")
    i = fp8("inspect", "d/bf16", cwd=case, timeout=20)
    d = fp8("dequantize", "-q", "d/bf16", "dq", cwd=case, timeout=20)
    record("F6 hf_quant_config.json is a FIFO", "inspect and dequantize: one-line error, no hang",
           f"inspect {i.brief()}; dequantize {d.brief()}", clean_error(i, "hf_quant_config.json") and clean_error(d))
    os.unlink(case + "/d/bf16/hf_quant_config.json")
    os.symlink("/dev/zero", case + "/d/bf16/hf_quant_config.json")
    i = fp8("inspect", "d/bf16", cwd=case, timeout=20, pre=limits(mem_gib=4))
    record("F6 hf_quant_config.json -> /dev/zero", "one-line error, bounded memory",
           f"{i.brief()}, peak {i.rss:.0f} MiB", clean_error(i, "hf_quant_config.json"))


def f7_users_partial():
    case = fresh("f7")
    os.mkdir(case + "/res.partial")
    with open(case + "/res.partial/notes.txt", "w") as f:
        f.write("mine\n")
    with open(case + "/res2.partial", "w") as f:
        f.write("mine\n")
    os.mkdir(case + "/target")
    os.symlink("target", case + "/res3.partial")
    runs = [fp8("quantize", "-q", "d/bf16", out, cwd=case) for out in ("res", "res2", "res3")]
    kept = (open(case + "/res.partial/notes.txt").read() == "mine\n" and open(case + "/res2.partial").read() == "mine\n"
            and os.path.islink(case + "/res3.partial"))
    record("F7 a user's OUT.partial (directory, file, link), no --force", "left alone; quantize works",
           f"rcs {[r.rc for r in runs]}; user's files kept: {kept}", kept and all(r.rc == 0 for r in runs))


def f8_parent_of_input():
    case = fresh("f8")
    os.makedirs(case + "/a/models")
    shutil.copytree(case + "/d/bf16", case + "/a/models/q")
    with open(case + "/a/other.txt", "w") as f:
        f.write("keep\n")
    os.symlink("a", case + "/alink")
    for out in ("a", "a/models", "alink", "./a/", "."):
        r = fp8("quantize", "-q", "--force", "a/models/q", out, cwd=case)
        intact = os.path.isfile(case + "/a/other.txt") and inspect_ok(case, "a/models/q")
        record(f"F8 quantize --force a/models/q {out}", "refused as OUT == IN; the input and its siblings intact",
               f"{r.brief()}; intact: {intact}", r.rc == 1 and r.one_line() and intact)


def f9_many_keys():
    for keys in (80000, 200000):
        case = fresh(f"f9-{keys}")
        edit(case + "/d/bf16/config.json", lambda c: c.__setitem__("junk", {"k%07d" % i: 0 for i in range(keys)}))
        r = fp8("inspect", "d/bf16", cwd=case, timeout=120)
        record(f"F9 config.json with {keys} keys in one object", "roughly linear: under 5 s",
               r.brief() if r.rc else f"rc 0, {r.secs:.2f} s", r.rc == 0 and r.secs < 5)


def f10_bad_scales():
    for value, label in ((float("nan"), "NaN"), (float("inf"), "inf"), (-1.0, "-1"), (0.0, "0")):
        for scheme, suffix in (("block", "weight_scale_inv"), ("per-tensor", "weight_scale")):
            case = fresh(f"f10-{scheme}-{label}")
            set_nan_scale(case + f"/d/{scheme}/model.safetensors", suffix, value)
            i = fp8("inspect", f"d/{scheme}", cwd=case)
            d = fp8("dequantize", "-q", f"d/{scheme}", "dq", cwd=case)
            record(f"F10 {scheme} scale {label}", "inspect rc 3; dequantize refuses with one line, nothing left",
                   f"inspect rc {i.rc}; dequantize {d.brief()}", i.rc == 3 and clean_error(d) and not listing(case, "dq"))


def f11_redos():
    for n in (16, 24):
        case = fresh(f"f11-{n}")
        pattern = "re:" + "(a*)*" * n + "b"
        edit(case + "/d/block/config.json",
             lambda c: c["quantization_config"].__setitem__("ignored_layers", [pattern]))
        i = fp8("inspect", "d/block", cwd=case, timeout=60)
        d = fp8("dequantize", "-q", "d/block", "dq", cwd=case, timeout=60)
        record(f"F11 ignored_layers re:(a*)*x{n}b", "bounded time (under 5 s each)",
               f"inspect rc {i.rc} {i.secs:.2f} s; dequantize rc {d.rc} {d.secs:.2f} s",
               i.rc is not None and d.rc is not None and i.secs < 5 and d.secs < 5)


def f12_loading_sizes():
    changes = {"num_hidden_layers=1e9": {"num_hidden_layers": 10**9},
               "heads*head_dim overflow": {"num_attention_heads": 2**62, "head_dim": 2**62},
               "hidden_size=2^62": {"hidden_size": 2**62}}
    for label, change in changes.items():
        case = fresh("f12")
        edit(case + "/d/block/config.json", lambda c: c.update(change))
        r = fp8("inspect", "--loading", "d/block", cwd=case, timeout=30, pre=limits(mem_gib=4))
        shutil.rmtree(case)
        record(f"F12 inspect --loading, {label}", "bounded: an error or a problem, quickly, in little memory",
               f"{r.brief()}, peak {r.rss:.0f} MiB", r.rc in (1, 3) and r.secs < 10 and "internal error" not in r.err)


def f13_kill_during_commit():
    # A 3 s delay at one syscall of the --force run, and a kill -9 in it: during the rename of
    # config.json into the work directory, just before the exchange of OUT (the marker already
    # off the new tree), and just after it (the old tree not yet marked).
    for label, trace, inject in (("before the commit", "rename", "rename:delay_exit=3000000:when=2"),
                                 ("just before the exchange", "renameat2", "renameat2:delay_enter=3000000:when=1"),
                                 ("just after the exchange", "renameat2", "renameat2:delay_exit=3000000:when=1")):
        case = fresh("f13")
        fp8("quantize", "-q", "d/bf16", "o", cwd=case)
        before = open(case + "/o/model.safetensors", "rb").read()
        p = traced(trace, inject, ["quantize", "-q", "--force", "--scheme", "per-tensor", "d/bf16", "o"], case)
        child = traced_child(p)
        time.sleep(1.5)
        os.kill(child, signal.SIGKILL)
        finish(p, 30)
        present = inspect_ok(case, "o")
        now = open(case + "/o/model.safetensors", "rb").read() if present else b""
        which = "old" if now == before else ("new" if present else "none")
        after_kill = leftovers(case, "o")
        rerun = fp8("quantize", "-q", "--force", "d/bf16", "o", cwd=case)
        record(f"F13 kill -9 of quantize --force {label}", "OUT is the old or the new checkpoint",
               f"OUT {which}; left {after_kill}; rerun rc {rerun.rc}, then left {leftovers(case, 'o')}",
               present and rerun.rc == 0 and inspect_ok(case, "o"))


def f14_non_string_keys():
    for key in ("quant_method", "activation_scheme"):
        case = fresh("f14")
        edit(case + "/d/block/config.json", lambda c: c["quantization_config"].__setitem__(key, 5))
        r = fp8("inspect", "d/block", cwd=case)
        shutil.rmtree(case)
        record(f"F14 quantization_config.{key} = 5", "one line naming the file and key, no internal error",
               r.brief(), r.rc in (1, 3) and "internal error" not in r.out + r.err and key in r.out + r.err
               and "config.json" in r.out + r.err)
    case = fresh("f14-modelopt")
    edit(case + "/d/block/config.json", lambda c: c.pop("quantization_config"))
    with open(case + "/d/block/hf_quant_config.json", "w") as f:
        json.dump({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": 5}}, f)
    r = fp8("inspect", "d/block", cwd=case)
    record("F14 hf_quant_config.json quant_algo = 5", "one line naming the file and key, no internal error",
           r.brief(), r.rc in (1, 3) and "internal error" not in r.out + r.err and "quant_algo" in r.out + r.err
           and "hf_quant_config.json" in r.out + r.err)


def f15_newline_in_name():
    case = fresh("f15")
    os.mkdir(case + "/nl")
    shutil.copy(case + "/d/bf16/config.json", case + "/nl/")
    with open(case + "/nl/a\nfp8kit: ok.safetensors", "wb") as f:
        f.write(b"\x03\0\0\0\0\0\0\0{x}")
    r = fp8("inspect", "nl", cwd=case)
    q = fp8("quantize", "-q", "nl", "o", cwd=case)
    record("F15 newline in a shard's file name", "one-line errors", f"inspect {r.brief()}; quantize {q.brief()}",
           clean_error(r) and clean_error(q))


def f16_no_tensors():
    case = fresh("f16")
    os.mkdir(case + "/e")
    shutil.copy(case + "/d/bf16/config.json", case + "/e/")
    with open(case + "/e/model.safetensors", "wb") as f:
        f.write(b"\x02\0\0\0\0\0\0\0{}")
    r = fp8("quantize", "-q", "e", "eo", cwd=case)
    record("F16 a shard with no tensors", "refused with one line, no OUT", f"{r.brief()}; left {listing(case, 'eo')}",
           clean_error(r, "error: e", "model.safetensors") and not listing(case, "eo"))


# ---- held rows that touch the changed code -------------------------------------------------------

def h_kill_mid_run():
    case = new_case("h-kill")
    one(case + "/m", 2048, 2048)
    trace = os.path.join(case, "count.trace")
    subprocess.run(["strace", "-f", "-o", trace, "-e", "trace=pwrite64", FP8KIT, "quantize", "-q", "m", "count"],
                   cwd=case, stdout=subprocess.DEVNULL, check=True)
    writes = sum(1 for line in open(trace) if "pwrite64(" in line)
    shutil.rmtree(case + "/count")
    for when in sorted({max(2, round(writes * f)) for f in (0.1, 0.5, 0.9)}):  # of `writes` pwrite calls
        p = traced("pwrite64", f"pwrite64:delay_enter=3000000:when={when}", ["quantize", "-q", "m", "out"], case)
        child = traced_child(p)
        time.sleep(1.5)
        os.kill(child, signal.SIGKILL)
        finish(p, 30)
        absent = not os.path.exists(case + "/out")
        left = leftovers(case, "out")
        r = fp8("quantize", "-q", "m", "out", cwd=case)
        record(f"kill -9 of quantize at its write {when} of {writes}", "OUT absent; the next run removes the leftover",
               f"OUT absent: {absent}; left {len(left)}; rerun rc {r.rc}, left {leftovers(case, 'out')}",
               absent and r.rc == 0 and not leftovers(case, "out") and inspect_ok(case, "out"))
        shutil.rmtree(case + "/out")


def h_full_and_read_only_disks():
    if os.geteuid() != 0:
        return skipped("OUT on a full / read-only tmpfs", "clear error, nothing left", "needs root")
    case = new_case("h-disk")
    one(case + "/m", 2048, 2048)
    for label, opts in (("a 1 MiB tmpfs (ENOSPC in a shard)", "size=1m"), ("a 4-inode tmpfs (ENOSPC at a file)", "size=64m,nr_inodes=4"),
                        ("a read-only tmpfs", "ro,size=1m")):
        mnt = os.path.join(case, "mnt")
        os.makedirs(mnt, exist_ok=True)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", mnt]).returncode != 0:
            skipped(f"OUT on {label}", "clear error, nothing left", "mount refused")
            continue
        try:
            r = fp8("quantize", "-q", "m", "mnt/q", cwd=case)
            left = sorted(os.listdir(mnt))
            record(f"OUT on {label}", "one-line error, nothing left but the lock file",
                   f"{r.brief()}; left {left}", clean_error(r) and all(n == ".q.lock" for n in left))
        finally:
            subprocess.run(["umount", mnt])
    os.makedirs(case + "/ro555")
    os.chmod(case + "/ro555", 0o555)
    os.chmod(case, 0o755)
    r = fp8("quantize", "-q", "m", "ro555/q", cwd=case, pre=limits(uid=65534))
    record("OUT in a chmod 555 directory as uid 65534", "one-line error", r.brief(), clean_error(r, "Permission denied"))


def h_odd_shards():
    case = fresh("h-shards")
    kinds = {"FIFO": lambda p: os.mkfifo(p), "directory": lambda p: os.mkdir(p),
             "symlink loop": lambda p: os.symlink(os.path.basename(p), p), "/dev/zero": lambda p: os.symlink("/dev/zero", p)}
    for label, make in kinds.items():
        d = os.path.join(case, "s")
        shutil.rmtree(d, ignore_errors=True)
        os.mkdir(d)
        shutil.copy(case + "/d/bf16/config.json", d)
        make(d + "/model.safetensors")
        i = fp8("inspect", "s", cwd=case, timeout=20, pre=limits(mem_gib=4))
        q = fp8("quantize", "-q", "s", "o", cwd=case, timeout=20, pre=limits(mem_gib=4))
        record(f"{label} as the single shard", "one-line errors, no hang", f"inspect {i.brief()}; quantize {q.brief()}",
               clean_error(i) and clean_error(q) and not listing(case, "o"))
    d = case + "/t"
    shutil.copytree(case + "/d/bf16", d)
    size = os.path.getsize(d + "/model.safetensors")
    os.truncate(d + "/model.safetensors", size // 2)
    q = fp8("quantize", "-q", "t", "o", cwd=case)
    record("a shard truncated before the run", "one-line error naming the file, nothing left", q.brief(),
           clean_error(q, "t/model.safetensors") and not listing(case, "o"))


def h_odd_aux_and_config():
    case = fresh("h-aux")
    os.symlink("loop.json", case + "/d/bf16/loop.json")
    t0 = time.time()
    q = fp8("quantize", "-q", "d/bf16", "o", cwd=case)
    record("symlink loop as an auxiliary file", "one-line error, before any work", q.brief(),
           clean_error(q, "loop.json") and not listing(case, "o"))
    os.unlink(case + "/d/bf16/loop.json")
    os.symlink("hf_quant_config.json", case + "/d/bf16/hf_quant_config.json")
    i = fp8("inspect", "d/bf16", cwd=case)
    record("symlink loop as hf_quant_config.json", "one-line error", i.brief(), clean_error(i, "hf_quant_config.json"))
    os.unlink(case + "/d/bf16/hf_quant_config.json")
    for label, make in (("FIFO", lambda p: os.mkfifo(p)), ("/dev/zero", lambda p: os.symlink("/dev/zero", p))):
        d = case + "/c"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(case + "/d/bf16", d)
        os.unlink(d + "/config.json")
        make(d + "/config.json")
        i = fp8("inspect", "c", cwd=case, timeout=20, pre=limits(mem_gib=4))
        record(f"config.json is a {label}", "an error, no hang", i.brief(), i.rc == 1 and i.one_line())
    d = case + "/idx"
    shutil.copytree(case + "/d/bf16", d)
    os.rename(d + "/model.safetensors", d + "/model-00001-of-00001.safetensors")
    with open(d + "/model-00001-of-00001.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        names = [k for k in json.loads(f.read(n)) if k != "__metadata__"]
    for bad in ("../x.safetensors", "/abs.safetensors", "x\n", "..", ""):
        wm = {k: "model-00001-of-00001.safetensors" for k in names}
        wm[names[0]] = bad
        with open(d + "/model.safetensors.index.json", "w") as f:
            json.dump({"metadata": {}, "weight_map": wm}, f)
        i = fp8("inspect", "idx", cwd=case)
        record(f"weight_map shard {bad!r}", "rejected with one line", i.brief(), clean_error(i))


def h_out_paths():
    case = fresh("h-out")
    os.mkdir(case + "/target")
    with open(case + "/target/mine.txt", "w") as f:
        f.write("mine\n")
    os.symlink("target", case + "/lnk")
    a = fp8("quantize", "-q", "d/bf16", "lnk", cwd=case)
    b = fp8("quantize", "-q", "--force", "d/bf16", "lnk", cwd=case)
    record("OUT a link to a directory: without, then with --force", "refused; then the link replaced, target untouched",
           f"{a.brief()}; then rc {b.rc}; link now a dir: {os.path.isdir(case + '/lnk') and not os.path.islink(case + '/lnk')};"
           f" target kept: {os.listdir(case + '/target') == ['mine.txt']}",
           a.rc == 1 and b.rc == 0 and not os.path.islink(case + "/lnk") and os.listdir(case + "/target") == ["mine.txt"])
    os.symlink("d/bf16", case + "/inlink")
    for out in ("d/bf16", "d/bf16/", "./d/bf16/.", "inlink"):
        for force in ([], ["--force"]):
            r = fp8("quantize", "-q", *force, "d/bf16", out, cwd=case)
            record(f"OUT == IN as {out!r} {' '.join(force)}".rstrip(), "refused", r.brief(),
                   clean_error(r, "input") and inspect_ok(case, "d/bf16"))
    r = fp8("quantize", "-q", "d/bf16", "d/bf16/fp8", cwd=case)
    again = fp8("quantize", "-q", "--force", "d/bf16", "d/bf16/fp8", cwd=case)
    record("OUT inside IN, twice (--force)", "works; the output is not copied into itself",
           f"rc {r.rc}, then rc {again.rc}; nested: {os.path.exists(case + '/d/bf16/fp8/fp8')}",
           r.rc == 0 and again.rc == 0 and not os.path.exists(case + "/d/bf16/fp8/fp8") and inspect_ok(case, "d/bf16/fp8"))
    with open(case + "/file", "w") as f:
        f.write("x")
    os.symlink("nowhere", case + "/dangling")
    for out, force in (("file", []), ("file", ["--force"]), ("dangling", []), ("dangling", ["--force"])):
        r = fp8("quantize", "-q", *force, "d/bf16", out, cwd=case)
        record(f"OUT a {'regular file' if out == 'file' else 'dangling link'} {' '.join(force)}".rstrip(), "refused",
               r.brief(), clean_error(r) and os.path.islink(case + "/dangling") and os.path.isfile(case + "/file"))


def h_nesting():
    case = fresh("h-nest")
    with open(case + "/d/bf16/config.json", "w") as f:
        f.write("[" * 100000)
    r = fp8("inspect", "d/bf16", cwd=case)
    record("100,000 nested [ in config.json", "one-line error", r.brief(), clean_error(r, "nests deeper"))


def h_readers_during_force():
    case = fresh("h-readers")
    fp8("quantize", "-q", "d/bf16", "o", cwd=case)
    stop, seen = threading.Event(), {"absent": 0, "no config": 0, "old tree emptied": 0, "looks": 0}

    def reader():
        while not stop.is_set():
            seen["looks"] += 1
            try:
                fd = os.open(case + "/o", os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                seen["absent"] += 1
                continue
            try:
                if "config.json" not in os.listdir(fd):
                    # The directory this reader had open was exchanged away and is being removed
                    # (the probe's note): a half tree under the name OUT would be a failure.
                    swapped = os.fstat(fd).st_ino != os.stat(case + "/o").st_ino
                    seen["old tree emptied" if swapped else "no config"] += 1
            finally:
                os.close(fd)
    t = threading.Thread(target=reader)
    t.start()
    rcs = [fp8("quantize", "-q", "--force", "d/bf16", "o", cwd=case).rc for _ in range(30)]
    stop.set()
    t.join()
    record("readers of OUT during 30 quantize --force runs", "OUT always there, never half",
           f"rcs all 0: {set(rcs) == {0}}; {seen['looks']} looks: absent {seen['absent']}, OUT without config.json "
           f"{seen['no config']}, an open old tree seen emptied {seen['old tree emptied']}",
           set(rcs) == {0} and seen["absent"] == 0 and seen["no config"] == 0)


def h_threads_flag():
    case = fresh("h-threads")
    for value in ("0", "-1", "abc", "1e12", "65"):
        r = fp8("--threads", value, "inspect", "d/bf16", cwd=case)
        record(f"--threads {value}", "rc 2, one line with the range 1 to 64", r.brief(),
               r.rc == 2 and "1.8e308" not in r.err and ("64" in r.err))


def i23_items():
    case = fresh("i23")
    edit(case + "/d/block/config.json", lambda c: c["quantization_config"].__setitem__("activation_scheme", "foo"))
    i = fp8("inspect", "d/block", cwd=case)
    j = fp8("inspect", "--json", "d/block", cwd=case)
    l = fp8("inspect", "--loading", "d/block", cwd=case)
    d = fp8("dequantize", "-q", "d/block", "dq", cwd=case)
    record("I23.2 activation_scheme \"foo\"", "inspect (text, --json, --loading) rc 3; dequantize refuses",
           f"inspect rc {i.rc}, --json rc {j.rc}, --loading rc {l.rc}; dequantize {d.brief()}",
           i.rc == 3 and j.rc == 3 and l.rc == 3 and clean_error(d, "activation scheme"))
    for label, change in (("weight_block_size with 3 entries", {"weight_block_size": [128, 128, 128]}),
                          ("block + static", {"activation_scheme": "static"})):
        case = fresh("i23b")
        edit(case + "/d/block/config.json", lambda c: c["quantization_config"].update(change))
        i = fp8("inspect", "d/block", cwd=case)
        d = fp8("dequantize", "-q", "d/block", "dq", cwd=case)
        shutil.rmtree(case)
        record(f"I23.2 {label}", "inspect rc 3; dequantize refuses", f"inspect rc {i.rc}; dequantize {d.brief()}",
               i.rc == 3 and clean_error(d))
    case = fresh("i23c")
    tree = {"modules.json": "[]", "1_Pooling/config.json": "{}", "tokenizer.json": "{}", "README.md": "card"}
    for rel, text in tree.items():
        os.makedirs(os.path.dirname(os.path.join(case, "d/bf16", rel)), exist_ok=True)
        with open(os.path.join(case, "d/bf16", rel), "w") as f:
            f.write(text)
    q = fp8("quantize", "-q", "d/block".replace("block", "bf16"), "o", cwd=case)
    copied = all(os.path.isfile(os.path.join(case, "o", rel)) for rel in tree)
    record("I23.3 the whole input tree copied (1_Pooling/, modules.json, ...)", "every file in OUT",
           f"rc {q.rc}; all copied: {copied}", q.rc == 0 and copied)
    # /usr/bin/time's own child: a child of this Python process inherits its peak RSS.
    rss, rss_inspect = (int(fp8(*args, cwd=case, tool="/usr/bin/time").err.split()[-1]) / 1024
                        for args in (["-f", "%M", FP8KIT, "--version"], ["-f", "%M", FP8KIT, "inspect", "d/bf16"]))
    record("I23.4 peak RSS of --version and of inspect", "a few MiB (was 210 MiB)",
           f"--version {rss:.1f} MiB, inspect {rss_inspect:.1f} MiB", rss < 32 and rss_inspect < 64)


def san_cases():
    """The parser and hostile-FP8 cases under the ASan+UBSan build: no report, same outcome."""
    global FP8KIT, SAN
    FP8KIT, SAN = SAN_TOOL, True
    try:
        for fn in (f1_zero_block_sizes, f3_block_overflow, f10_bad_scales, f12_loading_sizes, f14_non_string_keys,
                   f15_newline_in_name, f16_no_tensors, h_nesting):
            guarded(fn)
        case = fresh("san-flows")
        for scheme in ([], ["--scheme", "per-tensor"], ["--scheme", "per-channel"], ["--block", "1,1"], ["--ue8m0"]):
            q = fp8("quantize", "-q", *scheme, "d/bf16", "q", cwd=case, timeout=300)
            l = fp8("inspect", "--loading", "q", cwd=case, timeout=300)
            d = fp8("dequantize", "-q", "q", "dq", cwd=case, timeout=300)
            clean = all(r.rc == 0 and "Sanitizer" not in r.err and "runtime error" not in r.err for r in (q, l, d))
            record(f"quantize {' '.join(scheme) or '(block)'}, inspect --loading, dequantize", "clean",
                   f"rcs {q.rc} {l.rc} {d.rc}", clean)
            shutil.rmtree(case + "/q", ignore_errors=True)
            shutil.rmtree(case + "/dq", ignore_errors=True)
    finally:
        FP8KIT, SAN = MAIN_TOOL, False


def guarded(fn):
    """A case whose script breaks is a failure of that case, not the end of the re-run."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        record(fn.__name__, "the case runs", f"the case broke: {type(e).__name__}: {e}", False)


CASES = [f1_zero_block_sizes, f2_concurrent_runs, f3_block_overflow, f4_threads, f5_truncated_while_read,
         f6_hf_quant_config, f7_users_partial, f8_parent_of_input, f9_many_keys, f10_bad_scales, f11_redos,
         f12_loading_sizes, f13_kill_during_commit, f14_non_string_keys, f15_newline_in_name, f16_no_tensors,
         h_kill_mid_run, h_full_and_read_only_disks, h_odd_shards, h_odd_aux_and_config, h_out_paths, h_nesting,
         h_readers_during_force, h_threads_flag, i23_items]


def main():
    global FP8KIT, MAIN_TOOL, SAN_TOOL, SAN, SCRATCH, DEMO
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fp8kit", default=os.path.join(ROOT, "build-cpu", "fp8kit"))
    ap.add_argument("--san", help="an ASan+UBSan build of fp8kit: the parser and FP8 cases again under it")
    ap.add_argument("--only", help="run the cases whose function name contains this (f3, h_out, ...)")
    ap.add_argument("--scratch", help="work here instead of a new temporary directory")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--markdown", help="also write the results as a Markdown table to this file")
    args = ap.parse_args()
    FP8KIT = MAIN_TOOL = os.path.abspath(args.fp8kit)
    SAN_TOOL, SAN = (os.path.abspath(args.san) if args.san else None), False
    if not shutil.which("strace"):
        sys.exit("probe_rerun: strace is needed (apt-get install strace)")
    SCRATCH = os.path.abspath(args.scratch) if args.scratch else tempfile.mkdtemp(prefix="fp8kit-probe-")
    os.makedirs(SCRATCH, exist_ok=True)
    os.chmod(SCRATCH, 0o755)
    DEMO = os.path.join(SCRATCH, "demo")
    try:
        subprocess.run([FP8KIT, "demo", "--dir", DEMO], check=True, stdout=subprocess.DEVNULL)
        os.environ.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        os.environ.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        for fn in CASES:
            if not args.only or args.only in fn.__name__:
                guarded(fn)
        if SAN_TOOL and not args.only:
            san_cases()
    finally:
        if not args.keep:
            shutil.rmtree(SCRATCH, ignore_errors=True)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| case | expected | observed | result |\n|---|---|---|---|\n")
            for case, expectation, observed, holds in RESULTS:
                cells = [c.replace("|", "\\|") for c in (case, expectation, observed)]
                verdict = "SKIPPED" if holds is None else ("HOLDS" if holds else "FAILS")
                f.write(f"| {cells[0]} | {cells[1]} | {cells[2]} | {verdict} |\n")
    failed = [r for r in RESULTS if r[3] is False]
    held = [r for r in RESULTS if r[3]]
    print(f"probe_rerun: {len(held)} held, {len(failed)} failed, {len(RESULTS) - len(held) - len(failed)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
