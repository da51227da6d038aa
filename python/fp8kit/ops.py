"""fp8kit's ops with vLLM's Python names and signatures (vllm._custom_ops, fp8_utils, fused_moe).

Arrays go in and out zero copy (numpy with ml_dtypes, torch, cupy: see _arrays.py); results come
in the framework of the first array argument. Every op runs without the GIL. On CUDA the work is
queued on `stream` (an int handle or an object with `cuda_stream`; default: the current stream of
the array's framework) and nothing waits for it, as vLLM's ops. FP8 arrays may be given as their
uint8 view where the framework has no FP8 dtype (cupy, numpy without ml_dtypes): the ops that take
FP8 operands read uint8 as the op's FP8 dtype. Errors: ValueError for bad arguments (vLLM's
texts where it raises one), NotImplementedError for what this build or device cannot do.
The formulas: include/fp8kit/ops/*.h and docs/numerics.md.
"""

from . import _fp8kit
from ._arrays import array, dtype_name, stream_handle, tensor

__all__ = [
    "scaled_fp8_quant", "per_token_group_quant_fp8", "scaled_mm", "cutlass_scaled_mm",
    "w8a8_block_fp8_matmul", "fused_experts", "fused_topk", "moe_align_block_size",
    "silu_and_mul", "gelu_and_mul", "moe_sum", "reshape_and_cache_flash", "rms_norm",
    "fused_add_rms_norm",
]


def _block(block, name):
    if block is None:
        return None
    block = tuple(int(b) for b in block)
    if len(block) != 2:
        raise ValueError(f"`{name}` must be [block_n, block_k], got {list(block)}")
    return block


def scaled_fp8_quant(input, scale=None, num_token_padding=None, scale_ub=None,
                     use_per_token_if_dynamic=False, output=None, *, dtype=None, stream=None):
    """FP8 quantization of a 2-D `input` (f32/f16/bf16): static with `scale`, else dynamic per
    tensor, or per token with `use_per_token_if_dynamic` (scales floored, bounded by `scale_ub`).
    Returns (q, scale) with dequantization scales (x ~= q * scale). `dtype`: e4m3fn (default) or
    e4m3fnuz."""
    out_dtype = dtype_name(dtype, "e4m3fn")
    q, s = _fp8kit.scaled_fp8_quant(
        tensor(input, "input"), tensor(scale, "scale"), num_token_padding, tensor(scale_ub, "scale_ub"),
        bool(use_per_token_if_dynamic), tensor(output, "output", fp8=out_dtype, writable=True),
        out_dtype, stream_handle(stream, input))
    return (output if output is not None else array(q, input)), array(s, input)


def per_token_group_quant_fp8(x, group_size, eps=1e-10, dtype=None, column_major_scales=False,
                              out_q=None, use_ue8m0=False, *, tma_aligned_scales=False, stream=None):
    """FP8 quantization in 1 x `group_size` groups of the last dimension; returns (x_q, x_s) with
    f32 scales of shape x.shape[:-1] + (K // group_size,) (column-major with
    `column_major_scales`, each column padded to a multiple of 4 with `tma_aligned_scales`)."""
    out_dtype = dtype_name(dtype, "e4m3fn")
    q, s = _fp8kit.per_token_group_quant(
        tensor(x, "x"), int(group_size), float(eps), out_dtype, bool(column_major_scales),
        bool(tma_aligned_scales), bool(use_ue8m0), tensor(out_q, "out_q", fp8=out_dtype, writable=True),
        stream_handle(stream, x))
    return (out_q if out_q is not None else array(q, x)), array(s, x)


