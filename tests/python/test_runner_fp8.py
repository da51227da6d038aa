# The model runner's FP8 forward against numpy: random models of the dense and MoE architectures,
# quantized by `fp8kit quantize` (per-tensor, block) or online, with dynamic or static activations.
# numpy applies the checkpoint's dequantized weights and quantizes the activations itself, from
# the formulas of docs/numerics.md (vLLM's scaled_fp8_quant, per_token_group_quant, the MoE's one
# per-tensor scale per chunk), over reference_forward.py's float32 math; fp8kit runs in f32 too
# (--allow-f32-quantized), so what differs is accumulation order, and the rare activation that
# sits on an FP8 rounding boundary and rounds the other way.
import hashlib
import json

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy

import random_models
from reference_forward import Model, read_checkpoint
from test_runner_forward import IDS, fp8kit_logits

FP8_MAX = np.float32(448.0)
# Sizes divisible by 32, so that 32 x 32 blocks tile every weight.
SIZES = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
         "intermediate_size": 96, "moe_intermediate_size": 32}
EXTRA = {}
MODELS = ["llama2", "qwen2", "qwen3", "qwen3-moe", "mixtral"]
# fp8kit against numpy's FP8 forward (max abs logit difference over max abs logit): measured
# 2.2e-07-2.4e-06 (docs/numerics.md, "Model runner"); bounded like the 16-bit forward.
FP8_BOUND = 5e-6


def e4m3(x):
    """Round to e4m3fn after the clamp (what cvt(clamp(v)) gives), back as float32."""
    return np.clip(x, -FP8_MAX, FP8_MAX).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)


class Ties:
    """Activations that land near an e4m3 rounding midpoint round either way under f32 noise (BF16
    weights make exact ratios like 3/8 of a row's max common: 168 lies between 160 and 176). An
    element's noise is relative to the magnitudes it was computed from, not to itself: a sum's
    error is a few ulp of its largest terms, so a small element left by cancellation (-0.0145 in
    a row whose largest is 5.5) can differ between numpy and fp8kit by 5e-6 of its own value. An
    element is a near-tie when it lies within TOL of its own magnitude plus ROW_TOL of its row's
    largest |x| (in units of the quantized ratio) of a midpoint; numpy's and fp8kit's inputs were
    measured at most 1.6e-6 of that row maximum apart. Each activation quantization records those
    elements by (input number in the forward, index), q, k and v sharing their input as fp8kit's
    fused qkv_proj does; a forward can force each one's direction, so the test can try both
    ways."""

    TOL = 2e-6
    ROW_TOL = 2e-6

    def __init__(self, forced=None):
        self.forced, self.found, self.calls, self.last = dict(forced or {}), [], -1, None
        self.went_up = {}  # site -> whether it took the larger magnitude

    def round(self, v, row_max):
        """e4m3 codes of the ratios v (as float32); row_max: the largest |x| of each element's row
        in units of v (broadcast to v), which scales the noise that v can carry."""
        digest = hashlib.sha1(np.ascontiguousarray(v).tobytes()).digest()
        if digest != self.last:  # a new input (q, k and v share theirs)
            self.calls, self.last = self.calls + 1, digest
        out = e4m3(v)
        away = np.sign(v) * (np.abs(v) * np.float32(self.TOL) + np.float32(self.ROW_TOL) * row_max)
        up, down = e4m3(v + away), e4m3(v - away)  # larger and smaller magnitude
        for i in np.flatnonzero(up != down):
            site = (self.calls, int(i))
            if site not in self.found:
                self.found.append(site)
            if site in self.forced:
                out.flat[i] = (up if self.forced[site] else down).flat[i]
            self.went_up[site] = bool(out.flat[i] == up.flat[i])
        return out


TIES = Ties()


def row_max(x):
    return np.max(np.abs(x), axis=-1, keepdims=True)


