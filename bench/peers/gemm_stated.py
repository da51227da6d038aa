"""Peer figures that PERF_TARGETS.md states for the H200 but that bench/peers/gemm_torch.py cannot
measure here (DeepGEMM, vLLM's tuned Triton block kernel, cuBLASLt modes torch does not expose).
Standard library only: imported by the torch peer (printed, copied into its JSON) and by
bench/gemm_report.py. Times in µs, keyed by (M, N, K); "stated, not measured here"."""

SOURCE = "PERF_TARGETS.md (same H200 model, earlier run): stated, not measured here"

# Block-scaled GEMM peers: kernel-only time, L2 flushed.
#   (M, N, K): (vLLM Triton block, DeepGEMM 1x128/128x128, cuBLASLt FP8 without scales)
BLOCK = {
    (16, 6144, 4096): (40.8, 12.1, 11.3),
    (2048, 6144, 4096): (217.0, 74.1, 75.1),
    (8192, 6144, 4096): (798.8, 285.4, 281.0),
    (16, 4096, 14336): (136.7, 22.9, 21.7),
    (8192, 4096, 14336): (1992.4, 648.3, 657.0),
    (16, 24576, 7168): (54.5, 52.9, 51.1),
    (2048, 24576, 7168): (1053.9, 498.3, 482.3),
    (8192, 24576, 7168): (4414.0, 1975.0, 1972.0),
    (16, 7168, 18432): (73.8, 44.6, 41.9),
    (2048, 7168, 18432): (752.6, 434.0, 367.7),
    (8192, 7168, 18432): (3341.1, 1478.0, 1491.0),
}

# cuBLASLt 13.1 FP8 modes, random e4m3 data, CUDA events, L2 flushed.
#   (M, N, K): (per-tensor, per-tensor fast-accum, outer-vector token x channel, block 1x128/128x128)
CUBLASLT = {
    (16, 6144, 4096): (14.5, 14.2, 21.2, 18.5),
    (16, 24576, 7168): (53.9, 54.3, 80.9, 63.4),
    (16, 7168, 18432): (46.5, 46.3, 75.5, 51.5),
    (2048, 6144, 4096): (81.0, 75.0, 81.2, 87.8),
    (2048, 24576, 7168): (501.2, 485.0, 531.3, 624.2),
    (8192, 6144, 4096): (332.7, 324.6, 349.9, 382.8),
    (8192, 24576, 7168): (2152.6, 2215.6, 2284.9, 2614.4),
    (8192, 7168, 18432): (1679.2, 1693.0, 1714.9, 1948.4),
}


def block_rows():
    """The block table as a list of dicts (JSON-friendly)."""
    return [{"m": m, "n": n, "k": k, "vllm_triton_us": v[0], "deepgemm_us": v[1], "cublaslt_noscale_us": v[2],
             "source": SOURCE} for (m, n, k), v in BLOCK.items()]


def cublaslt_rows():
    return [{"m": m, "n": n, "k": k, "per_tensor_us": v[0], "per_tensor_fast_accum_us": v[1],
             "outer_vector_us": v[2], "block_us": v[3], "source": SOURCE} for (m, n, k), v in CUBLASLT.items()]