def scaled_mm(a, b, scale_a, scale_b, out_dtype, bias=None, *, block_size=None, out=None,
              fast_accum=False, stream=None):
    """vLLM's cutlass_scaled_mm: out = (scale_a * a) @ (scale_b * b), a [M, K] e4m3fn row-major,
    b [K, N] e4m3fn column-major (weight.t() of an [N, K] weight). Scales (f32): one element, or
    per row of a ([M] / [M, 1]) and per column of b ([N] / [1, N]); otherwise block scales,
    scale_a [M, K / bk] and scale_b [K / bk, ceil(N / bn)] (vLLM passes Bs.t()), with the block
    [bn, bk] from `block_size` or else from the shapes. bias [N] of out_dtype; out_dtype bf16,
    f16 or f32."""
    ta, tb = tensor(a, "a", fp8="e4m3fn"), tensor(b, "b", fp8="e4m3fn")
    tsa, tsb = tensor(scale_a, "scale_a"), tensor(scale_b, "scale_b")
    m, k = (ta.shape + [0, 0])[:2]
    n = tb.shape[1] if len(tb.shape) == 2 else 0
    block = _block(block_size, "block_size")
    numel = lambda t: _prod(t.shape)  # noqa: E731
    if block is None and not (numel(tsa) in (1, m) and numel(tsb) in (1, n)):
        block = _infer_block(tsa.shape, tsb.shape, m, n, k)
    if block is not None:
        if len(tsb.shape) != 2:
            raise ValueError(f"scaled_mm: block `scale_b` must be [K / block_k, ceil(N / block_n)], "
                             f"got {tsb.shape}")
        tsb = tsb.t()  # fp8kit's [ceil(N / bn), K / bk], a transposed view
    y = _fp8kit.scaled_mm(ta, tb, tsa, tsb, dtype_name(out_dtype), tensor(bias, "bias"), block,
                          tensor(out, "out", writable=True), bool(fast_accum), stream_handle(stream, a))
    return out if out is not None else array(y, a)


cutlass_scaled_mm = scaled_mm


def w8a8_block_fp8_matmul(A, B, As, Bs, block_size, output_dtype="f16", *, stream=None):
    """vLLM's block-scaled FP8 GEMM: A [..., K] e4m3fn with As [..., K / bk], B [N, K] e4m3fn with
    Bs [ceil(N / bn), ceil(K / bk)]; returns A @ B.T, [..., N] of `output_dtype` (default f16)."""
    block = _block(block_size, "block_size")
    ta, tas = tensor(A, "A", fp8="e4m3fn"), tensor(As, "As")
    lead = ta.shape[:-1]
    a2 = ta if len(ta.shape) == 2 else ta.view([_prod(lead), ta.shape[-1]])
    as2 = tas if len(tas.shape) == 2 else tas.view([_prod(lead), tas.shape[-1]])
    y = _fp8kit.scaled_mm(a2, tensor(B, "B", fp8="e4m3fn"), as2, tensor(Bs, "Bs"),
                          dtype_name(output_dtype), None, block, None, False, stream_handle(stream, A))
    result = array(y, A)
    return result if len(lead) == 1 else result.reshape(*lead, result.shape[-1])


def fused_experts(hidden_states, w1, w2, topk_weights, topk_ids, inplace=False, activation="silu",
                  apply_router_weight_on_input=False, use_fp8_w8a8=False, global_num_experts=-1,
                  expert_map=None, w1_scale=None, w2_scale=None, a1_scale=None, a2_scale=None,
                  block_shape=None, *, weight_only=False, chunk_size=0, fast_accum=False, stream=None):
    """vLLM's fused_experts: quantize -> grouped GEMM1 (w1 [E, 2I, H]) -> silu/gelu-and-mul ->
    quantize -> grouped GEMM2 (w2 [E, H, I]) -> weighted sum over the top-k experts. FP8 experts
    with `use_fp8_w8a8` (per-tensor w*_scale [E], or block scales with `block_shape` [bn, bk]),
    FP8 weights with 16-bit activations with `weight_only`, else 16-bit experts. Returns [M, H]
    (hidden_states itself when `inplace`)."""
    fp8 = "e4m3fn" if (use_fp8_w8a8 or weight_only) else None
    y = _fp8kit.fused_experts(
        tensor(hidden_states, "hidden_states", writable=bool(inplace)), tensor(w1, "w1", fp8=fp8),
        tensor(w2, "w2", fp8=fp8), tensor(topk_weights, "topk_weights"), tensor(topk_ids, "topk_ids"),
        bool(inplace), str(activation), bool(apply_router_weight_on_input), bool(use_fp8_w8a8),
        bool(weight_only), int(global_num_experts), tensor(expert_map, "expert_map"),
        tensor(w1_scale, "w1_scale"), tensor(w2_scale, "w2_scale"), tensor(a1_scale, "a1_scale"),
        tensor(a2_scale, "a2_scale"), _block(block_shape, "block_shape"), int(chunk_size),
        bool(fast_accum), stream_handle(stream, hidden_states))
    return hidden_states if inplace else array(y, hidden_states)