def per_token(x):  # dynamic per-token: s = max(absmax / 448, 1 / (448 * 512)); q = cvt(clamp(x / s))
    s = np.maximum(row_max(x) / FP8_MAX, np.float32(1.0) / (FP8_MAX * 512))
    return TIES.round(x / s, row_max(x) / s) * s


def per_tensor(x):  # dynamic per-tensor: s = absmax / 448 (no floor); q = cvt(clamp(x * (1 / s)))
    s = np.float32(np.max(np.abs(x)) / FP8_MAX)
    inv = np.float32(1.0) / s
    return TIES.round(x * inv, row_max(x) * inv) * s


def static(x, s):  # static: q = cvt(clamp(x * (1 / s)))
    s = np.float32(s)
    inv = np.float32(1.0) / s
    return TIES.round(x * inv, row_max(x) * inv) * s


def groups(x, g):  # 1 x g groups: s = max(absmax, 1e-10) / 448; q = cvt(clamp(x / s))
    xg = x.reshape(x.shape[0], -1, g)
    s = np.maximum(row_max(xg), np.float32(1e-10)) / FP8_MAX
    return (TIES.round(xg / s, row_max(x)[:, :, None] / s) * s).reshape(x.shape)


def requantize(q, s, s_max):  # requantize_with_max_scale: cvt(clamp(f32(f16(q * s)) * (1 / s_max)))
    dq = (q * np.float32(s)).astype(np.float16).astype(np.float32)
    return e4m3(dq * (np.float32(1.0) / np.float32(s_max)))


def write_model(path, name):
    config = {**random_models.config_of(name), **SIZES, **EXTRA}
    tensors = random_models.random_tensors(config, np.random.default_rng(17))
    path.mkdir(parents=True)
    safetensors.numpy.save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


def raw_tensors(path):
    return dict(safetensors.deserialize((path / "model.safetensors").read_bytes()))


def array(t):
    dtype = {"F8_E4M3": ml_dtypes.float8_e4m3fn, "BF16": ml_dtypes.bfloat16, "F32": np.float32}[t["dtype"]]
    return np.frombuffer(bytes(t["data"]), dtype=dtype).reshape(t["shape"]).astype(np.float32)


def make_static(src, dst, rng):
    """A per-tensor checkpoint with static activations: an input_scale per linear module (gate and
    up of an expert share theirs, as they share the input)."""
    tensors = raw_tensors(src)
    scales = {}
    # In name order: safetensors.deserialize lists the tensors in an order of its own that changes
    # from one process to the next, and drawing the scales in it gave each run other scales.
    for name in sorted(tensors):
        if name.endswith(".weight_scale"):
            module = name[: -len(".weight_scale")]
            shared = module.replace(".up_proj", ".gate_proj").replace(".w3", ".w1")
            scales.setdefault(shared, np.float32(rng.uniform(0.01, 0.03)))
            tensors[module + ".input_scale"] = {"dtype": "F32", "shape": [],
                                                "data": np.asarray(scales[shared], np.float32).tobytes()}
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"]["activation_scheme"] = "static"
    write_raw(dst, tensors, config)
    return dst


def make_per_shard(src, bf16_dir, dst):
    """A per-tensor checkpoint whose fused shards keep scales of their own (as AutoFP8 writes them):
    vLLM requantizes them to the largest through the fp16 step when it loads."""
    tensors, bf16 = raw_tensors(src), raw_tensors(bf16_dir)
    for name in list(tensors):
        if name.endswith(".weight_scale"):
            module = name[: -len(".weight_scale")]
            w = array(bf16[module + ".weight"])
            s = np.float32(np.max(np.abs(w)) / FP8_MAX)
            q = np.clip(w * (np.float32(1.0) / s), -FP8_MAX, FP8_MAX).astype(ml_dtypes.float8_e4m3fn)
            tensors[module + ".weight"] = {"dtype": "F8_E4M3", "shape": list(w.shape), "data": q.tobytes()}
            tensors[name] = {"dtype": "F32", "shape": [], "data": np.asarray(s, np.float32).tobytes()}
    write_raw(dst, tensors, json.loads((src / "config.json").read_text()))
    return dst


