"""The correctness bounds in force, by dtype name: the one table the check uses and the readers judge by.

Torch-free, so that every reader of records (summary, export, the site, compare) can judge a stored error
again under today's bounds without loading torch. suite/measure/checking.py maps torch dtypes onto these names.

Two bounds per output dtype:
- norm-wise: ||out - ref|| / ||ref||, so it means the same for every op and size;
- elementwise: max |out - ref| / (rms(ref) + |ref|), so a few wrong elements (an unwritten tail, one wrong
  row, one wrong head) fail even where they move the norm too little to notice.
"""

from __future__ import annotations

# Rounding the output alone gives ~3e-3 (bf16, 8 significant bits) and ~3e-4 (fp16, 11 bits); the bounds
# leave room for accumulation order, never for a wrong result. fp32 means TF32-free float32 arithmetic. On
# an H200, every correct provider of the full suite stayed below 4.5e-3 (bf16) and 5.8e-4 (fp16).
TOLERANCE: dict[str, float] = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 1e-4}

# No element may be off by more than this fraction of (the reference's RMS + its own size). An element that
# should be of typical size but reads 0 scores about 0.5 (any |ref| above 0.11 RMS fails at 0.1); rounding
# alone scores at most half an ulp (0.002 bf16, 0.0005 fp16). A backward in 16-bit types rounds P and dS to
# the output type: the attention backwards on a CPU scored up to 0.037 (bf16).
ELEMENT_TOLERANCE: dict[str, float] = {"bf16": 1e-1, "fp16": 2e-2, "fp32": 1e-3}

# FP8 products (e4m3 or e5m2 operands, scaled, accumulated in fp32) are checked against the product of the
# dequantised operands: the fp8 values are the reference's own, so the format's rounding is no error of
# the kernel, and the same bounds hold for e4m3 and e5m2. Left are the output's rounding (the tables above,
# for the output dtype) and the accumulation: Hopper's FP8 tensor cores add products with fewer bits than
# fp32 within each K step before the sum joins an fp32 accumulator, which binds for float32 outputs
# (not yet measured on a GPU).
FP8_NAMES: tuple[str, ...] = ("fp8_e4m3", "fp8_e5m2")
FP8_ACCUMULATION_TOLERANCE = 1e-3
FP8_ELEMENT_ACCUMULATION_TOLERANCE = 1e-2
# End to end, against the product of the unquantised operands, per format: rounding to 3 (e4m3) or 2 (e5m2)
# mantissa bits with the scales of amax / fp8 max gives about 3.7e-2 and 7.5e-2 on normal data.
FP8_TOLERANCE: dict[str, float] = {"fp8_e4m3": 5e-2, "fp8_e5m2": 1e-1}

# Ops whose gradients are ill-conditioned in 16 bits state their own elementwise bound for them, per output
# dtype, in place of ELEMENT_TOLERANCE (their forward output keeps the table's).
#
# attention: a flash-style backward rounds P and dS to 16 bits before its products; in a causal mask's first
# rows (a handful of keys, P nearly one-hot) dS = P * (dP - D) cancels, so dq there carries P's rounding at
# the size of the row's dP, while the tensor's RMS, which the bound is relative to, falls as the rows grow
# longer. On the H200 every flash-style provider (SDPA's flash, cuDNN and efficient backends, flash-attn 4,
# the Triton kernel) put the same 2-6 of 33.5M dq elements at 0.103-0.126 (bf16, S 4096 and 16384, causal),
# and SDPA's flash backend 0.128 on a CPU (S 4096): above the table's 0.1 and far below what a wrong element
# scores (an unwritten one ~0.5, a neighbour's row ~1).
OWN_GRADIENT_ELEMENT_TOLERANCE: dict[str, dict[str, float]] = {
    "attention": {"bf16": 0.25, "fp16": 0.05},
}


# Ops that chain others state their own bounds for every output, (norm-wise, elementwise) per output dtype.
#
# A model's block is nine ops in a row, each rounding its output to 16 bits: their errors add up where one
# op's do not. Against the float64 reference on a CPU (bf16, the tiny model and a 2 x 16-token block): the
# eager, compiled and best-mix blocks stayed within norm-wise 4.2e-3 in the forward and 7.3e-3 in the
# training pass's gradients, elementwise 0.032; every part by the Triton tier's kernels under the interpreter
# (which rounds each product's bf16 operands as it goes) reached 9.4e-3 in the forward and 2.0e-2 in dw_qkv.
# At a GPU model's sizes: not yet measured on a GPU. The bounds are three times a single op's (bf16 3e-2 and
# 0.3, fp16 6e-3 and 0.06): a wrong element still scores 0.5 or more, one wrong row of 32 about 0.18
# norm-wise. fp32 keeps the table's bounds.
_BLOCK_TOLERANCE = {"bf16": (3e-2, 0.3), "fp16": (6e-3, 0.06)}
OWN_TOLERANCE: dict[str, dict[str, tuple[float, float]]] = {
    "llama_block": _BLOCK_TOLERANCE,
    "llama_block_decode": _BLOCK_TOLERANCE,
}


def known(dtype: str) -> bool:
    """Whether the table has bounds for outputs of this dtype name."""
    return dtype in TOLERANCE


def tolerances(dtype: str, operands: str | None = None, op: str | None = None) -> tuple[float, float]:
    """(norm-wise, elementwise) bounds for outputs of `dtype` computed from `operands` (default: the same), by
    the op's own bounds where a built-in op states them; KeyError for a dtype the table does not know."""
    if op is not None and dtype in OWN_TOLERANCE.get(op, {}):
        return OWN_TOLERANCE[op][dtype]
    tol, elem_tol = TOLERANCE[dtype], ELEMENT_TOLERANCE[dtype]
    if operands in FP8_NAMES:
        return max(tol, FP8_ACCUMULATION_TOLERANCE), max(elem_tol, FP8_ELEMENT_ACCUMULATION_TOLERANCE)
    return tol, elem_tol


def own_gradient_bound(op: str, dtype: str) -> float | None:
    """A built-in op's own elementwise bound for its gradients at this output dtype, or None."""
    return OWN_GRADIENT_ELEMENT_TOLERANCE.get(op, {}).get(dtype)


def describe(dtype: str, operands: str | None = None) -> str:
    """The name a reason gives the bound's dtype: "bf16", or "fp8_e4m3 -> bf16" for an FP8 product."""
    return f"{operands} -> {dtype}" if operands in FP8_NAMES else dtype
