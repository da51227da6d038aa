"""Golden values of tests/cpu/test_rope.cpp, computed with numpy from the formulas of Hugging
Face's modeling_rope_utils.py (_compute_default_rope_parameters, _compute_linear_scaling_rope_parameters,
_compute_dynamic_ntk_parameters, _compute_llama3_parameters, _compute_yarn_parameters), written
here from scratch: tensor expressions in float32 (Python scalars cast to float32 where they meet
a tensor, as torch does), scalar expressions in float64. The f32 pow is a float64 pow rounded
once (torch's float32 pow is within an ulp of it); cos/sin are float64 cos/sin of the float32
angle, rounded once. Run: python3 tests/cpu/rope_goldens.py (numpy, ml_dtypes); the test holds
its output.
"""
import math

import ml_dtypes
import numpy as np

f32 = np.float32


def pow_f32(base, exponent):
    return f32(np.power(np.float64(f32(base)), np.float64(exponent)))


def default_inv_freq(base, dim):
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(f32) / f32(dim)
    return np.array([f32(1) / pow_f32(base, e) for e in exponents], dtype=f32)


def linear(base, dim, factor):
    return default_inv_freq(base, dim) / f32(factor)


def dynamic(base, dim, factor, max_pos, seq_len):
    seq_len = max(seq_len, max_pos)
    base = base * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    return default_inv_freq(base, dim)


def llama3(base, dim, factor, low, high, old):
    inv = default_inv_freq(base, dim)
    low_wl, high_wl = f32(old / low), f32(old / high)
    wavelen = f32(2 * math.pi) / inv
    inv_l = np.where(wavelen > low_wl, inv / f32(factor), inv)
    smooth = (f32(old) / wavelen - f32(low)) / f32(high - low)
    smoothed = (f32(1) - smooth) * inv_l / f32(factor) + smooth * inv_l
    medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
    return np.where(medium, smoothed, inv_l).astype(f32)


def yarn(base, dim, factor, orig, beta_fast=32, beta_slow=1, mscale=None, mscale_all_dim=None,
         attention_factor=None, truncate=True):
    def get_mscale(scale, m=1):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = get_mscale(factor)

    def corr_dim(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos = np.array([pow_f32(base, e) for e in np.arange(0, dim, 2).astype(f32) / f32(dim)], dtype=f32)
    extrap = f32(1) / pos
    interp = f32(1) / (f32(factor) * pos)
    ramp = np.clip((np.arange(dim // 2, dtype=f32) - f32(low)) / f32(high - low), f32(0), f32(1))
    extrap_factor = f32(1) - ramp
    return (interp * (f32(1) - extrap_factor) + extrap * extrap_factor).astype(f32), f32(attention_factor)


def cos_sin(inv, position, af=f32(1)):
    angle = f32(position) * inv
    c = np.array([f32(math.cos(float(a))) for a in angle], dtype=f32) * af
    s = np.array([f32(math.sin(float(a))) for a in angle], dtype=f32) * af
    return c, s


def fmt(values):
    return "{" + ", ".join(float(v).hex() + "f" if v != 0 else "0.0f" for v in values) + "}"


def show(name, inv, positions, af=f32(1), indices=None):
    idx = list(range(len(inv))) if indices is None else indices
    print(f"// {name}: inv_freq at {idx}")
    print(f"{{{fmt(inv[idx])},")
    print(f" {float(af).hex()}f,")
    for p in positions:
        c, s = cos_sin(inv, p, af)
        print(f" /* pos {p} */ {fmt(c[idx])}, {fmt(s[idx])},")
    print("}")


show("default theta 1e4 dim 8", default_inv_freq(10000.0, 8), [0, 1, 5, 1000])
show("linear factor 4", linear(10000.0, 8, 4.0), [1, 1000])
show("dynamic factor 2 max_pos 16 seq_len 40", dynamic(10000.0, 8, 2.0, 16, 40), [1, 39])
L3 = [0, 28, 29, 32, 35, 36, 63]
show("llama3 theta 5e5 dim 128 factor 8 low 1 high 4 orig 8192", llama3(500000.0, 128, 8.0, 1.0, 4.0, 8192), [1, 9000], indices=L3)
Y = [0, 10, 20, 30, 40, 50, 63]
inv, af = yarn(1e6, 128, 4.0, 32768)
show("yarn theta 1e6 dim 128 factor 4 orig 32768", inv, [1, 70000], af, indices=Y)
inv, af = yarn(10000.0, 64, 40.0, 4096, mscale=1.0, mscale_all_dim=0.5, truncate=False)
show("yarn theta 1e4 dim 64 factor 40 orig 4096 mscale 1 mscale_all_dim 0.5 truncate false", inv, [3], af, indices=[0, 5, 11, 17, 31])
inv, af = yarn(10000.0, 16, 2.0, 2048, beta_fast=8, beta_slow=2, attention_factor=1.25)
show("yarn theta 1e4 dim 16 factor 2 orig 2048 beta 8/2 attention_factor 1.25", inv, [5], af)

# apply: x = (1, 2, 3, 4) at position 1, head_dim 4, theta 1e4, f32; neox pairs (0, 2), (1, 3),
# GPT-J pairs (0, 1), (2, 3); then a bf16 row with every product and sum rounded to bf16.
inv = default_inv_freq(10000.0, 4)
c, s = cos_sin(inv, 1)
x = np.array([1, 2, 3, 4], dtype=f32)
neox = [x[0] * c[0] - x[2] * s[0], x[1] * c[1] - x[3] * s[1], x[2] * c[0] + x[0] * s[0], x[3] * c[1] + x[1] * s[1]]
gptj = [x[0] * c[0] - x[1] * s[0], x[1] * c[0] + x[0] * s[0], x[2] * c[1] - x[3] * s[1], x[3] * c[1] + x[2] * s[1]]
print("// apply f32 neox", fmt(neox))
print("// apply f32 gptj", fmt(gptj))
bf = ml_dtypes.bfloat16


def r(v):
    return f32(bf(v))


xb = np.array([0.7109375, -1.3984375, 2.15625, 0.0390625], dtype=f32)  # exact in bf16
c, s = cos_sin(inv, 7)
cb, sb = [r(v) for v in c], [r(v) for v in s]
out = [r(r(xb[0] * cb[0]) - r(xb[2] * sb[0])), r(r(xb[1] * cb[1]) - r(xb[3] * sb[1])),
       r(r(xb[2] * cb[0]) + r(xb[0] * sb[0])), r(r(xb[3] * cb[1]) + r(xb[1] * sb[1]))]
print("// apply bf16 neox position 7", fmt(out))