def write_raw(dst, tensors, config):
    dst.mkdir()
    names = {"F8_E4M3": "float8_e4m3fn", "BF16": "bfloat16", "F32": "float32"}
    buffers = {k: np.frombuffer(bytes(t["data"]), np.uint8).copy() for k, t in tensors.items()}
    specs = {k: safetensors.TensorSpec(dtype=names[t["dtype"]], shape=list(t["shape"]), data_ptr=buffers[k].ctypes.data,
                                       data_len=buffers[k].nbytes) for k, t in tensors.items()}
    (dst / "model.safetensors").write_bytes(safetensors.serialize(specs, {"format": "pt"}))
    (dst / "config.json").write_text(json.dumps(config))


class Fp8Numpy(Model):
    """reference_forward.Model whose linear and MoE layers run vLLM's FP8 methods: dequantized
    weights, activations quantized as the scheme says."""

    def __init__(self, config, tensors, weights, scheme, input_scales, block):
        super().__init__(config, tensors)
        self.w.update(weights)  # "<module>.weight" -> dequantized float32
        self.quantized = set(weights)
        self.scheme, self.input_scales, self.block = scheme, input_scales, block

    def quantize_input(self, x, name, per_tensor_dynamic=False):
        if self.scheme == "block":
            return groups(x, self.block)
        if self.scheme == "static":
            return static(x, self.input_scales[name])
        return per_tensor(x) if per_tensor_dynamic else per_token(x)

    def linear(self, x, name, bias=False):
        if name + ".weight" in self.quantized:
            x = self.quantize_input(x, name)
        return super().linear(x, name, bias)

    def moe(self, x, i):
        if self.arch == "MixtralForCausalLM":
            p, renormalize, names = f"model.layers.{i}.block_sparse_moe", True, (".w1", ".w3", ".w2")
        else:
            p, renormalize = f"model.layers.{i}.mlp", self.config.get("norm_topk_prob", False)
            names = (".gate_proj", ".up_proj", ".down_proj")
        top_k = self.config["num_experts_per_tok"]
        logits = x @ self.tensor(p + ".gate.weight").T
        probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]
        weights = np.take_along_axis(probs, chosen, axis=-1)
        if renormalize:
            weights = weights / weights.sum(axis=-1, keepdims=True)
        # One dynamic per-tensor scale over the chunk (all tokens), then over all routed slots.
        a = self.quantize_input(x, f"{p}.w13", per_tensor_dynamic=True)
        c2 = []
        for t in range(x.shape[0]):
            for k in range(top_k):
                e = f"{p}.experts.{chosen[t, k]}"
                g, u = a[t] @ self.w[e + names[0] + ".weight"].T, a[t] @ self.w[e + names[1] + ".weight"].T
                c2.append((g / (1 + np.exp(-g))) * u)
        c2 = self.quantize_input(np.stack(c2), f"{p}.w2", per_tensor_dynamic=True)
        out = np.zeros_like(x)
        for t in range(x.shape[0]):
            for k in range(top_k):
                e = f"{p}.experts.{chosen[t, k]}"
                out[t] += weights[t, k] * (c2[t * top_k + k] @ self.w[e + names[2] + ".weight"].T)
        return out


def fused_groups(names):
    """Checkpoint modules that vLLM fuses into one layer: q/k/v, gate/up (per expert: w1/w3)."""
    out = {}
    for n in names:
        m = n[: -len(".weight")]
        for a, b in ((".q_proj", ".qkv"), (".k_proj", ".qkv"), (".v_proj", ".qkv"), (".gate_proj", ".gate_up"),
                     (".up_proj", ".gate_up"), (".w1", ".w13"), (".w3", ".w13")):
            if m.endswith(a):
                out.setdefault(m[: -len(a)] + b, []).append(m)
                break
        else:
            out.setdefault(m, []).append(m)
    return out


