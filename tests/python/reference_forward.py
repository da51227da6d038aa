"""Numpy reference forward of decoder-only checkpoints in Hugging Face's layout: logits for token ids,
written from the math of transformers' modeling_llama / mistral / qwen2 / qwen3 / qwen3_moe / mixtral.
Llama (2, 3, 3.x rope scaling, tied embeddings), Mistral (sliding window), Qwen2 (q/k/v bias), Qwen3
(q/k RMSNorm), Qwen3-MoE and Mixtral (softmax top-k routing); float32 over widened weights, or float64.
A Cache makes prefill-then-decode calls. Checked against transformers by compare_with_transformers.py;
tests: test_reference_forward.py. Usage: Model.load(dir).forward(ids, cache) -> [n, vocab] logits."""

import json
from pathlib import Path

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy, which safetensors.numpy needs)
import numpy as np
import safetensors.numpy

from reference_rope import Rope, apply_rope

ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                 "Qwen3MoeForCausalLM", "MixtralForCausalLM")


class ModelError(ValueError):
    pass


def read_checkpoint(model_dir):
    """config.json and every tensor of model.safetensors or of the shards model.safetensors.index.json names."""
    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    index = model_dir / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    tensors = {}
    for name in files:
        tensors.update(safetensors.numpy.load_file(str(model_dir / name)))
    return config, tensors


def sliding_windows(config, arch):
    """Per layer: the window (a query sees keys at positions > its own - window) or None."""
    layers = config["num_hidden_layers"]
    window = config.get("sliding_window")
    if arch in ("MistralForCausalLM", "MixtralForCausalLM"):
        return [window] * layers
    if arch == "LlamaForCausalLM" or not config.get("use_sliding_window", False) or window is None:
        return [None] * layers
    if "layer_types" in config and config["layer_types"]:
        return [window if t == "sliding_attention" else None for t in config["layer_types"]]
    if arch == "Qwen3MoeForCausalLM":
        return [window] * layers
    first = config.get("max_window_layers", layers)  # Qwen2/Qwen3: the layers from max_window_layers on
    return [window if i >= first else None for i in range(layers)]


class Cache:
    """Keys (after rope) and values of the tokens seen so far, per layer: [tokens, kv_heads, head_dim]."""

    def __init__(self, layers):
        self.keys, self.values, self.length = [None] * layers, [None] * layers, 0


