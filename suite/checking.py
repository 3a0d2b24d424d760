"""Correctness before speed: every output is compared with the op's high-precision reference.

The error is relative in the L2 sense, ||out - ref|| / ||ref||, so it means the same for every op and size.
Tolerances are per dtype and stated once, here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# Output rounding alone gives ~2^-9 (bf16) and ~2^-12 (fp16) relative error per element; these leave room
# for accumulation-order differences, never for a wrong result. fp32 allows TF32-free float32 arithmetic.
TOLERANCE: dict[torch.dtype, float] = {
    torch.bfloat16: 2e-2,
    torch.float16: 5e-3,
    torch.float32: 1e-4,
}


@dataclass(frozen=True)
class Check:
    ok: bool
    rel_error: float
    tolerance: float
    reason: str


def check(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> Check:
    """Compare a provider's output with the reference; a wrong shape or any NaN/Inf fails outright."""
    tol = TOLERANCE[dtype]
    if tuple(out.shape) != tuple(ref.shape):
        return Check(False, math.inf, tol, f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    out_hi = out.to(ref.dtype)
    finite = torch.isfinite(out_hi)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        return Check(False, math.inf, tol, f"{bad} of {out.numel()} output elements are NaN or Inf")
    err = float(torch.linalg.vector_norm(out_hi - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))
    if err > tol:
        return Check(False, err, tol, f"relative error {err:.3g} exceeds the {_name(dtype)} tolerance {tol:g}")
    return Check(True, err, tol, "")


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
