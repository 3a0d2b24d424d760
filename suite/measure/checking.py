"""Correctness before speed: every output (and every gradient) is compared with the op's reference.

Two bounds, both per output dtype and stated once in suite/bounds.py (with the room FP8 products add):
norm-wise, ||out - ref|| / ||ref||, and elementwise, max |out - ref| / (rms(ref) + |ref|). NaN or Inf never
passes. Each output's two errors and its elementwise bound are kept in the record, so a reader can judge the
record again under the bounds in force when it reads it (suite/store/verdicts.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .. import bounds

# The bounds in force are stated once, by dtype name, in suite/bounds.py (torch-free, so readers of records
# judge by the same table); here they are keyed by torch dtype for the suite, asv and the kernel tests.
NAMES: dict[torch.dtype, str] = {
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float32: "fp32",
    torch.float8_e4m3fn: "fp8_e4m3",
    torch.float8_e5m2: "fp8_e5m2",
}
TOLERANCE: dict[torch.dtype, float] = {d: bounds.TOLERANCE[n] for d, n in NAMES.items() if n in bounds.TOLERANCE}
ELEMENT_TOLERANCE: dict[torch.dtype, float] = {
    d: bounds.ELEMENT_TOLERANCE[n] for d, n in NAMES.items() if n in bounds.ELEMENT_TOLERANCE
}
FP8_DTYPES: tuple[torch.dtype, ...] = (torch.float8_e4m3fn, torch.float8_e5m2)
FP8_ACCUMULATION_TOLERANCE = bounds.FP8_ACCUMULATION_TOLERANCE
FP8_ELEMENT_ACCUMULATION_TOLERANCE = bounds.FP8_ELEMENT_ACCUMULATION_TOLERANCE
FP8_TOLERANCE: dict[torch.dtype, float] = {d: bounds.FP8_TOLERANCE[NAMES[d]] for d in FP8_DTYPES}


def name_of(dtype: torch.dtype | None) -> str | None:
    """The bounds table's name of a torch dtype (None for None)."""
    return None if dtype is None else NAMES.get(dtype, str(dtype).removeprefix("torch."))


def own_tolerance(op: str) -> dict[torch.dtype, tuple[float, float]] | None:
    """A built-in op's own (norm-wise, elementwise) bounds for every output, keyed by torch dtype."""
    own = bounds.OWN_TOLERANCE.get(op)
    return None if own is None else {d: own[n] for d, n in NAMES.items() if n in own}


def gradient_bounds(op: str) -> dict[torch.dtype, float] | None:
    """A built-in op's own elementwise bound for its gradients, keyed by torch dtype (suite/bounds.py)."""
    own = bounds.OWN_GRADIENT_ELEMENT_TOLERANCE.get(op)
    return None if own is None else {d: own[n] for d, n in NAMES.items() if n in own}


def tolerances(dtype: torch.dtype, operands: torch.dtype | None = None) -> tuple[float, float]:
    """(norm-wise, elementwise) bounds for outputs of `dtype` computed from `operands` (default: the same)."""
    return bounds.tolerances(NAMES[dtype], name_of(operands))


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
    element_errors: dict[str, float] = field(default_factory=dict)  # elementwise error per output name
    element_tolerances: dict[str, float] = field(default_factory=dict)  # the elementwise bound per output


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
    own_bounds: tuple[float, float] | None = None,
    expected_dtype: torch.dtype | None = None,
) -> Check:
    """Compare a provider's output of `dtype` (made from `operands`) with the reference; anything but a tensor,
    a wrong shape, device or dtype (where `expected_dtype` is given) or any NaN/Inf fails outright, with a
    reason that says what it was. element_tolerance: the elementwise bound, where the op states its own;
    own_bounds: (norm-wise, elementwise) in place of the table's, where the op states both (a chain of ops)."""
    tol, elem_tol = own_bounds or tolerances(dtype, operands)
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
    key = name or "out"
    kept = {"errors": {key: err}, "element_errors": {key: worst}, "element_tolerances": {key: elem_tol}}
    if err > tol:
        reason = f"{what}relative error {err:.3g} exceeds the {_name(dtype, operands)} tolerance {tol:g}"
        return Check(False, err, tol, reason, worst, **kept)
    if worst > elem_tol:
        bad = int(((out_hi - ref).abs() > elem_tol * (ref.abs() + ref.pow(2).mean().sqrt())).sum())
        reason = (
            f"{what}{bad} of {out.numel()} elements are off by up to {worst:.3g} of (rms + |ref|), beyond the "
            f"{_name(dtype, operands)} elementwise tolerance {elem_tol:g} (relative error {err:.3g})"
        )
        return Check(False, err, tol, reason, worst, **kept)
    return Check(True, err, tol, "", worst, **kept)


def check_all(
    outs: dict[str, torch.Tensor],
    refs: dict[str, torch.Tensor],
    dtype: torch.dtype,
    operands: torch.dtype | None = None,
    gradient_element_tolerance: dict[torch.dtype, float] | None = None,
    tolerance: dict[torch.dtype, tuple[float, float]] | None = None,
    expected_dtypes: dict[str, torch.dtype] | None = None,
) -> Check:
    """Every named output (the forward's, each gradient) against its reference; the first failure decides.
    gradient_element_tolerance: the op's own elementwise bound for its gradients (every output but `out`);
    tolerance: the op's own (norm-wise, elementwise) bounds for every output, per output dtype;
    expected_dtypes: the dtype each output must have (the suite's: the case's output dtype, each gradient its
    input's), where a dtype is part of the answer. `errors` and `element_errors` hold the outputs that could
    be compared, `element_tolerances` the elementwise bound each output was held to."""
    own_bounds = (tolerance or {}).get(dtype)
    norm_tol, table_elem = own_bounds or tolerances(dtype, operands)
    if not isinstance(outs, dict):
        return Check(False, math.inf, norm_tol, f"the provider returned {kind_of(outs)}")
    missing = [name for name in refs if name not in outs]
    if missing:
        return Check(False, math.inf, norm_tol, f"no {', '.join(missing)} computed")
    own = (gradient_element_tolerance or {}).get(dtype)
    element_bounds = {name: own if own is not None and name != "out" else table_elem for name in refs}
    wanted = expected_dtypes or {}
    results = {
        name: check(
            outs[name],
            ref,
            dtype,
            name if len(refs) > 1 else "",
            operands,
            element_bounds[name],
            own_bounds,
            wanted.get(name),
        )
        for name, ref in refs.items()
    }
    errors = {name: r.rel_error for name, r in results.items() if math.isfinite(r.rel_error)}
    kept = {
        "errors": errors,
        "element_errors": {name: r.element_error for name, r in results.items() if math.isfinite(r.element_error)},
        "element_tolerances": element_bounds,
    }
    failed = [r for r in results.values() if not r.ok]
    worst = max(results.values(), key=lambda r: r.rel_error)
    element = max(r.element_error for r in results.values())
    if failed:
        first = failed[0]
        return Check(False, worst.rel_error, first.tolerance, first.reason, element, **kept)
    return Check(True, worst.rel_error, worst.tolerance, "", element, **kept)
