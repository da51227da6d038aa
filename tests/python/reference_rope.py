"""Rotary position embedding of the numpy reference forward (reference_forward.py), written from the math
of Hugging Face's modeling_rope_utils.py: inverse frequencies of the kinds default, linear, dynamic (NTK),
llama3 and yarn, the attention factor (yarn), partial rotary dims, and the rotate-half application.
Checked against transformers by compare_with_transformers.py; tests: test_reference_forward.py."""

import math

import numpy as np


class RopeConfigError(ValueError):
    pass


class Rope:
    """cos/sin for given positions. rotary_dim <= head_dim; dims past rotary_dim pass unrotated."""

    def __init__(self, config, head_dim, dtype):
        params = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
        self.kind = params.get("rope_type", params.get("type", "default"))
        self.theta = float(params.get("rope_theta", config.get("rope_theta", 10000.0)))
        factor = params.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
        self.rotary_dim = int(head_dim * factor)
        if self.rotary_dim % 2 or not 0 < self.rotary_dim <= head_dim:
            raise RopeConfigError(f"rotary dim {self.rotary_dim} of head dim {head_dim} is not even and positive")
        self.params = params
        self.max_positions = int(config.get("max_position_embeddings", 2048))
        self.dtype = dtype
        known = ("default", "linear", "dynamic", "llama3", "yarn")
        if self.kind not in known:
            raise RopeConfigError(f"rope type {self.kind!r} is not one of {', '.join(known)}")
        self.attention_factor = 1.0
        self.static_inv_freq = None if self.kind == "dynamic" else self._inv_freq()

    def _base_inv_freq(self, base):
        dim = self.rotary_dim
        exponents = np.arange(0, dim, 2, dtype=np.int64).astype(self.dtype) / self.dtype(dim)
        return (self.dtype(1.0) / (self.dtype(base) ** exponents)).astype(self.dtype)

    def _inv_freq(self, seq_len=None):
        p, dim = self.params, self.rotary_dim
        if self.kind == "default":
            return self._base_inv_freq(self.theta)
        if self.kind == "linear":
            return (self._base_inv_freq(self.theta) / self.dtype(p["factor"])).astype(self.dtype)
        if self.kind == "dynamic":
            # The base grows with the longest position seen; at or below max_position_embeddings it is theta.
            factor, seq_len = float(p["factor"]), max(seq_len, self.max_positions)
            base = self.theta * ((factor * seq_len / self.max_positions) - (factor - 1)) ** (dim / (dim - 2))
            return self._base_inv_freq(base)
        if self.kind == "llama3":
            return self._llama3_inv_freq()
        return self._yarn_inv_freq()

    def _llama3_inv_freq(self):
        p = self.params
        inv_freq = self._base_inv_freq(self.theta)
        factor, low, high = float(p["factor"]), float(p["low_freq_factor"]), float(p["high_freq_factor"])
        old_len = float(p.get("original_max_position_embeddings", self.max_positions))
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)  # long waves: divided
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)  # between: blended
        return np.where(medium, smoothed, scaled).astype(self.dtype)

    def _yarn_inv_freq(self):
        p, dim = self.params, self.rotary_dim
        original = float(p.get("original_max_position_embeddings", self.max_positions))
        factor = p.get("factor")
        factor = self.max_positions / original if factor is None else float(factor)

        def mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        attention = p.get("attention_factor")
        if attention is None:
            m, m_all = p.get("mscale"), p.get("mscale_all_dim")
            attention = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
        self.attention_factor = float(attention)
        beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

        def correction_dim(rotations):
            return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(self.theta))

        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if p.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1).astype(self.dtype)
        extrapolation = 1 - ramp  # 1: keep the frequency (fast dims), 0: interpolate it (slow dims)
        pos_freqs = self.dtype(self.theta) ** (np.arange(0, dim, 2).astype(self.dtype) / self.dtype(dim))
        inv_extra, inv_inter = 1 / pos_freqs, 1 / (self.dtype(factor) * pos_freqs)
        return (inv_inter * (1 - extrapolation) + inv_extra * extrapolation).astype(self.dtype)

    def cos_sin(self, positions):
        """[n, rotary_dim] cos and sin; dynamic NTK takes its base from this call's longest position,
        as Hugging Face's forward does for one growing sequence."""
        positions = np.asarray(positions)
        inv_freq = self.static_inv_freq if self.static_inv_freq is not None else self._inv_freq(int(positions.max()) + 1)
        angles = positions.astype(self.dtype)[:, None] * inv_freq[None, :]
        angles = np.concatenate([angles, angles], axis=-1)
        scale = self.dtype(self.attention_factor)
        return (np.cos(angles) * scale).astype(self.dtype), (np.sin(angles) * scale).astype(self.dtype)


def apply_rope(x, cos, sin):
    """x [n, heads, head_dim]: rotate-half on the first rotary_dim dims, the rest unchanged."""
    rd = cos.shape[-1]
    rot, rest = x[..., :rd], x[..., rd:]
    half = rd // 2
    rotated = np.concatenate([-rot[..., half:], rot[..., :half]], axis=-1)
    out = rot * cos[:, None, :] + rotated * sin[:, None, :]
    return np.concatenate([out, rest], axis=-1) if rest.shape[-1] else out
