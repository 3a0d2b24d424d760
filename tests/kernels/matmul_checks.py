"""Elementwise checks for matrix products, on top of the suite's relative-norm check.

A norm over the whole output can hide one wrong tile of a large result. Each element of a product computed
with fp32 accumulation and rounded once to the output dtype is off by at most its rounding (u |c_ij|) plus the
accumulation error (about K u_fp32 sum_k |a_ik b_kj|); both are below u * (|A| @ |B|)_ij. With u the
dtype's tolerance in suite/checking.py (which is at least its unit roundoff, also for the interpreter's
truncating conversions), `product_bound` is a bound every correct element meets and that a wrong tile breaks.
"""

from __future__ import annotations

import torch

from tierbench.suite.checking import TOLERANCE


def high(t: torch.Tensor) -> torch.Tensor:
    """The reference precision: float64 on the CPU, float32 on a GPU (as the suite's references)."""
    return t.double() if t.device.type == "cpu" else t.float()


def abs_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|A| @ |B| in reference precision (TF32 off on a GPU)."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return high(a).abs() @ high(b).abs()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def product_bound(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Elementwise error bound of a @ b computed in `dtype`: TOLERANCE[dtype] * (|A| @ |B|)."""
    return TOLERANCE[dtype] * abs_product(a, b)


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