def fused_topk(hidden_states, gating_output, topk, renormalize, indices_type=None, *, stream=None):
    """Softmax over the experts, then the top-k (ties to the lower expert); returns
    (topk_weights f32 [M, topk], topk_ids i32 [M, topk], or `indices_type`)."""
    w, ids = _fp8kit.fused_topk(tensor(hidden_states, "hidden_states"), tensor(gating_output, "gating_output"),
                                int(topk), bool(renormalize), dtype_name(indices_type),
                                stream_handle(stream, gating_output))
    return array(w, gating_output), array(ids, gating_output)


def moe_align_block_size(topk_ids, block_size, num_experts, expert_map=None, pad_sorted_ids=False, *,
                         stream=None):
    """The routed slots grouped by expert, each expert's segment padded to `block_size`; returns
    (sorted_token_ids, expert_ids, num_tokens_post_padded), all i32."""
    r = _fp8kit.moe_align_block_size(tensor(topk_ids, "topk_ids"), int(block_size), int(num_experts),
                                     tensor(expert_map, "expert_map"), bool(pad_sorted_ids),
                                     stream_handle(stream, topk_ids))
    return tuple(array(t, topk_ids) for t in r)


def silu_and_mul(out, input, *, stream=None):
    """out[..., i] = silu(input[..., i]) * input[..., d + i] for input [..., 2d] (vLLM's op order:
    out first); out [..., d] of input's dtype, contiguous."""
    _fp8kit.gated_activation("silu", tensor(input, "input"), tensor(out, "out", writable=True),
                             stream_handle(stream, input))


def gelu_and_mul(out, input, *, stream=None):
    """As silu_and_mul with the erf GELU."""
    _fp8kit.gated_activation("gelu", tensor(input, "input"), tensor(out, "out", writable=True),
                             stream_handle(stream, input))


def moe_sum(input, output, *, stream=None):
    """output[m, :] = sum over k of input[m, k, :] (input [M, topk, D], output [M, D]), in place."""
    _fp8kit.moe_sum(tensor(input, "input"), tensor(output, "output", writable=True), stream_handle(stream, input))


def reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale,
                            v_scale, *, stream=None):
    """Writes this step's key/value rows [T, H_kv, D] into the paged caches [num_blocks,
    block_size, H_kv, D] at slot_mapping (i64; negative: skipped), in place; kv_cache_dtype
    "auto" (a copy), "fp8" / "fp8_e4m3" or "fp8_e5m2" (bytes of x / scale; uint8 caches)."""
    _fp8kit.reshape_and_cache_flash(
        tensor(key, "key"), tensor(value, "value"), tensor(key_cache, "key_cache", writable=True),
        tensor(value_cache, "value_cache", writable=True), tensor(slot_mapping, "slot_mapping"),
        str(kv_cache_dtype), tensor(k_scale, "k_scale"), tensor(v_scale, "v_scale"), stream_handle(stream, key))


def rms_norm(out, input, weight, epsilon, *, stream=None):
    """out = input / sqrt(mean(input^2) + epsilon) * weight over the last dimension (vLLM's order:
    out first)."""
    _fp8kit.rms_norm(tensor(input, "input"), tensor(weight, "weight"), float(epsilon),
                     tensor(out, "out", writable=True), stream_handle(stream, input))


def fused_add_rms_norm(input, residual, weight, epsilon, *, stream=None):
    """residual = input + residual (rounded to the dtype), input = rms_norm(residual), in place."""
    _fp8kit.fused_add_rms_norm(tensor(input, "input", writable=True), tensor(residual, "residual", writable=True),
                               tensor(weight, "weight"), float(epsilon), stream_handle(stream, input))


def _infer_block(sa_shape, sb_shape, m, n, k):
    """[bn, bk] of block scales sa [M, K / bk], sb [K / bk, ceil(N / bn)]: square blocks (bn = bk,
    as every published checkpoint has) when they fit, else N / columns when that divides."""
    if len(sa_shape) == 2 and len(sb_shape) == 2 and sa_shape[1] > 0 and k % sa_shape[1] == 0:
        bk = k // sa_shape[1]
        cols = sb_shape[1]
        if -(-n // bk) == cols:
            return (bk, bk)
        if cols > 0 and n % cols == 0:
            return (n // cols, bk)
    raise ValueError(f"scaled_mm: scales {list(sa_shape)} and {list(sb_shape)} are neither per-tensor, per-row "
                     f"nor block scales of [{m}, {k}] x [{k}, {n}]; pass block_size")


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n
