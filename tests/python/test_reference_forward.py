# The numpy reference forward (reference_forward.py) on the random models of random_models.py: its own
# consistency (prefill = chunked prefill = decode; the sliding window, dynamic NTK, llama3, linear and yarn
# rope reduce to the plain model exactly where their math says; MoE renormalization), a 1-layer case
# computed by hand, and, with the SmolLM2 fixture cached, the greedy tokens transformers gave.
# (The comparison with transformers itself needs torch: compare_with_transformers.py.)
import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import random_models
import reference_forward
from reference_forward import Model, greedy
from reference_rope import Rope

HERE = Path(__file__).resolve().parent
IDS = np.random.default_rng(7).integers(0, 211, 40).tolist()


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    """name -> (config, tensors) of every random model, written and read back once."""
    root = tmp_path_factory.mktemp("random_models")
    return {name: reference_forward.read_checkpoint(random_models.write_random_model(root / name, name))
            for name in random_models.SPECS}


def model(tensors, name, dtype=np.float32, **config_changes):
    config, weights = tensors[name]
    return Model({**config, **config_changes}, weights, dtype)


def max_err(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


@pytest.mark.parametrize("name", [n for n in random_models.SPECS if n != "llama-dynamic"])
def test_prefill_equals_chunked_prefill_and_decode(tensors, name):
    m = model(tensors, name)
    full = m.forward(IDS)
    cache = m.new_cache()
    steps = [m.forward(IDS[:24], cache), m.forward(IDS[24:32], cache)] + [m.forward([t], cache) for t in IDS[32:]]
    err, scale = max_err(full, np.concatenate(steps)), float(np.max(np.abs(full)))
    assert cache.length == len(IDS)
    assert err <= 1e-5 * max(scale, 1.0), f"{name}: max abs diff {err} (logits up to {scale})"


def test_float64_agrees_with_float32(tensors):
    m32, m64 = model(tensors, "qwen3-moe"), model(tensors, "qwen3-moe", np.float64)
    logits = m64.forward(IDS)
    assert logits.dtype == np.float64
    assert max_err(m32.forward(IDS), logits) <= 1e-4 * float(np.max(np.abs(logits)))


def test_sliding_window_changes_only_positions_past_the_window(tensors):
    window = tensors["mistral"][0]["sliding_window"]
    windowed, full = model(tensors, "mistral").forward(IDS), model(tensors, "mistral", sliding_window=None).forward(IDS)
    np.testing.assert_array_equal(windowed[:window], full[:window])
    assert np.min(np.max(np.abs(windowed[window:] - full[window:]), axis=-1)) > 1e-3


def test_dynamic_ntk_is_plain_rope_up_to_max_position_embeddings(tensors):
    limit = tensors["llama-dynamic"][0]["max_position_embeddings"]
    dynamic, plain = model(tensors, "llama-dynamic"), model(tensors, "llama-dynamic", rope_scaling=None)
    np.testing.assert_array_equal(dynamic.forward(IDS[:limit]), plain.forward(IDS[:limit]))
    longer, plain_longer = dynamic.forward(IDS), plain.forward(IDS)  # the base grows with the longest position
    np.testing.assert_array_equal(longer[0], plain_longer[0])  # position 0 is not rotated
    assert np.min(np.max(np.abs(longer[1:] - plain_longer[1:]), axis=-1)) > 1e-4
    # One growing sequence: tokens decoded past the limit see keys rotated with the base of their call.
    cache = dynamic.new_cache()
    steps = np.concatenate([dynamic.forward(IDS[:limit], cache)] + [dynamic.forward([t], cache) for t in IDS[limit:]])
    np.testing.assert_array_equal(steps[:limit], plain.forward(IDS[:limit]))
    assert max_err(steps[limit:], longer[limit:]) > 1e-4


def test_llama3_rope_keeps_high_frequencies_and_divides_low_ones(tensors):
    config = tensors["llama3"][0]
    scaling = config["rope_scaling"]
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    plain = Rope({**config, "rope_scaling": None}, head_dim, np.float64)._base_inv_freq(config["rope_theta"])
    scaled = Rope(config, head_dim, np.float64).static_inv_freq
    wavelen = 2 * math.pi / plain
    old = scaling["original_max_position_embeddings"]
    high, low = wavelen < old / scaling["high_freq_factor"], wavelen > old / scaling["low_freq_factor"]
    assert high.any() and low.any() and (~high & ~low).any()  # the model exercises all three bands
    np.testing.assert_array_equal(scaled[high], plain[high])
    np.testing.assert_allclose(scaled[low], plain[low] / scaling["factor"], rtol=1e-15)
    medium = ~high & ~low
    assert np.all(scaled[medium] < plain[medium]) and np.all(scaled[medium] > plain[medium] / scaling["factor"])
    # Whole model: with every wavelength below old / high_freq_factor, llama3 is the plain rope exactly;
    # with the real bands, short positions already differ (only position 0 is not rotated).
    plain_logits = model(tensors, "llama3", rope_scaling=None).forward(IDS[:8])
    all_high = {**scaling, "original_max_position_embeddings": 4 * 10 ** 7}
    np.testing.assert_array_equal(model(tensors, "llama3", rope_scaling=all_high).forward(IDS[:8]), plain_logits)
    real = model(tensors, "llama3").forward(IDS[:8])
    np.testing.assert_array_equal(real[0], plain_logits[0])
    assert np.min(np.max(np.abs(real[1:] - plain_logits[1:]), axis=-1)) > 1e-4


@pytest.mark.parametrize("name, neutral", [("llama-linear", {"rope_type": "linear", "factor": 1.0}),
                                           ("llama-yarn", {"rope_type": "yarn", "factor": 1.0,
                                                           "original_max_position_embeddings": 32})])
def test_linear_and_yarn_with_factor_one_are_plain_rope(tensors, name, neutral):
    plain = model(tensors, name, rope_scaling=None).forward(IDS)
    np.testing.assert_allclose(model(tensors, name, rope_scaling=neutral).forward(IDS), plain, rtol=0, atol=1e-5)
    assert max_err(model(tensors, name).forward(IDS), plain) > 1e-3


def test_partial_rotary_leaves_the_other_dims_unrotated(tensors):
    config = tensors["llama-partial-rotary"][0]
    rope = Rope(config, 8, np.float32)
    assert rope.rotary_dim == 4
    cos, sin = rope.cos_sin(np.arange(5))
    x = np.random.default_rng(0).standard_normal((5, 2, 8)).astype(np.float32)
    out = reference_forward.apply_rope(x, cos, sin)
    np.testing.assert_array_equal(out[..., 4:], x[..., 4:])
    np.testing.assert_allclose(out[..., 0], x[..., 0] * cos[:, None, 0] - x[..., 2] * sin[:, None, 0], atol=1e-6)
    assert max_err(out[1:, :, :4], x[1:, :, :4]) > 1e-2


def test_moe_renormalization_matters_only_below_all_experts(tensors):
    experts = tensors["qwen3-moe-unnormalized"][0]["num_experts"]
    on, off = (model(tensors, "qwen3-moe-unnormalized", norm_topk_prob=v).forward(IDS[:8]) for v in (True, False))
    assert max_err(on, off) > 1e-3
    on, off = (model(tensors, "qwen3-moe-unnormalized", norm_topk_prob=v, num_experts_per_tok=experts).forward(IDS[:8])
               for v in (True, False))
    assert max_err(on, off) <= 1e-5 * float(np.max(np.abs(off)))


def test_one_layer_model_computed_by_hand():
    # hidden 4, one head of dim 4, Wq = Wk = Wv = Wo = I, embeddings e0 = 2 x0, e1 = 2 x2, MLP of one
    # unit: gate = up = x0, down writes to dim 0; tied embeddings; rope theta 100. Tokens [0, 1].
    eye = np.eye(4, dtype=np.float32)
    unit = np.array([[1, 0, 0, 0]], np.float32)
    weights = {"model.embed_tokens.weight": np.array([[2, 0, 0, 0], [0, 0, 2, 0]], np.float32),
               "model.norm.weight": np.ones(4, np.float32), "model.layers.0.input_layernorm.weight": np.ones(4, np.float32),
               "model.layers.0.post_attention_layernorm.weight": np.ones(4, np.float32),
               "model.layers.0.self_attn.q_proj.weight": eye, "model.layers.0.self_attn.k_proj.weight": eye,
               "model.layers.0.self_attn.v_proj.weight": eye, "model.layers.0.self_attn.o_proj.weight": eye,
               "model.layers.0.mlp.gate_proj.weight": unit, "model.layers.0.mlp.up_proj.weight": unit,
               "model.layers.0.mlp.down_proj.weight": unit.T.copy()}
    eps = 1e-6
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4, "num_attention_heads": 1,
              "num_key_value_heads": 1, "intermediate_size": 1, "num_hidden_layers": 1, "vocab_size": 2,
              "rms_norm_eps": eps, "rope_theta": 100.0, "tie_word_embeddings": True}
    logits = Model(config, weights, np.float64).forward([0, 1])

    def rms(v):
        return [x / math.sqrt(sum(y * y for y in v) / 4 + eps) for x in v]

    def silu(x):
        return x / (1 + math.exp(-x))

    s = 1 / math.sqrt(1 + eps)  # rmsnorm of (2,0,0,0) and (0,0,2,0): 2s in one dim
    # Position 1 rotates the pair (0, 2) by 1 rad: q1 = k1 = (-2s sin 1, 0, 2s cos 1, 0).
    score_10, score_11 = (-4 * s * s * math.sin(1)) / 2, (4 * s * s) / 2  # q1 . k0 and q1 . k1 over sqrt(4)
    a0 = math.exp(score_10) / (math.exp(score_10) + math.exp(score_11))
    hidden = [[2 + 2 * s, 0, 0, 0], [2 * s * a0, 0, 2 + 2 * s * (1 - a0), 0]]  # residual + attention (v = normed x)
    expected = []
    for h in hidden:
        n0 = rms(h)[0]
        h = [h[0] + silu(n0) * n0] + h[1:]  # + MLP: silu(gate) * up, written to dim 0
        final = rms(h)
        expected.append([2 * final[0], 2 * final[2]])  # tied embeddings: e . final
    np.testing.assert_allclose(logits, expected, rtol=1e-12, atol=1e-12)


