"""Correctness before speed: every output (and every gradient) is compared with the op's reference.

Two bounds, both per output dtype and stated once, here (with the room FP8 products add):
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

# FP8 products (e4m3 or e5m2 operands, scaled, accumulated in fp32) are checked against the product of the
# dequantised operands: the fp8 values are the reference's own, so the format's rounding is no error of
# the kernel, and the same bounds hold for e4m3 and e5m2. Left are the output's rounding (the tables above,
# for the output dtype) and the accumulation: Hopper's FP8 tensor cores add products with fewer bits than
# fp32 within each K step before the sum joins an fp32 accumulator, which binds for float32 outputs
# (not yet measured on a GPU).
FP8_DTYPES: tuple[torch.dtype, ...] = (torch.float8_e4m3fn, torch.float8_e5m2)
FP8_ACCUMULATION_TOLERANCE = 1e-3
FP8_ELEMENT_ACCUMULATION_TOLERANCE = 1e-2
# End to end, against the product of the unquantised operands, per format: rounding to 3 (e4m3) or 2 (e5m2)
# mantissa bits with the scales of amax / fp8 max gives about 3.7e-2 and 7.5e-2 on normal data.
FP8_TOLERANCE: dict[torch.dtype, float] = {torch.float8_e4m3fn: 5e-2, torch.float8_e5m2: 1e-1}


def tolerances(dtype: torch.dtype, operands: torch.dtype | None = None) -> tuple[float, float]:
    """(norm-wise, elementwise) bounds for outputs of `dtype` computed from `operands` (default: the same)."""
    tol, elem_tol = TOLERANCE[dtype], ELEMENT_TOLERANCE[dtype]
    if operands in FP8_DTYPES:
        return max(tol, FP8_ACCUMULATION_TOLERANCE), max(elem_tol, FP8_ELEMENT_ACCUMULATION_TOLERANCE)
    return tol, elem_tol


def fp8_tolerance(out_dtype: torch.dtype) -> float:
    """The norm-wise bound of an FP8 product with an `out_dtype` output, against the dequantised product."""
    return tolerances(out_dtype, torch.float8_e4m3fn)[0]


@dataclass(frozen=True)
class Check:
    ok: bool
    rel_error: float  # the largest norm-wise error over the outputs checked
    tolerance: float
    reason: str
    element_error: float = math.nan  # the largest elementwise error over the outputs checked
    errors: dict[str, float] = field(default_factory=dict)  # norm-wise error per output name


def _name(dtype: torch.dtype, operands: torch.dtype | None = None) -> str:
    name = str(dtype).removeprefix("torch.")
    return f"{_name(operands)} -> {name}" if operands in FP8_DTYPES else name


def element_error(out_hi: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / (rms(ref) + |ref|): 0 for an exact result, about 1 for an element of a wrong sign."""
    rms = torch.linalg.vector_norm(ref) / math.sqrt(max(ref.numel(), 1))
    denom = ref.abs() + rms.clamp_min(1e-30)
    return float(((out_hi - ref).abs() / denom).max()) if ref.numel() else 0.0


def kind_of(value: object) -> str:
    """A value's type as a reader knows it: `NoneType`, `tuple`, `numpy.ndarray`."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def check(
    out: torch.Tensor,
    ref: torch.Tensor,
    dtype: torch.dtype,
    name: str = "",
    operands: torch.dtype | None = None,
    element_tolerance: float | None = None,
    expected_dtype: torch.dtype | None = None,
) -> Check:
    """Compare a provider's output of `dtype` (made from `operands`) with the reference; anything but a tensor,
    a wrong shape, device or dtype (where `expected_dtype` is given) or any NaN/Inf fails outright, with a
    reason that says what it was. element_tolerance: the elementwise bound, where the op states its own."""
    tol, elem_tol = tolerances(dtype, operands)
    elem_tol = elem_tol if element_tolerance is None else element_tolerance
    what = f"{name}: " if name else ""
    if not isinstance(out, torch.Tensor):
        return Check(False, math.inf, tol, f"{what}the provider returned {kind_of(out)}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return Check(False, math.inf, tol, f"{what}output shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    if out.device != ref.device:
        return Check(False, math.inf, tol, f"{what}output on {out.device}, expected on {ref.device}")
    if expected_dtype is not None and out.dtype != expected_dtype:
        return Check(
            False, math.inf, tol, f"{what}output dtype {_name(out.dtype)}, expected the case's {_name(expected_dtype)}"
        )
    out_hi = out.detach().to(ref.dtype)
    finite = torch.isfinite(out_hi)
    if not bool(finite.all()):
        nans = int(torch.isnan(out_hi).sum())
        infs = int((~finite).sum()) - nans
        found = " and ".join(f"{n} {kind}" for n, kind in ((nans, "NaN"), (infs, "Inf")) if n)
        return Check(
            False, math.inf, tol, f"{what}{nans + infs} of {out.numel()} output elements are NaN or Inf ({found})"
        )
    err = float(torch.linalg.vector_norm(out_hi - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))
    worst = element_error(out_hi, ref)
    errors = {name or "out": err}
    if err > tol:
        reason = f"{what}relative error {err:.3g} exceeds the {_name(dtype, operands)} tolerance {tol:g}"
        return Check(False, err, tol, reason, worst, errors)
    if worst > elem_tol:
        bad = int(((out_hi - ref).abs() > elem_tol * (ref.abs() + ref.pow(2).mean().sqrt())).sum())
        reason = (
            f"{what}{bad} of {out.numel()} elements are off by up to {worst:.3g} of (rms + |ref|), beyond the "
            f"{_name(dtype, operands)} elementwise tolerance {elem_tol:g} (relative error {err:.3g})"
        )
        return Check(False, err, tol, reason, worst, errors)
    return Check(True, err, tol, "", worst, errors)


def check_all(
    outs: dict[str, torch.Tensor],
    refs: dict[str, torch.Tensor],
    dtype: torch.dtype,
    operands: torch.dtype | None = None,
    gradient_element_tolerance: dict[torch.dtype, float] | None = None,
    expected_dtypes: dict[str, torch.dtype] | None = None,
) -> Check:
    """Every named output (the forward's, each gradient) against its reference; the first failure decides.
    gradient_element_tolerance: the op's own elementwise bound for its gradients (every output but `out`);
    expected_dtypes: the dtype each output must have (the suite's: the case's output dtype, each gradient its
    input's), where a dtype is part of the answer. `errors` holds the outputs that could be compared."""
    if not isinstance(outs, dict):
        return Check(False, math.inf, tolerances(dtype, operands)[0], f"the provider returned {kind_of(outs)}")
    missing = [name for name in refs if name not in outs]
    if missing:
        return Check(False, math.inf, tolerances(dtype, operands)[0], f"no {', '.join(missing)} computed")
    own = (gradient_element_tolerance or {}).get(dtype)
    wanted = expected_dtypes or {}
    results = {
        name: check(
            outs[name],
            ref,
            dtype,
            name if len(refs) > 1 else "",
            operands,
            None if name == "out" else own,
            wanted.get(name),
        )
        for name, ref in refs.items()
    }
    errors = {name: r.rel_error for name, r in results.items() if math.isfinite(r.rel_error)}
    failed = [r for r in results.values() if not r.ok]
    worst = max(results.values(), key=lambda r: r.rel_error)
    element = max(r.element_error for r in results.values())
    if failed:
        first = failed[0]
        return Check(False, worst.rel_error, first.tolerance, first.reason, element, errors)
    return Check(True, worst.rel_error, worst.tolerance, "", element, errors)
