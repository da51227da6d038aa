"""fp8kit's model runner (include/fp8kit/model/engine.h, eval.h) from Python: a checkpoint loaded
as `fp8kit generate` and `fp8kit eval` load it (16-bit, 16-bit quantized online, or FP8), text
generation, the logits of every position as numpy arrays, and evaluation (perplexity, and KL
divergence against a base model) with the figures of `fp8kit eval --json`. Each call runs without
the GIL; calls on one model run one at a time.

    import fp8kit
    model = fp8kit.Model.load("Qwen3-0.6B", quantization="fp8", kv_cache_dtype="fp8")
    out = model.generate("The capital of France is", max_tokens=16, temperature=0)
    print(out.text, out.ids)
    print(fp8kit.eval(model, base=fp8kit.Model.load("Qwen3-0.6B"), tokens=open("wiki.txt").read(), ctx=512))
"""

import os
from dataclasses import dataclass

import numpy as np

from . import _fp8kit

__all__ = ["Model", "Generation", "eval"]

_DTYPES = {"auto": None, None: None, "bfloat16": "bf16", "bf16": "bf16", "float16": "f16", "f16": "f16",
           "half": "f16", "float32": "f32", "f32": "f32", "float": "f32"}
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Generation:
    """What Model.generate returns: the new token ids (EOS included when it stopped there), their
    text (None without a tokenizer.json), the prompt's length and why it ended ("stop": an EOS or
    stop id, "length": max_tokens)."""
    ids: list
    text: object
    prompt_tokens: int
    finish_reason: str


def _dtype_name(dtype):
    key = dtype if dtype is None or isinstance(dtype, str) else str(getattr(dtype, "__name__", dtype))
    key = key.removeprefix("torch.") if isinstance(key, str) else key
    if key not in _DTYPES:
        try:
            key = np.dtype(dtype).name
        except TypeError:
            key = repr(dtype)
    if key not in _DTYPES:
        raise ValueError(f"`dtype` must be 'auto', 'bfloat16', 'float16' or 'float32', got {dtype!r}")
    return _DTYPES[key]


def _token_ids(ids, name):
    """`ids` (a sequence of ints, or an integer numpy array) as a list of ints in int32's range."""
    a = np.asarray(ids)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise TypeError(f"`{name}` must be text or a 1-D sequence of token ids (ints), got {type(ids).__name__}"
                        + (f" of shape {list(a.shape)}" if a.ndim != 1 else f" of {a.dtype}"))
    values = [int(v) for v in a]
    for v in values:
        if v < 0 or v > _INT32_MAX:
            raise ValueError(f"`{name}`: {v} is not a token id")
    return values


