"""Correctness before speed: every output is compared with the op's high-precision reference.

The error is relative in the L2 sense, ||out - ref|| / ||ref||, so it means the same for every op and size.
Tolerances are per dtype and stated once, here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# The one tolerance table of the project (the suite, asv and the kernel tests all use it). Rounding the
# output alone gives ~3e-3 (bf16, 8 significant bits) and ~3e-4 (fp16, 11 bits); the bounds leave room
# for accumulation order, never for a wrong result. fp32 means TF32-free float32 arithmetic. On an H200,
# every correct provider of the full suite stayed below 4.5e-3 (bf16) and 5.8e-4 (fp16).
TOLERANCE: dict[torch.dtype, float] = {
    torch.bfloat16: 1e-2,
    torch.float16: 2e-3,
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