def dequantized(tensors, scheme, block):
    """Dequantized float32 weights of an FP8 checkpoint, as vLLM's methods leave them after loading."""
    fp8 = [n for n, t in tensors.items() if n.endswith(".weight") and t["dtype"] == "F8_E4M3"]
    weights = {}
    for group in fused_groups(fp8).values():
        if scheme == "block":
            for m in group:
                s = array(tensors[m + ".weight_scale_inv"])
                s = np.repeat(np.repeat(s, block, 0), block, 1)
                weights[m + ".weight"] = array(tensors[m + ".weight"]) * s
            continue
        s_max = max(float(array(tensors[m + ".weight_scale"])) for m in group)
        for m in group:
            q, s = array(tensors[m + ".weight"]), float(array(tensors[m + ".weight_scale"]))
            weights[m + ".weight"] = requantize(q, s, s_max) * np.float32(s_max)
    return weights


def online(tensors):
    """Online FP8 of a 16-bit checkpoint: one dynamic per-tensor scale over each fused weight (MoE:
    per expert, w13 and w2 apart)."""
    names = [n for n in tensors if n.endswith(".weight") and ("_proj" in n or ".w1." in n or ".w2." in n or ".w3." in n)
             and ".gate." not in n]
    weights = {}
    for group in fused_groups(names).values():
        w = np.concatenate([tensors[m + ".weight"].astype(np.float32) for m in group])
        s = np.float32(np.max(np.abs(w)) / FP8_MAX)
        q = e4m3(w * (np.float32(1.0) / s)) * s
        rows = 0
        for m in group:
            n = tensors[m + ".weight"].shape[0]
            weights[m + ".weight"] = q[rows: rows + n]
            rows += n
    return weights


def input_scales(tensors):
    """Static scales as vLLM reduces them: the max over the shards of a fused layer (q/k/v, gate/up);
    MoE: w13 and w2 each the max over all experts ("<block>.w13", "<block>.w2")."""
    loaded = {n[: -len(".input_scale")]: float(array(t)) for n, t in tensors.items() if n.endswith(".input_scale")}
    scales = {}
    for m, s in loaded.items():
        if ".experts." in m:
            key = m.rsplit(".experts.", 1)[0] + (".w2" if m.endswith((".down_proj", ".w2")) else ".w13")
            scales[key] = max(scales.get(key, 0.0), s)
    for group in fused_groups([m + ".weight" for m in loaded if ".experts." not in m]).values():
        for m in group:
            scales[m] = max(loaded[g] for g in group)
    return scales


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, fp8kit_cli):
    root = tmp_path_factory.mktemp("runner_fp8")
    out = {}
    for name in MODELS:
        bf16 = write_model(root / name / "bf16", name)
        for scheme, flags in (("per-tensor", ["--scheme", "per-tensor"]), ("block", ["--scheme", "block", "--block", "32,32"])):
            r = fp8kit_cli("quantize", bf16, root / name / scheme, *flags, "-q")
            assert r.returncode == 0, r.stderr
        make_static(root / name / "per-tensor", root / name / "static", np.random.default_rng(5))
        make_per_shard(root / name / "per-tensor", bf16, root / name / "per-shard")
        out[name] = root / name
    return out


def numpy_fp8(model_dir, scheme):
    """The numpy FP8 model of a checkpoint of `scheme`, and the numpy BF16 model it came from."""
    config, bf16 = read_checkpoint(model_dir / "bf16")
    if scheme == "online":
        weights, scales = online(bf16), {}
    else:
        raw = raw_tensors(model_dir / scheme)
        weights = dequantized(raw, "block" if scheme == "block" else "tensor", 32)
        scales = input_scales(raw) if scheme == "static" else {}
    return Fp8Numpy(config, bf16, weights, scheme, scales, 32), Model(config, bf16)


