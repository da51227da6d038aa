#!/usr/bin/env python3
"""Checks the numpy reference forward (reference_forward.py) against Hugging Face transformers (torch, CPU,
float32, eager attention), run by hand in a private venv: max abs logit difference for a 64-token prefill
and for a 48-token prefill followed by 16 one-token decode steps, on every random model of
random_models.py and on the SmolLM2 fixture; and the rotary embedding alone (cos/sin of every rope kind at
positions up to 4096, partial rotary dims through Phi-3's apply) against transformers' own classes.
Usage: compare_with_transformers.py [--smollm2 DIR] [--out FILE]; figures in tests/fixtures/README.md."""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.phi3 import modeling_phi3

sys.path.insert(0, str(Path(__file__).resolve().parent))
import random_models  # noqa: E402
from reference_forward import Model  # noqa: E402
from reference_rope import Rope, apply_rope  # noqa: E402

PREFILL, SPLIT = 64, 48


def hf_logits(model_dir, ids, split=None):
    """Prefill of all ids at once, or ids[:split] then one token at a time with the cache (a fresh model
    each time: dynamic NTK keeps state across calls)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    with torch.no_grad():
        if split is None:
            return model(torch.tensor([ids])).logits[0].numpy()
        out = model(torch.tensor([ids[:split]]), use_cache=True)
        logits, past = [out.logits[0]], out.past_key_values
        for token in ids[split:]:
            out = model(torch.tensor([[token]]), past_key_values=past, use_cache=True)
            logits.append(out.logits[0])
            past = out.past_key_values
        return torch.cat(logits).numpy()


def ref_logits(model, ids, split=None):
    if split is None:
        return model.forward(ids)
    cache = model.new_cache()
    return np.concatenate([model.forward(ids[:split], cache)] + [model.forward([t], cache) for t in ids[split:]])


def compare_model(model_dir, vocab, seed):
    ids = np.random.default_rng(seed).integers(0, vocab, PREFILL).tolist()
    ref = Model.load(model_dir)
    row = {}
    for mode, split in (("prefill", None), ("decode", SPLIT)):
        a, b = ref_logits(ref, ids, split), hf_logits(model_dir, ids, split)
        row[mode] = float(np.max(np.abs(a - b)))
        row["max_abs_logit"] = float(np.max(np.abs(b)))
    row["same_argmax"] = bool((np.argmax(a, -1) == np.argmax(b, -1)).all())
    return row


def compare_rope():
    """cos/sin of reference_rope against LlamaRotaryEmbedding for each kind, and partial rotary via Phi-3."""
    rows = {}
    positions = np.arange(4096)
    for name in ("llama2", "llama3", "llama-linear", "llama-dynamic", "llama-yarn"):
        config = random_models.config_of(name)
        hf_config = transformers.LlamaConfig(**{k: v for k, v in config.items() if k != "architectures"})
        head_dim = config["hidden_size"] // config["num_attention_heads"]
        x = torch.zeros(1, dtype=torch.float32)
        cos_hf, sin_hf = LlamaRotaryEmbedding(hf_config)(x, torch.tensor([positions]))
        cos, sin = Rope(config, head_dim, np.float32).cos_sin(positions)
        rows[name] = float(max(np.abs(cos - cos_hf[0].numpy()).max(), np.abs(sin - sin_hf[0].numpy()).max()))
    config = {**random_models.config_of("llama-partial-rotary")}
    hf_config = transformers.Phi3Config(hidden_size=48, num_attention_heads=6, num_key_value_heads=2,
                                        partial_rotary_factor=0.5, rope_theta=config["rope_theta"],
                                        max_position_embeddings=4096)
    q = np.random.default_rng(0).standard_normal((len(positions), 6, 8)).astype(np.float32)
    cos_hf, sin_hf = modeling_phi3.Phi3RotaryEmbedding(hf_config)(torch.zeros(1), torch.tensor([positions]))
    q_hf, _ = modeling_phi3.apply_rotary_pos_emb(torch.tensor(q)[None], torch.tensor(q)[None], cos_hf, sin_hf,
                                                 unsqueeze_dim=2)
    cos, sin = Rope(config, 8, np.float32).cos_sin(positions)
    rows["llama-partial-rotary (q after rope)"] = float(np.abs(apply_rope(q, cos, sin) - q_hf[0].numpy()).max())
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smollm2", help="the SmolLM2 fixture directory")
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.set_num_threads(2)
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "models": {},
              "rope_cos_sin_max_abs_diff": compare_rope()}
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(random_models.SPECS):
            if name == "llama-partial-rotary":
                continue  # no transformers architecture of this list rotates part of a head
            model_dir = random_models.write_random_model(Path(tmp) / name, name)
            result["models"][name] = compare_model(str(model_dir), random_models.config_of(name)["vocab_size"], i)
            print(name, result["models"][name], flush=True)
    if args.smollm2:
        result["models"]["smollm2-135m-instruct"] = compare_model(args.smollm2, 49152, 99)
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