def _int_or_none(value, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an int, got {value!r}")
    return int(value)


class Model:
    """A checkpoint in fp8kit's model runner (fp8kit::Engine) on the CPU. Load it with Model.load."""

    def __init__(self, impl):
        if not isinstance(impl, _fp8kit.Model):
            raise TypeError("create a Model with fp8kit.Model.load(path, ...)")
        self._impl = impl

    @classmethod
    def load(cls, path, *, dtype="auto", quantization="auto", kv_cache_dtype="auto", kv_cache_tokens=None,
             kv_cache_memory=None, calculate_kv_scales=False, max_tokens_per_step=512, max_num_seqs=64,
             threads=None):
        """Loads the checkpoint directory `path` (config.json, safetensors, optionally tokenizer.json),
        with the options of `fp8kit generate`:
          dtype: "auto" (config.json's torch_dtype), "bfloat16", "float16", "float32";
          quantization: "auto" (the checkpoint as it is) or "fp8" (a 16-bit checkpoint quantized
            online, vLLM's --quantization fp8);
          kv_cache_dtype: "auto" (the model dtype), "fp8" / "fp8_e4m3", "fp8_e5m2";
          kv_cache_tokens / kv_cache_memory (bytes): the KV pool, at most one (default 4096 tokens);
          calculate_kv_scales: an FP8 KV cache's scales from the first step's data;
          max_tokens_per_step, max_num_seqs: the scheduler's budget of one forward;
          threads: CPU threads of the forwards (default FP8KIT_NUM_THREADS, else every core)."""
        args = _fp8kit.LoadArgs()
        args.dtype = _dtype_name(dtype)
        args.quantization = str(quantization)
        args.kv_cache_dtype = str(kv_cache_dtype)
        args.kv_cache_tokens = _int_or_none(kv_cache_tokens, "kv_cache_tokens")
        args.kv_cache_memory = _int_or_none(kv_cache_memory, "kv_cache_memory")
        args.calculate_kv_scales = bool(calculate_kv_scales)
        args.max_tokens_per_step = _int_or_none(max_tokens_per_step, "max_tokens_per_step")
        args.max_num_seqs = _int_or_none(max_num_seqs, "max_num_seqs")
        args.threads = _int_or_none(threads, "threads")
        return cls(_fp8kit.Model(os.fspath(path), args))

    @property
    def info(self):
        """model_dir, architecture, dtype, quantization, vocab_size, num_layers, max_model_len, the KV
        cache (kv_cache_dtype, kv_cache_block_size, kv_cache_blocks, kv_cache_bytes), eos_token_ids,
        tokenizer (whether a tokenizer.json was loaded)."""
        return self._impl.info()

    def __repr__(self):
        i = self.info
        return (f"fp8kit.Model({i['model_dir']!r}: {i['architecture']}, {i['dtype']}, quantization "
                f"{i['quantization']}, KV cache {i['kv_cache_dtype']})")

    def encode(self, text):
        """Token ids of `text` through the checkpoint's tokenizer.json (BOS/EOS as its template adds)."""
        return self._impl.encode(str(text))

    def decode(self, ids, skip_special_tokens=True):
        return self._impl.decode(_token_ids(ids, "ids"), bool(skip_special_tokens))

    def _prompt(self, prompt, name):
        if isinstance(prompt, str):
            return self._impl.encode(prompt)
        return _token_ids(prompt, name)

    def generate(self, prompt, max_tokens=128, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0,
                 ignore_eos=False, stop_token_ids=()):
        """New tokens after `prompt` (text, encoded with the tokenizer.json, or token ids), as
        `fp8kit generate --json` gives them for the same arguments: temperature 0 is greedy; top_k
        0 and top_p 1 are off; the same seed gives the same tokens. Generation stops at the model's
        EOS ids (unless ignore_eos), at one of `stop_token_ids`, or after max_tokens. Returns a
        Generation (ids, text, prompt_tokens, finish_reason)."""
        args = _fp8kit.GenerateArgs()
        args.max_tokens = _int_or_none(max_tokens, "max_tokens")
        args.temperature = float(temperature)
        args.top_k = _int_or_none(top_k, "top_k")
        args.top_p = float(top_p)
        args.min_p = float(min_p)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**64:
            raise ValueError(f"`seed` must be an int in [0, 2**64), got {seed!r}")
        args.seed = int(seed)
        args.ignore_eos = bool(ignore_eos)
        args.stop_token_ids = _token_ids(list(stop_token_ids), "stop_token_ids")
        r = self._impl.generate(self._prompt(prompt, "prompt"), args)
        return Generation(r["ids"], r["text"], r["prompt_tokens"], r["finish_reason"])

    def logits(self, ids):
        """The logits of every position of `ids` (text or token ids) as a float32 numpy array
        [len(ids), vocab_size]; row p predicts token p + 1. The array owns its memory."""
        return np.from_dlpack(self._impl.logits(self._prompt(ids, "ids")))

    def eval(self, tokens, base=None, ctx=512, *, first=None, max_windows=0, progress=None):
        """fp8kit.eval(self, base, tokens, ctx, ...)."""
        return eval(self, base, tokens, ctx, first=first, max_windows=max_windows, progress=progress)


def eval(model, base, tokens, ctx=512, *, first=None, max_windows=0, progress=None):
    """Evaluates `model` on `tokens` (token ids, or text encoded with the model's tokenizer.json,
    else the base's) as `fp8kit eval --json` does: windows of `ctx` tokens, the logit rows from
    `first` (default ctx // 2) on scored; with `base` (a Model of the same architecture and
    vocabulary) also the distribution against it. Returns the dict of `fp8kit eval --json`: model,
    ppl, base_ppl, kld_mean, kld_stderr, kld_median, kld_p99, kld_max, top1_agreement, delta_p_rms
    (None without a base), tokens (scored), windows, ctx, first, seconds, base_seconds.
    `progress(windows_done, windows_total)` is called after each window."""
    if not isinstance(model, Model):
        raise TypeError(f"`model` must be an fp8kit.Model, got {type(model).__name__}")
    if base is not None and not isinstance(base, Model):
        raise TypeError(f"`base` must be an fp8kit.Model or None, got {type(base).__name__}")
    if isinstance(tokens, str):
        source = model if model.info["tokenizer"] or base is None else base
        ids = source._impl.encode(tokens)
    else:
        ids = _token_ids(tokens, "tokens")
    return _fp8kit.evaluate(model._impl, None if base is None else base._impl, ids, _int_or_none(ctx, "ctx"),
                            _int_or_none(first, "first"), _int_or_none(max_windows, "max_windows"), progress)
