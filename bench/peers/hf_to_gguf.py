#!/usr/bin/env python3
"""Writes the SmolLM2 fixture's Hugging Face BF16 weights as GGUF files llama.cpp loads (benchmark peer
only): BF16 (the same numbers) and Q8_0 (llama.cpp's 32-value blocks with an f16 scale, quantized by the
gguf package bit-exactly as ggml does). Norms stay F32 as llama.cpp's converter keeps them; q/k rows are
permuted to llama.cpp's rotary layout (LlamaModel.permute in convert_hf_to_gguf.py); the metadata
(hyperparameters, tokenizer, chat template) is copied from the fixture's source GGUF.
Usage: hf_to_gguf.py HF_DIR SOURCE_GGUF OUT.gguf {bf16,q8_0}"""

import json
import os
import sys
from pathlib import Path

import ml_dtypes  # noqa: F401  (registers bfloat16, which safetensors.numpy needs)
import numpy as np
import safetensors.numpy

import gguf

TYPES = {"bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
         "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0)}
LAYER = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
         "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
         "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
          "lm_head.weight": "output.weight"}


def gguf_name(hf_name):
    if hf_name in GLOBAL:
        return GLOBAL[hf_name]
    parts = hf_name.split(".")  # model.layers.N.<module...>.weight
    return f"blk.{parts[2]}.{LAYER['.'.join(parts[3:-1])]}.{parts[-1]}"


def permute_rows(weight, heads):
    """llama.cpp's layout: each head's two rotary halves interleaved."""
    return (weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def copy_metadata(reader, writer, file_type):
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key == "general.file_type":
            writer.add_file_type(int(file_type))
            continue
        main = field.types[0]
        sub = field.types[-1] if main == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), main, sub)


def convert(hf_dir, source_gguf, out_path, kind):
    qtype, file_type = TYPES[kind]
    config = json.loads((Path(hf_dir) / "config.json").read_text())
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    tensors = safetensors.numpy.load_file(str(Path(hf_dir) / "model.safetensors"))
    reader = gguf.GGUFReader(str(source_gguf))
    partial = Path(f"{out_path}.partial-{os.getpid()}")
    writer = gguf.GGUFWriter(str(partial), "llama")
    copy_metadata(reader, writer, file_type)
    for name in sorted(tensors):
        values = tensors[name].astype(np.float32)
        if name.endswith("q_proj.weight"):
            values = permute_rows(values, heads)
        elif name.endswith("k_proj.weight"):
            values = permute_rows(values, kv_heads)
        if values.ndim == 1:  # norms: F32, as llama.cpp's own converter writes them
            writer.add_tensor(gguf_name(name), np.ascontiguousarray(values))
        else:
            writer.add_tensor(gguf_name(name), gguf.quants.quantize(np.ascontiguousarray(values), qtype),
                              raw_dtype=qtype)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, out_path)
    finally:
        if partial.exists():
            partial.unlink()


def main(argv):
    if len(argv) != 4 or argv[3] not in TYPES:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    convert(*argv)
    print(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
