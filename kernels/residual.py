"""The residual stream's kernels: the residual add, and the residual add fused with RMSNorm.

- residual_add(x, residual) = x + residual, one pass; its backward hands dy to both inputs (no kernel).
- add_rms_norm(x, residual, weight, eps) -> (out, residual_out): residual_out = x + residual (rounded to the
  inputs' dtype and stored once) and out = RMSNorm(residual_out) · weight, as serving engines run a block's
  residual add and the norm after it: each row of x and residual read once, both results written once, where
  the unfused pair writes the sum and reads it back. Rows are walked in chunks of at most MAX_BLOCK columns
  (the second pass re-reads the chunk of the sum it just wrote), so any hidden size runs; the row's fp32 rstd
  is stored for the backward, which for each row computes
      d(sum) = rstd · (w·dy − x̂ · mean(w·dy · x̂)) + d(residual_out),   x̂ = residual_out · rstd,
  writes it once (both inputs' gradient), and adds dy · x̂ into a per-program fp32 partial of dweight, summed
  over programs at the end.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from ._common import (
    FLOAT_DTYPES,
    Export,
    check_eps,
    check_same_device,
    check_tensor,
    next_pow2,
    note_launch,
    num_sms,
    on_device,
    round_to,
)

# Columns of a row in registers at once (per chunk).
MAX_BLOCK = 4096
# Elements per program of the residual add.
ADD_BLOCK = 1024
WARPS = 4


@triton.jit
def _add_kernel(X, R, OUT, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    x = tl.load(X + offs, mask=ok, other=0.0).to(tl.float32)
    r = tl.load(R + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(OUT + offs, round_to(x + r, OUT.dtype.element_ty), mask=ok)


@triton.jit
def _add_rms_norm_forward_kernel(X, R, W, OUT, SUM, RSTD, N, eps, BLOCK: tl.constexpr, STORE_RSTD: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * N
    squares = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        ok = cols < N
        x = tl.load(X + base + cols, mask=ok, other=0.0).to(tl.float32)
        r = tl.load(R + base + cols, mask=ok, other=0.0).to(tl.float32)
        # The sum as stored (rounded): the norm is of what the next residual add reads, as the unfused pair.
        s = round_to(x + r, SUM.dtype.element_ty)
        tl.store(SUM + base + cols, s, mask=ok)
        s = s.to(tl.float32)
        squares += s * s
    rstd = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / N + eps)
    if STORE_RSTD:
        tl.store(RSTD + row, rstd)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        ok = cols < N
        s = tl.load(SUM + base + cols, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(OUT + base + cols, round_to(s * rstd * w, OUT.dtype.element_ty), mask=ok)


@triton.jit
def _add_rms_norm_backward_kernel(
    SUM, W, RSTD, DY, DSUM_IN, DX, DW_PARTIAL, ROWS, N, rows_per_program, BLOCK: tl.constexpr, HAS_DSUM: tl.constexpr
):
    pid = tl.program_id(0)
    first = pid * rows_per_program
    for i in range(0, rows_per_program):
        row = (first + i).to(tl.int64)
        if row < ROWS:
            base = row * N
            rstd = tl.load(RSTD + row)
            dot = tl.zeros((BLOCK,), tl.float32)
            for start in range(0, N, BLOCK):
                cols = start + tl.arange(0, BLOCK)
                ok = cols < N
                xhat = tl.load(SUM + base + cols, mask=ok, other=0.0).to(tl.float32) * rstd
                wdy = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32) * tl.load(
                    DY + base + cols, mask=ok, other=0.0
                ).to(tl.float32)
                dot += wdy * xhat
            mean_dot = tl.sum(dot, axis=0) / N
            for start in range(0, N, BLOCK):
                cols = start + tl.arange(0, BLOCK)
                ok = cols < N
                xhat = tl.load(SUM + base + cols, mask=ok, other=0.0).to(tl.float32) * rstd
                dy = tl.load(DY + base + cols, mask=ok, other=0.0).to(tl.float32)
                w = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
                dsum = rstd * (w * dy - xhat * mean_dot)
                if HAS_DSUM:
                    dsum += tl.load(DSUM_IN + base + cols, mask=ok, other=0.0).to(tl.float32)
                tl.store(DX + base + cols, round_to(dsum, DX.dtype.element_ty), mask=ok)
                # This program's own row of partials: no other program writes it.
                partial = DW_PARTIAL + pid.to(tl.int64) * N + cols
                tl.store(partial, tl.load(partial, mask=ok, other=0.0) + dy * xhat, mask=ok)


def _check_pair(fn: str, x: object, residual: object) -> None:
    check_tensor(fn, "x", x, dtypes=FLOAT_DTYPES, min_ndim=1)
    check_tensor(fn, "residual", residual, dtypes=(x.dtype,))
    check_same_device(fn, x=x, residual=residual)
    if tuple(residual.shape) != tuple(x.shape):
        raise ValueError(f"{fn}: residual must have x's shape {tuple(x.shape)}, got {tuple(residual.shape)}")
    for name, t in (("x", x), ("residual", residual)):
        if not t.is_contiguous():
            raise ValueError(f"{fn}: {name} must be contiguous, got strides {tuple(t.stride())}")


def _add(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        note_launch("residual", triton.Config({"BLOCK": ADD_BLOCK}, num_warps=WARPS), "elementwise")
        _add_kernel[(triton.cdiv(n, ADD_BLOCK),)](x, residual, out, n, BLOCK=ADD_BLOCK, num_warps=WARPS)
    return out


class _ResidualAddFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return _add(x, residual)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor):
        return dy, dy


def residual_add(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """x + residual (one shape and dtype, contiguous), in one pass; differentiable (dy to both inputs)."""
    _check_pair("residual_add", x, residual)
    with on_device(x):
        if torch.is_grad_enabled() and (x.requires_grad or residual.requires_grad):
            return _ResidualAddFunction.apply(x, residual)
        return _add(x, residual)


def _block(n: int) -> int:
    return min(next_pow2(n), MAX_BLOCK)


def _add_rms_norm_forward(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, rstd: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.shape[-1]
    out, total = torch.empty_like(x), torch.empty_like(x)
    rows = x.numel() // n
    if rows:
        block = _block(n)
        note_launch("add-rms-norm", triton.Config({"BLOCK": block}, num_warps=WARPS), "a row per program, in chunks")
        _add_rms_norm_forward_kernel[(rows,)](
            x, residual, weight, out, total, x if rstd is None else rstd, n, eps,
            BLOCK=block, STORE_RSTD=rstd is not None, num_warps=WARPS,
        )  # fmt: skip
    return out, total


def _add_rms_norm_backward(
    total: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, dy: torch.Tensor, dtotal: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    n = total.shape[-1]
    rows = total.numel() // n
    dy = dy.contiguous()
    dtotal = None if dtotal is None else dtotal.contiguous()
    dx = torch.empty_like(total)
    programs = max(1, min(rows, 4 * num_sms(total.device)))
    per_program = triton.cdiv(rows, programs) if rows else 0
    partial = torch.zeros((programs, n), dtype=torch.float32, device=total.device)
    if rows:
        block = _block(n)
        kind = f"backward: {per_program} rows per program, dweight in per-program partials"
        note_launch("add-rms-norm", triton.Config({"BLOCK": block}, num_warps=WARPS), kind)
        _add_rms_norm_backward_kernel[(programs,)](
            total, weight, rstd, dy, dy if dtotal is None else dtotal, dx, partial, rows, n, per_program,
            BLOCK=block, HAS_DSUM=dtotal is not None, num_warps=WARPS,
        )  # fmt: skip
    return dx, partial.sum(0).to(weight.dtype)


class _AddRMSNormFunction(torch.autograd.Function):
    """Saves the stored sum, the weight and the rows' rstd; both inputs get the same gradient."""

    @staticmethod
    def forward(ctx, x, residual, weight, eps: float):
        rstd = torch.empty(x.numel() // x.shape[-1], dtype=torch.float32, device=x.device)
        out, total = _add_rms_norm_forward(x, residual, weight, eps, rstd)
        ctx.save_for_backward(total, weight, rstd)
        ctx.set_materialize_grads(False)
        return out, total

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor | None, dtotal: torch.Tensor | None):
        total, weight, rstd = ctx.saved_tensors
        if dy is None:  # only the sum was used downstream: its gradient passes straight to both inputs
            return dtotal, dtotal, torch.zeros_like(weight), None
        with on_device(total):
            dx, dw = _add_rms_norm_backward(total, weight, rstd, dy, dtotal)
        return dx, dx, dw if ctx.needs_input_grad[2] else None, None


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """(RMSNorm(x + residual) · weight, x + residual) over the last dim, fp32 statistics; x and residual of one
    shape and dtype, contiguous; weight (hidden,) of their dtype. Differentiable in all three."""
    fn = "add_rms_norm"
    _check_pair(fn, x, residual)
    check_tensor(fn, "weight", weight, dtypes=(x.dtype,), ndim=1)
    check_same_device(fn, x=x, weight=weight)
    if weight.shape[0] != x.shape[-1] or (x.shape[-1] > 1 and weight.stride(0) != 1):
        raise ValueError(f"{fn}: weight must be contiguous of shape ({x.shape[-1]},), got {tuple(weight.shape)}")
    eps = check_eps(fn, eps)
    with on_device(x):
        if torch.is_grad_enabled() and any(t.requires_grad for t in (x, residual, weight)):
            return _AddRMSNormFunction.apply(x, residual, weight, eps)
        return _add_rms_norm_forward(x, residual, weight, eps, None)


# What tierbench.kernels exports of this module.
EXPORTS = {
    "add_rms_norm": Export(FLOAT_DTYPES, "add-rms-norm"),
    "residual_add": Export(FLOAT_DTYPES, "residual"),
}