def forward_resolving_ties(model, ids, got):
    """numpy's FP8 logits with near-tie activations rounded the way that matches `got`: from
    numpy's own rounding, each round tries flipping each recorded tie the other way and applies
    the flip that lowers the squared error most (or the first that brings the logits within
    FP8_BOUND), until they agree within FP8_BOUND or no flip helps."""
    global TIES

    def run(forced):
        global TIES
        TIES = Ties(forced)
        logits = model.forward(ids)
        err = float(np.sum((logits.astype(np.float64) - got) ** 2))
        return logits, TIES, err

    def within_bound(logits):
        return float(np.max(np.abs(logits - got))) / scale <= FP8_BOUND

    forced = {}
    best, ties, err = run(forced)
    scale = float(np.max(np.abs(best)))
    for _ in range(4):
        if within_bound(best):
            break
        candidate = None
        for site in ties.found:
            flipped = {**forced, site: not ties.went_up[site]}
            trial = run(flipped)
            if within_bound(trial[0]):
                candidate = (trial, flipped)
                break
            if candidate is None or trial[2] < candidate[0][2]:
                candidate = (trial, flipped)
        if candidate is None or candidate[0][2] >= err:
            break
        (best, ties, err), forced = candidate
    TIES = Ties()
    return best, len(forced)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("scheme", ["per-tensor", "per-shard", "static", "block", "online"])
def test_fp8_forward_matches_numpy(checkpoints, tmp_path, name, scheme):
    fp8_model, bf16_model = numpy_fp8(checkpoints[name], scheme)
    model_dir = checkpoints[name] / ("bf16" if scheme == "online" else scheme)
    flags = ["--dtype", "float32", "--allow-f32-quantized"] + (["--quantization", "fp8"] if scheme == "online" else [])
    got = fp8kit_logits(model_dir, IDS, tmp_path, *flags)
    expected, ties = forward_resolving_ties(fp8_model, IDS, got)
    unquantized = bf16_model.forward(IDS)
    scale = float(np.max(np.abs(expected)))
    impl = float(np.max(np.abs(got - expected))) / scale
    quant = float(np.max(np.abs(expected - unquantized))) / scale  # what FP8 itself changes
    print(f"{name} {scheme}: fp8kit vs numpy FP8 {impl:.2e} ({ties} near-ties rounded the other way); FP8 vs BF16 {quant:.2e}")
    assert quant > 1e-2  # the quantization is visible, so agreeing with numpy's FP8 means something
    assert impl <= FP8_BOUND, f"{name} {scheme}: {impl}"


E5M2_MAX = np.float32(57344.0)


def kv_round(x, s, dtype):
    """The KV cache store and read: byte = cvt_satfinite(f32(x) / s) (IEEE division), read back as
    decode(byte) * s (docs/numerics.md, reshape_and_cache_flash)."""
    top = FP8_MAX if dtype == "fp8" else E5M2_MAX
    target = ml_dtypes.float8_e4m3fn if dtype == "fp8" else ml_dtypes.float8_e5m2
    v = np.clip(x / np.float32(s), -top, top).astype(np.float32)
    return TIES.round_kv(v, target) * np.float32(s)


def _round_kv(self, v, target):
    out = v.astype(target).astype(np.float32)
    up = (v * np.float32(1 + self.TOL)).astype(target).astype(np.float32)
    down = (v * np.float32(1 - self.TOL)).astype(target).astype(np.float32)
    self.calls += 1
    for i in np.flatnonzero(up != down):
        site = (self.calls, int(i))
        if site not in self.found:
            self.found.append(site)
        if site in self.forced:
            out.flat[i] = (up if self.forced[site] else down).flat[i]
        self.went_up[site] = bool(out.flat[i] == up.flat[i])
    return out


Ties.round_kv = _round_kv


