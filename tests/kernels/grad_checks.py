"""Gradient checks of the backward tests: the project's L2 tolerance and an elementwise bound, and reference
gradients by torch autograd in high precision."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from reference_precision import high, no_tf32

from tierbench.suite.measure.checking import ELEMENT_TOLERANCE, TOLERANCE, element_error

# The elementwise bound is the suite's (suite/measure/checking.py): no element off by more than ELEMENT_TOLERANCE of
# (the reference's RMS + its own size). The L2 tolerance alone lets a small wrong or unwritten block through
# (a zeroed tile of a large gradient moves the L2 error little); this bound does not. Measured against the
# RMS alone it would fail correct kernels: the first rows of a causal head attend to a few keys, their dq is
# several RMS large, and its bf16 rounding reads up to 0.21 RMS (H200, B2 H16 S4096).

# A gradient whose reference is exactly zero (attention over one key: dq = dk = 0) must come out below this;
# the tests' inputs are unit normal, so their gradients are of order one.
ZERO_ATOL = 1e-4


def grad_errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(||out - ref|| / ||ref||, max |out - ref| / (rms(ref) + |ref|)), in float64."""
    ref = ref.to(device=out.device, dtype=torch.float64)
    diff = out.double() - ref
    return (diff.norm() / ref.norm()).item(), element_error(out.double(), ref)


def assert_grad_close(
    out: torch.Tensor | None,
    ref: torch.Tensor,
    dtype: torch.dtype,
    what: str,
    element_tolerance: dict[torch.dtype, float] | None = None,
) -> None:
    """element_tolerance: an op's own elementwise bound for its gradients (suite/ops: Op), else the suite's."""
    assert out is not None, f"{what}: no gradient"
    assert out.dtype == dtype, f"{what}: gradient dtype {out.dtype}, expected {dtype}"
    assert out.shape == ref.shape, f"{what}: gradient shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    assert torch.isfinite(out).all(), f"{what}: gradient has NaN/inf (unwritten or broken elements)"
    ref = ref.to(device=out.device, dtype=torch.float64)
    if not ref.any():
        worst = out.double().abs().max().item()
        assert worst <= ZERO_ATOL, f"{what}: reference is zero, gradient reaches {worst:.2e}"
        return
    err, worst = grad_errors(out, ref)
    assert err <= TOLERANCE[dtype], f"{what}: relative error {err:.2e} > {TOLERANCE[dtype]:.0e} ({dtype})"
    rms = ref.pow(2).mean().sqrt()
    score = (out.double() - ref).abs() / (ref.abs() + rms)
    where = tuple(int(i) for i in torch.unravel_index(score.argmax(), ref.shape))
    bound = (element_tolerance or {}).get(dtype, ELEMENT_TOLERANCE[dtype])
    assert worst <= bound, f"{what}: element {where} off by {worst:.2e} of (rms + |ref|) > {bound:.0e}"


def reference_grads(
    fn: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor | None], grad_out: torch.Tensor
) -> list[torch.Tensor | None]:
    """Gradients of fn(*inputs) . grad_out with respect to each tensor input, by autograd in float64 on the
    CPU (float32 on a GPU: the references' own precision there); None inputs stay None."""
    leaves = [None if t is None else high(t.detach()).requires_grad_() for t in inputs]
    with no_tf32():
        out = fn(*leaves)
        present = [t for t in leaves if t is not None]
        grads = iter(torch.autograd.grad(out, present, high(grad_out)))
    return [None if t is None else next(grads) for t in leaves]
