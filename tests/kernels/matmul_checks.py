"""Elementwise checks for matrix products, on top of the suite's relative-norm check.

A norm over the whole output can hide a few wrong elements of a large result (a tile that missed a K step,
a misplaced store). Each element c_ij of a product accumulated in fp32 and rounded once to the output dtype
is off by at most
- its rounding, below TOLERANCE[dtype] * |c_ij| (the tolerance is at least the dtype's unit roundoff, also
  for the interpreter's truncating conversions), plus
- the accumulation error, at most K * 2^-22 * (|A| @ |B|)_ij: four times fp32's worst case, room for tensor
  cores that truncate where IEEE arithmetic rounds, plus
- what errors of its own operands carry through the product, when the kernel made those operands itself
  (`a_err`, `b_err`: elementwise bounds on them).
`product_bound` is that sum: every correct element meets it, a wrong one breaks it by far.
"""

from __future__ import annotations

import torch
from reference_precision import exact_matmul, high

from tierbench.suite.measure.checking import TOLERANCE

# Worst-case accumulation error of one term of K, relative to sum_k |a_ik b_kj| (four fp32 unit roundoffs).
FP32_ACCUMULATION_PER_TERM = 2.0**-22


def product_bound(
    a: torch.Tensor,
    b: torch.Tensor,
    ref: torch.Tensor,
    dtype: torch.dtype,
    *,
    a_err: torch.Tensor | None = None,
    b_err: torch.Tensor | None = None,
    accumulation: float | None = None,
) -> torch.Tensor:
    """Elementwise error bound of a kernel's a @ b (reference `ref`) output in `dtype`; see the module docstring.

    `accumulation` overrides the accumulation term's factor of |A| @ |B| (K * 2^-22 by default).
    """
    if accumulation is None:
        accumulation = a.shape[1] * FP32_ACCUMULATION_PER_TERM
    bound = TOLERANCE[dtype] * high(ref).abs() + accumulation * exact_matmul(a.abs(), b.abs())
    if a_err is not None:
        bound += exact_matmul(a_err, b.abs())
    if b_err is not None:
        bound += exact_matmul(a.abs(), b_err)
    return bound


def assert_elementwise(out: torch.Tensor, ref: torch.Tensor, bound: torch.Tensor, what: str = "") -> None:
    """Every element within its bound; the message says how many are not and where the first one is."""
    ref = ref.to(device=out.device)
    err = (out.to(ref.dtype) - ref).abs()
    bad = ~(err <= bound.to(device=out.device, dtype=ref.dtype))  # NaN fails too
    if bool(bad.any()):
        idx = bad.nonzero()
        first = tuple(int(i) for i in idx[0])
        lo = tuple(int(i) for i in idx.min(0).values)
        hi = tuple(int(i) for i in idx.max(0).values)
        raise AssertionError(
            f"{what}: {len(idx)} of {out.numel()} elements outside their bound (within {lo}..{hi}); first at "
            f"{first}: |{float(out[first]):.6g} - {float(ref[first]):.6g}| > {float(bound[first]):.3g}"
        )
