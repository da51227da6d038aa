# The GGUF -> Hugging Face converter of the SmolLM2 fixture (tests/fixtures/gguf_to_hf.py) on a small
# llama GGUF written here with gguf.GGUFWriter: q/k rows permuted as llama.cpp's converter permutes
# them come back in Hugging Face's order, every other tensor unchanged, config and tokenizer from the
# metadata; files that do not convert fail with a message naming the problem.
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import gguf  # noqa: E402
import gguf_to_hf  # noqa: E402

HIDDEN, HEADS, KV_HEADS, FFN, LAYERS = 16, 4, 2, 24, 2
TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [chr(c) for c in range(ord("a"), ord("a") + 9)] + ["ab"]
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"


def llama_cpp_permute(weight, heads):
    """What convert_hf_to_gguf.py's LlamaModel.permute does to q/k rows (written from its definition)."""
    rows = weight.shape[0]
    out = np.empty_like(weight)
    half = rows // heads // 2
    for h in range(heads):
        for pair in range(2):
            for i in range(half):
                out[h * 2 * half + 2 * i + pair] = weight[h * 2 * half + pair * half + i]
    return out


def hf_tensors(rng):
    def bf16_exact(*shape):
        return rng.standard_normal(shape).astype(ml_dtypes.bfloat16).astype(np.float32)

    tensors = {"model.embed_tokens.weight": bf16_exact(len(TOKENS), HIDDEN), "model.norm.weight": bf16_exact(HIDDEN)}
    head_dim = HIDDEN // HEADS
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        tensors |= {p + "input_layernorm.weight": bf16_exact(HIDDEN),
                    p + "post_attention_layernorm.weight": bf16_exact(HIDDEN),
                    p + "self_attn.q_proj.weight": bf16_exact(HEADS * head_dim, HIDDEN),
                    p + "self_attn.k_proj.weight": bf16_exact(KV_HEADS * head_dim, HIDDEN),
                    p + "self_attn.v_proj.weight": bf16_exact(KV_HEADS * head_dim, HIDDEN),
                    p + "self_attn.o_proj.weight": bf16_exact(HIDDEN, HEADS * head_dim),
                    p + "mlp.gate_proj.weight": bf16_exact(FFN, HIDDEN),
                    p + "mlp.up_proj.weight": bf16_exact(FFN, HIDDEN),
                    p + "mlp.down_proj.weight": bf16_exact(HIDDEN, FFN)}
    return tensors


def write_gguf(path, tensors, arch="llama", pre="smollm"):
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(LAYERS)
    writer.add_context_length(2048)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(100000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(TOKENS)
    writer.add_token_types([3, 3, 3] + [1] * (len(TOKENS) - 3))
    writer.add_token_merges(["a b"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_chat_template(TEMPLATE)
    names = {v: k for k, v in gguf_to_hf.GLOBAL_TENSORS.items()}
    for name, value in tensors.items():
        if name.startswith("model.layers."):
            _, _, i, rest = name.split(".", 3)
            gguf_name = f"blk.{i}." + {v: k for k, v in gguf_to_hf.LAYER_TENSORS.items()}[rest]
        else:
            gguf_name = names[name]
        if "q_proj" in name:
            value = llama_cpp_permute(value, HEADS)
        elif "k_proj" in name:
            value = llama_cpp_permute(value, KV_HEADS)
        writer.add_tensor(gguf_name, np.ascontiguousarray(value))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_converts_weights_config_and_tokenizer(tmp_path):
    tensors = hf_tensors(np.random.default_rng(0))
    write_gguf(tmp_path / "m.gguf", tensors)
    out = tmp_path / "hf"
    out.mkdir()
    gguf_to_hf.convert(tmp_path / "m.gguf", out)
    got = safetensors.numpy.load_file(str(out / "model.safetensors"))
    assert sorted(got) == sorted(tensors)  # tied embeddings: no lm_head.weight
    for name, value in tensors.items():
        assert got[name].dtype == ml_dtypes.bfloat16, name
        np.testing.assert_array_equal(got[name].astype(np.float32), value, err_msg=name)
    config = json.loads((out / "config.json").read_text())
    assert {k: config[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                                   "num_hidden_layers", "vocab_size", "rope_theta", "rms_norm_eps",
                                   "tie_word_embeddings", "bos_token_id", "eos_token_id",
                                   "max_position_embeddings")} == {
        "hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "intermediate_size": FFN, "num_hidden_layers": LAYERS, "vocab_size": len(TOKENS), "rope_theta": 100000,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
        "max_position_embeddings": 2048}
    tok = json.loads((out / "tokenizer.json").read_text())
    assert tok["model"]["vocab"] == {t: i for i, t in enumerate(TOKENS)}
    assert tok["model"]["merges"] == ["a b"]
    assert [(t["id"], t["content"], t["special"]) for t in tok["added_tokens"]] == [
        (0, "<|endoftext|>", True), (1, "<|im_start|>", True), (2, "<|im_end|>", True)]
    assert tok["pre_tokenizer"]["pretokenizers"][0] == {"type": "Digits", "individual_digits": True}
    tok_config = json.loads((out / "tokenizer_config.json").read_text())
    assert tok_config["chat_template"] == TEMPLATE
    assert (tok_config["bos_token"], tok_config["eos_token"]) == ("<|im_start|>", "<|im_end|>")
    assert tok_config["additional_special_tokens"] == ["<|im_start|>", "<|im_end|>"]


def test_unpermute_rows_inverts_llama_cpp_permute():
    w = np.arange(6 * 8 * 3, dtype=np.float32).reshape(48, 3)
    for heads in (1, 2, 3, 6):
        np.testing.assert_array_equal(gguf_to_hf.unpermute_rows(llama_cpp_permute(w, heads), heads), w)
    with pytest.raises(gguf_to_hf.ConversionError, match="does not split into 5 heads"):
        gguf_to_hf.unpermute_rows(w, 5)


@pytest.mark.parametrize("arch, pre, message", [
    ("qwen2", "smollm", "architecture 'qwen2', only 'llama' converts"),
    ("llama", "qwen2", "pre-tokenizer 'qwen2': only 'gpt2' with smollm converts"),
])
def test_unsupported_files_fail_with_the_reason(tmp_path, arch, pre, message):
    write_gguf(tmp_path / "m.gguf", hf_tensors(np.random.default_rng(1)), arch=arch, pre=pre)
    with pytest.raises(gguf_to_hf.ConversionError, match=message):
        gguf_to_hf.convert(tmp_path / "m.gguf", tmp_path)
