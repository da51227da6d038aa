"""The checkpoint tools of `fp8kit quantize / dequantize / inspect`, as functions that return
dicts (include/fp8kit/convert.h; README.md, "The command-line tool", says what each does and how
an output directory is written: nothing appears until it is complete). They run without the GIL;
`progress(bytes_done, bytes_total, tensor_name)` is called between tensors, and an exception it
raises stops the run, leaving nothing behind."""

import json
import os

from . import _fp8kit
from ._arrays import dtype_name

__all__ = ["quantize", "dequantize", "inspect"]


def quantize(input_dir, output_dir, scheme="block", block_size=(128, 128), ue8m0=False, ignore=(),
             quantize_lm_head=False, force=False, progress=None):
    """A Hugging Face BF16/FP16 checkpoint directory to an FP8 one that vLLM loads: scheme
    "block" (weight_block_size `block_size`, power-of-two scales with `ue8m0`), "per-tensor" or
    "per-channel". `ignore`: modules kept unquantized (exact paths, or "re:" regular
    expressions). Returns the report: tensors_quantized, tensors_copied, input_tensor_bytes,
    output_tensor_bytes, seconds, ignored_layers, notes."""
    if isinstance(ignore, str):
        ignore = [ignore]
    block = tuple(int(b) for b in block_size)
    if len(block) != 2:
        raise ValueError(f"`block_size` must be [block_n, block_k], got {list(block)}")
    return _fp8kit.quantize(os.fspath(input_dir), os.fspath(output_dir), str(scheme), block, bool(ue8m0),
                            [str(i) for i in ignore], bool(quantize_lm_head), bool(force), progress)


def dequantize(input_dir, output_dir, dtype=None, force=False, progress=None):
    """An FP8 checkpoint back to 16-bit weights (`dtype` bf16, f16 or f32; default the config's
    torch_dtype if 16-bit, else bf16). Returns the report, as quantize."""
    return _fp8kit.dequantize(os.fspath(input_dir), os.fspath(output_dir), dtype_name(dtype), bool(force),
                              progress)


def inspect(dir, loading=False):
    """What `fp8kit inspect --json` prints, as a dict: dir, format, quantization_config,
    ignored_layers, kv_cache_scales, tensor_bytes, tensors (name, dtype, shape, role, scheme,
    scale, scale_min, scale_max), problems; with `loading`, where the model loader places each
    tensor ("loading", "loading_note")."""
    return json.loads(_fp8kit.inspect_json(os.fspath(dir), bool(loading)))
