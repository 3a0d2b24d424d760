"""A user's own kernels, in a file of their own: Triton kernels for an RMSNorm, a LayerNorm and a fused SwiGLU
(silu(gate) * up) with its backward, and the same SwiGLU in plain PyTorch, a block of rows at a time.

Nothing here knows tierbench; bench_plugin.py wraps these as providers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(X, W, Y, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=ok, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=ok)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """One program per row, the whole row in registers (forward only)."""
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    _rms_norm_kernel[(rows,)](x, weight, y, cols, x.stride(0), eps, BLOCK=triton.next_power_of_2(cols))
    return y


@triton.jit
def _layer_norm_kernel(X, W, B, Y, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=ok, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centred = tl.where(ok, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=0) / n_cols + eps)
    w = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(Y + row * stride + cols, (centred * rstd * w + b).to(Y.dtype.element_ty), mask=ok)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """One program per row: mean and variance in float32, then scale and shift (forward only)."""
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    _layer_norm_kernel[(rows,)](x, weight, bias, y, cols, x.stride(0), eps, BLOCK=triton.next_power_of_2(cols))
    return y


@triton.jit
def _swiglu_fwd_kernel(G, U, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    g = tl.load(G + offs, mask=ok, other=0.0).to(tl.float32)
    u = tl.load(U + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(Y + offs, (g / (1.0 + tl.exp(-g)) * u).to(Y.dtype.element_ty), mask=ok)


@triton.jit
def _swiglu_bwd_kernel(G, U, DY, DG, DU, n, BLOCK: tl.constexpr):
    # d/dg silu(g) = s + g s (1 - s), with s = sigmoid(g); d/du = silu(g). Recomputed, nothing saved.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    g = tl.load(G + offs, mask=ok, other=0.0).to(tl.float32)
    u = tl.load(U + offs, mask=ok, other=0.0).to(tl.float32)
    dy = tl.load(DY + offs, mask=ok, other=0.0).to(tl.float32)
    s = 1.0 / (1.0 + tl.exp(-g))
    tl.store(DG + offs, (dy * u * (s + g * s * (1.0 - s))).to(DG.dtype.element_ty), mask=ok)
    tl.store(DU + offs, (dy * g * s).to(DU.dtype.element_ty), mask=ok)


_BLOCK = 1024


class _SwiGLU(torch.autograd.Function):
    """The forward and backward kernels as one differentiable call: the backward reads gate, up and the
    upstream gradient and writes both input gradients in one pass."""

    @staticmethod
    def forward(ctx, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        gate, up = gate.contiguous(), up.contiguous()
        y = torch.empty_like(gate)
        n = gate.numel()
        _swiglu_fwd_kernel[(triton.cdiv(n, _BLOCK),)](gate, up, y, n, BLOCK=_BLOCK)
        ctx.save_for_backward(gate, up)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gate, up = ctx.saved_tensors
        dy = dy.contiguous()
        dgate, dup = torch.empty_like(gate), torch.empty_like(up)
        n = gate.numel()
        _swiglu_bwd_kernel[(triton.cdiv(n, _BLOCK),)](gate, up, dy, dgate, dup, n, BLOCK=_BLOCK)
        return dgate, dup


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up, elementwise, in one pass over both inputs; differentiable by its own backward kernel."""
    return _SwiGLU.apply(gate, up)


def swiglu_blocked(gate: torch.Tensor, up: torch.Tensor, rows: int = 128) -> torch.Tensor:
    """silu(gate) * up, a block of rows at a time, so each block's temporaries stay small (and in cache on a
    CPU); plain PyTorch, differentiable by autograd, timed on every device."""
    blocks = [F.silu(g) * u for g, u in zip(gate.split(rows), up.split(rows))]
    return torch.cat(blocks)