class KvFp8Mixin:
    """An FP8 KV cache on a numpy model: the keys after RoPE and the values as the cache stores and
    returns them, with layer i's (k_scale, v_scale) from kv_scales (1 when absent: a 16-bit
    checkpoint has none)."""

    kv_dtype, kv_scales = "fp8", {}

    def layer_scales(self, name):
        return self.kv_scales.get(int(name.split(".")[2]), (1.0, 1.0))

    def linear(self, x, name, bias=False):
        y = super().linear(x, name, bias)
        return kv_round(y, self.layer_scales(name)[1], self.kv_dtype) if name.endswith(".v_proj") else y

    def attention(self, x, i, positions, cache):
        import reference_forward
        plain = reference_forward.apply_rope

        k_scale = self.kv_scales.get(i, (1.0, 1.0))[0]

        def rope(t, cos, sin):  # keys are the tensors with kv_heads heads (the models have GQA)
            out = plain(t, cos, sin)
            return kv_round(out, k_scale, self.kv_dtype) if t.shape[1] == self.kv_heads else out

        reference_forward.apply_rope = rope
        try:
            return super().attention(x, i, positions, cache)
        finally:
            reference_forward.apply_rope = plain


class KvFp8Numpy(KvFp8Mixin, Model):
    pass


class Fp8KvFp8Numpy(KvFp8Mixin, Fp8Numpy):
    pass


def with_kv_scales(src, dst, scales):
    """An FP8 checkpoint with per-tensor KV-cache scales (self_attn.k_scale / v_scale, as
    llm-compressor and AutoFP8 write them)."""
    tensors = raw_tensors(src)
    for i, (k, v) in scales.items():
        for name, value in (("k_scale", k), ("v_scale", v)):
            data = np.asarray(value, np.float32).tobytes()
            tensors[f"model.layers.{i}.self_attn.{name}"] = {"dtype": "F32", "shape": [], "data": data}
    write_raw(dst, tensors, json.loads((src / "config.json").read_text()))
    return dst


@pytest.mark.parametrize("name", ["llama2", "qwen3", "mixtral"])
@pytest.mark.parametrize("kv_dtype", ["fp8", "fp8_e5m2", "fp8 with checkpoint scales"])
def test_fp8_kv_cache_matches_numpy(checkpoints, tmp_path, name, kv_dtype):
    config, tensors = read_checkpoint(checkpoints[name] / "bf16")
    if kv_dtype.startswith("fp8 with"):  # an FP8 checkpoint with KV scales: both FP8 paths at once
        scales = {i: (0.02 + 0.01 * i, 0.015 + 0.01 * i) for i in range(config["num_hidden_layers"])}
        model_dir = with_kv_scales(checkpoints[name] / "per-tensor", tmp_path / "kv-scales", scales)
        model, _ = numpy_fp8(checkpoints[name], "per-tensor")
        model.__class__ = Fp8KvFp8Numpy
        model.kv_scales, kv_dtype = scales, "fp8"
        flags = ["--allow-f32-quantized"]
    else:
        model, model_dir, flags = KvFp8Numpy(config, tensors), checkpoints[name] / "bf16", []
    model.kv_dtype = kv_dtype
    got = fp8kit_logits(model_dir, IDS, tmp_path, "--dtype", "float32", "--kv-cache-dtype", kv_dtype, *flags)
    expected, ties = forward_resolving_ties(model, IDS, got)
    exact = Model(config, tensors).forward(IDS)
    scale = float(np.max(np.abs(expected)))
    impl, quant = float(np.max(np.abs(got - expected))) / scale, float(np.max(np.abs(expected - exact))) / scale
    print(f"{name} KV {kv_dtype}: fp8kit vs numpy {impl:.2e} ({ties} near-ties rounded the other way); "
          f"FP8 cache vs exact {quant:.2e}")
    assert quant > 1e-3
    assert impl <= FP8_BOUND, f"{name} {kv_dtype}: {impl}"