def test_bad_models_and_ids_fail_with_the_reason(tensors):
    config, weights = tensors["llama2"]
    with pytest.raises(reference_forward.ModelError, match="architecture 'GPT2LMHeadModel' is not one of"):
        Model({**config, "architectures": ["GPT2LMHeadModel"]}, weights)
    with pytest.raises(reference_forward.ModelError, match="no lm_head.weight and tie_word_embeddings is false"):
        Model(config, {k: v for k, v in weights.items() if k != "lm_head.weight"})
    with pytest.raises(reference_forward.ModelError, match=r"token ids must be in \[0, 211\)"):
        Model(config, weights).forward([211])
    with pytest.raises(ValueError, match="rope type 'longrope' is not one of"):
        Model({**config, "rope_scaling": {"rope_type": "longrope"}}, weights)


def test_random_models_are_the_same_bytes_on_every_run(tmp_path):
    for name in ("llama2", "mixtral"):
        a = random_models.write_random_model(tmp_path / "a" / name, name) / "model.safetensors"
        b = random_models.write_random_model(tmp_path / "b" / name, name) / "model.safetensors"
        assert hashlib.sha256(a.read_bytes()).hexdigest() == hashlib.sha256(b.read_bytes()).hexdigest()


def smollm2_dir():
    root = Path(os.environ.get("FP8KIT_CACHE_DIR") or Path.home() / ".cache" / "fp8kit")
    return root / "smollm2-135m-instruct"


def test_smollm2_greedy_tokens_are_those_transformers_gave():
    expected = json.loads((HERE.parent / "fixtures" / "smollm2_transformers.json").read_text())
    model_dir = smollm2_dir()
    if not (model_dir / "model.safetensors").exists():
        pytest.skip(f"SmolLM2 fixture not cached at {model_dir}: run scripts/fetch-smollm2 to include this test")
    m = Model.load(model_dir)
    assert greedy(m, expected["prompt_ids"], len(expected["greedy_ids"]), eos_ids=(2,)) == expected["greedy_ids"]
