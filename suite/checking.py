"""Correctness before speed: every output (and every gradient) is compared with the op's reference.

Two bounds, both per dtype and stated once, here:
- norm-wise: ||out - ref|| / ||ref||, so it means the same for every op and size;
- elementwise: max |out - ref| / (rms(ref) + |ref|), so a few wrong elements (an unwritten tail, one wrong
  row, one wrong head) fail even where they move the norm too little to notice.
NaN or Inf never passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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

# Elementwise: no element may be off by more than this fraction of (the reference's RMS + its own size).
# An element that should be of typical size but reads 0 scores about 0.5 (any |ref| above 0.11 RMS fails
# at 0.1); rounding alone scores at most half an ulp (0.002 bf16, 0.0005 fp16). A backward in 16-bit types
# rounds P and dS to the output type: the attention backwards on a CPU scored up to 0.037 (bf16).
ELEMENT_TOLERANCE: dict[torch.dtype, float] = {
    torch.bfloat16: 1e-1,
    torch.float16: 2e-2,
    torch.float32: 1e-3,
}


@dataclass(frozen=True)
class Check:
    ok: bool
    rel_error: float  # the largest norm-wise error over the outputs checked
    tolerance: float
    reason: str
    element_error: float = math.nan  # the largest elementwise error over the outputs checked
    errors: dict[str, float] = field(default_factory=dict)  # norm-wise error per output name


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def element_error(out_hi: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / (rms(ref) + |ref|): 0 for an exact result, about 1 for an element of a wrong sign."""
    rms = torch.linalg.vector_norm(ref) / math.sqrt(max(ref.numel(), 1))
    denom = ref.abs() + rms.clamp_min(1e-30)
    return float(((out_hi - ref).abs() / denom).max()) if ref.numel() else 0.0


def check(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, name: str = "") -> Check:
    """Compare a provider's output with the reference; a wrong shape or any NaN/Inf fails outright."""
    tol, elem_tol = TOLERANCE[dtype], ELEMENT_TOLERANCE[dtype]
    what = f"{name}: " if name else ""
    if not isinstance(out, torch.Tensor):
        return Check(False, math.inf, tol, f"{what}the provider returned {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return Check(False, math.inf, tol, f"{what}output shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    out_hi = out.detach().to(ref.dtype)
    finite = torch.isfinite(out_hi)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        return Check(False, math.inf, tol, f"{what}{bad} of {out.numel()} output elements are NaN or Inf")
    err = float(torch.linalg.vector_norm(out_hi - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))
    worst = element_error(out_hi, ref)
    errors = {name or "out": err}
    if err > tol:
        reason = f"{what}relative error {err:.3g} exceeds the {_name(dtype)} tolerance {tol:g}"
        return Check(False, err, tol, reason, worst, errors)
    if worst > elem_tol:
        bad = int(((out_hi - ref).abs() > elem_tol * (ref.abs() + ref.pow(2).mean().sqrt())).sum())
        reason = (
            f"{what}{bad} of {out.numel()} elements are off by up to {worst:.3g} of (rms + |ref|), beyond the "
            f"{_name(dtype)} elementwise tolerance {elem_tol:g} (relative error {err:.3g})"
        )
        return Check(False, err, tol, reason, worst, errors)
    return Check(True, err, tol, "", worst, errors)


def check_all(outs: dict[str, torch.Tensor], refs: dict[str, torch.Tensor], dtype: torch.dtype) -> Check:
    """Every named output (the forward's, each gradient) against its reference; the first failure decides."""
    missing = [name for name in refs if name not in outs]
    if missing:
        return Check(False, math.inf, TOLERANCE[dtype], f"no {', '.join(missing)} computed")
    results = {name: check(outs[name], ref, dtype, name if len(refs) > 1 else "") for name, ref in refs.items()}
    errors = {name: r.rel_error for name, r in results.items()}
    failed = [r for r in results.values() if not r.ok]
    worst = max(results.values(), key=lambda r: r.rel_error)
    element = max(r.element_error for r in results.values())
    if failed:
        first = failed[0]
        return Check(False, max(errors.values()), first.tolerance, first.reason, element, errors)
    return Check(True, worst.rel_error, worst.tolerance, "", element, errors)