class Model:
    def __init__(self, config, tensors, dtype=np.float32):
        arch = (config.get("architectures") or [None])[0]
        if arch not in ARCHITECTURES:
            raise ModelError(f"architecture {arch!r} is not one of {', '.join(ARCHITECTURES)}")
        if config.get("hidden_act", "silu") != "silu":
            raise ModelError(f"hidden_act {config['hidden_act']!r}: only silu")
        self.config, self.arch, self.dtype = config, arch, dtype
        self.w = {k: np.asarray(v).astype(dtype) for k, v in tensors.items()}
        self.heads = config["num_attention_heads"]
        self.kv_heads = config.get("num_key_value_heads") or self.heads
        self.head_dim = config.get("head_dim") or config["hidden_size"] // self.heads
        self.eps = dtype(config.get("rms_norm_eps", 1e-6))
        self.layers = config["num_hidden_layers"]
        self.windows = sliding_windows(config, arch)
        self.rope = Rope(config, self.head_dim, dtype)
        self.lm_head = self.w.get("lm_head.weight")
        if self.lm_head is None:
            if not config.get("tie_word_embeddings", False):
                raise ModelError("no lm_head.weight and tie_word_embeddings is false")
            self.lm_head = self.w["model.embed_tokens.weight"]

    @classmethod
    def load(cls, model_dir, dtype=np.float32):
        config, tensors = read_checkpoint(model_dir)
        return cls(config, tensors, dtype)

    def new_cache(self):
        return Cache(self.layers)

    def tensor(self, name):
        if name not in self.w:
            raise ModelError(f"checkpoint has no tensor {name}")
        return self.w[name]

    def linear(self, x, name, bias=False):
        y = x @ self.tensor(name + ".weight").T
        return y + self.tensor(name + ".bias") if bias else y

    def rms_norm(self, x, name):
        variance = np.mean(x * x, axis=-1, keepdims=True)
        return self.tensor(name)[...] * (x / np.sqrt(variance + self.eps))

    def attention(self, x, i, positions, cache):
        p, n = f"model.layers.{i}.self_attn", x.shape[0]
        configurable = self.arch in ("LlamaForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
        bias_o = configurable and self.config.get("attention_bias", False)
        bias = self.arch == "Qwen2ForCausalLM" or bias_o  # Qwen2: q/k/v always, o never
        q = self.linear(x, p + ".q_proj", bias).reshape(n, self.heads, self.head_dim)
        k = self.linear(x, p + ".k_proj", bias).reshape(n, self.kv_heads, self.head_dim)
        v = self.linear(x, p + ".v_proj", bias).reshape(n, self.kv_heads, self.head_dim)
        if self.arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):  # RMSNorm of each head before rope
            q, k = self.rms_norm(q, p + ".q_norm.weight"), self.rms_norm(k, p + ".k_norm.weight")
        cos, sin = self.rope.cos_sin(positions)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache.keys[i] is not None:
            k, v = np.concatenate([cache.keys[i], k]), np.concatenate([cache.values[i], v])
        cache.keys[i], cache.values[i] = k, v
        key_pos = np.arange(k.shape[0])
        allowed = key_pos[None, :] <= positions[:, None]
        if self.windows[i] is not None:
            allowed &= key_pos[None, :] > positions[:, None] - self.windows[i]
        group = self.heads // self.kv_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # query head h reads kv head h // group
        scores = np.einsum("qhd,khd->hqk", q, k) * self.dtype(self.head_dim ** -0.5)
        scores = np.where(allowed[None], scores, -np.inf)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        out = np.einsum("hqk,khd->qhd", probs, v).reshape(n, self.heads * self.head_dim)
        return self.linear(out, p + ".o_proj", bias_o)

    def gated_mlp(self, x, gate, up, down, bias=False):
        g = self.linear(x, gate, bias)
        return self.linear((g / (1 + np.exp(-g))) * self.linear(x, up, bias), down, bias)

    def moe(self, x, i):
        if self.arch == "MixtralForCausalLM":
            p, top_k, renormalize = f"model.layers.{i}.block_sparse_moe", self.config["num_experts_per_tok"], True
            names = (".w1", ".w3", ".w2")
        else:
            p, top_k = f"model.layers.{i}.mlp", self.config["num_experts_per_tok"]
            renormalize, names = self.config.get("norm_topk_prob", False), (".gate_proj", ".up_proj", ".down_proj")
        logits = self.linear(x, p + ".gate")
        probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]  # [n, top_k], most probable first
        weights = np.take_along_axis(probs, chosen, axis=-1)
        if renormalize:
            weights = weights / weights.sum(axis=-1, keepdims=True)
        out = np.zeros_like(x)
        for expert in np.unique(chosen):
            rows, slot = np.nonzero(chosen == expert)
            e = f"{p}.experts.{expert}"
            y = self.gated_mlp(x[rows], e + names[0], e + names[1], e + names[2])
            out[rows] += weights[rows, slot][:, None] * y
        return out

    def is_moe_layer(self, i):
        if self.arch == "MixtralForCausalLM":
            return True
        if self.arch != "Qwen3MoeForCausalLM":
            return False
        step = self.config.get("decoder_sparse_step", 1)
        return (i not in (self.config.get("mlp_only_layers") or [])
                and self.config.get("num_experts", 0) > 0 and (i + 1) % step == 0)

    def forward(self, ids, cache=None):
        """Logits [len(ids), vocab] of the tokens ids following those already in cache (a fresh one if None)."""
        cache = cache or self.new_cache()
        ids = np.asarray(ids, dtype=np.int64)
        embed = self.tensor("model.embed_tokens.weight")
        if ids.size == 0 or ids.min() < 0 or ids.max() >= embed.shape[0]:
            raise ModelError(f"token ids must be in [0, {embed.shape[0]}) and not empty")
        positions = cache.length + np.arange(len(ids))
        h = embed[ids]
        mlp_bias = self.arch == "LlamaForCausalLM" and self.config.get("mlp_bias", False)
        for i in range(self.layers):
            p = f"model.layers.{i}"
            h = h + self.attention(self.rms_norm(h, p + ".input_layernorm.weight"), i, positions, cache)
            x = self.rms_norm(h, p + ".post_attention_layernorm.weight")
            if self.is_moe_layer(i):
                h = h + self.moe(x, i)
            else:
                h = h + self.gated_mlp(x, p + ".mlp.gate_proj", p + ".mlp.up_proj", p + ".mlp.down_proj", mlp_bias)
        cache.length += len(ids)
        return self.rms_norm(h, "model.norm.weight") @ self.lm_head.T


def greedy(model, prompt_ids, max_new_tokens, eos_ids=()):
    """Greedy decoding with the cache: the new token ids, ending at the first of eos_ids."""
    cache = model.new_cache()
    logits = model.forward(prompt_ids, cache)
    out = []
    for _ in range(max_new_tokens):
        token = int(np.argmax(logits[-1]))
        out.append(token)
        if token in eos_ids:
            break
        logits = model.forward([token], cache)
    return out
