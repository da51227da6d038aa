#!/usr/bin/env python3
"""Small random checkpoints of every architecture and rope kind reference_forward.py knows: config.json
and BF16 model.safetensors with Hugging Face tensor names, a few layers, small odd sizes, GQA, the same
bytes for the same name on every run (seed from the name). The model runner's tests load them and
compare with the numpy reference; compare_with_transformers.py checks the reference on them.
Usage: random_models.py OUT_DIR [NAME ...]  (writes OUT_DIR/NAME/ for each, all by default)"""

import json
import sys
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import safetensors.numpy

BASE = {"hidden_size": 48, "num_attention_heads": 6, "num_key_value_heads": 2, "intermediate_size": 100,
        "num_hidden_layers": 3, "vocab_size": 211, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": False, "hidden_act": "silu",
        "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "mlp_bias": False}
QWEN3 = {"hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
         "rope_theta": 1000000.0, "attention_bias": False, "tie_word_embeddings": True}

SPECS = {
    "llama2": LLAMA,
    "llama3": {**LLAMA, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
               "rope_theta": 500000.0, "tie_word_embeddings": True,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
    "llama-linear": {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    "llama-dynamic": {**LLAMA, "max_position_embeddings": 32, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "llama-yarn": {**LLAMA, "max_position_embeddings": 128,
                   "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}},
    "llama-partial-rotary": {**LLAMA, "partial_rotary_factor": 0.5},  # no transformers model: see README
    "llama-bias": {**LLAMA, "attention_bias": True, "mlp_bias": True},
    "mistral": {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 40,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 12, "sliding_window": 8},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rope_theta": 1000000.0,
              "tie_word_embeddings": True, "use_sliding_window": False},
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", **QWEN3},
    "qwen3-moe": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", **QWEN3,
                  "num_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 20, "norm_topk_prob": True,
                  "decoder_sparse_step": 1, "mlp_only_layers": [1]},
    "qwen3-moe-unnormalized": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", **QWEN3,
                               "num_experts": 5, "num_experts_per_tok": 3, "moe_intermediate_size": 24,
                               "norm_topk_prob": False, "decoder_sparse_step": 1, "mlp_only_layers": []},
    "mixtral": {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_local_experts": 4,
                "num_experts_per_tok": 2, "sliding_window": None},
}


def config_of(name):
    return {**BASE, **SPECS[name]}


def random_tensors(config, rng):
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    arch = config["architectures"][0]

    def linear(out, inp):
        return rng.standard_normal((out, inp)) / np.sqrt(inp)

    def norm(size):
        return 1.0 + 0.2 * rng.standard_normal(size)

    def mlp(prefix, inter, names=("gate_proj", "up_proj", "down_proj"), bias=False):
        t = {f"{prefix}.{names[0]}.weight": linear(inter, hidden), f"{prefix}.{names[1]}.weight": linear(inter, hidden),
             f"{prefix}.{names[2]}.weight": linear(hidden, inter)}
        if bias:
            t |= {f"{prefix}.{names[0]}.bias": 0.1 * rng.standard_normal(inter),
                  f"{prefix}.{names[1]}.bias": 0.1 * rng.standard_normal(inter),
                  f"{prefix}.{names[2]}.bias": 0.1 * rng.standard_normal(hidden)}
        return t

    t = {"model.embed_tokens.weight": rng.standard_normal((vocab, hidden)), "model.norm.weight": norm(hidden)}
    if not config["tie_word_embeddings"]:
        t["lm_head.weight"] = linear(vocab, hidden)
    qkv_bias = arch == "Qwen2ForCausalLM" or config.get("attention_bias", False)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        a = p + ".self_attn"
        t |= {p + ".input_layernorm.weight": norm(hidden), p + ".post_attention_layernorm.weight": norm(hidden),
              a + ".q_proj.weight": linear(heads * head_dim, hidden), a + ".k_proj.weight": linear(kv_heads * head_dim, hidden),
              a + ".v_proj.weight": linear(kv_heads * head_dim, hidden), a + ".o_proj.weight": linear(hidden, heads * head_dim)}
        if qkv_bias:
            for proj, size in (("q", heads * head_dim), ("k", kv_heads * head_dim), ("v", kv_heads * head_dim)):
                t[f"{a}.{proj}_proj.bias"] = 0.1 * rng.standard_normal(size)
            if arch != "Qwen2ForCausalLM":
                t[a + ".o_proj.bias"] = 0.1 * rng.standard_normal(hidden)
        if arch.startswith("Qwen3"):
            t |= {a + ".q_norm.weight": norm(head_dim), a + ".k_norm.weight": norm(head_dim)}
        if arch == "MixtralForCausalLM":
            t[p + ".block_sparse_moe.gate.weight"] = 3 * linear(config["num_local_experts"], hidden)
            for e in range(config["num_local_experts"]):
                t |= mlp(f"{p}.block_sparse_moe.experts.{e}", config["intermediate_size"], ("w1", "w3", "w2"))
        elif arch == "Qwen3MoeForCausalLM" and i not in config["mlp_only_layers"]:
            t[p + ".mlp.gate.weight"] = 3 * linear(config["num_experts"], hidden)
            for e in range(config["num_experts"]):
                t |= mlp(f"{p}.mlp.experts.{e}", config["moe_intermediate_size"])
        else:
            t |= mlp(p + ".mlp", config["intermediate_size"], bias=config.get("mlp_bias", False))
    return {k: np.ascontiguousarray(np.asarray(v, dtype=np.float32).astype(ml_dtypes.bfloat16)) for k, v in t.items()}


def write_random_model(out_dir, name):
    """Writes out_dir/config.json and out_dir/model.safetensors of the model SPECS[name]; returns out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = config_of(name)
    tensors = random_tensors(config, np.random.default_rng(zlib.crc32(name.encode())))
    safetensors.numpy.save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out_dir


def main(argv):
    if not argv or any(n not in SPECS for n in argv[1:]):
        print(__doc__.splitlines()[-1] + "\nmodels: " + " ".join(SPECS), file=sys.stderr)
        return 2
    for name in argv[1:] or SPECS:
        print(write_random_model(Path(argv[0]) / name, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
