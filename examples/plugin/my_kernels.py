"""A user's own Triton kernels, in a file of their own: an RMSNorm and a fused SwiGLU (silu(gate) * up).

Nothing here knows tierbench; bench_plugin.py wraps these as providers.
"""

from __future__ import annotations

import torch
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
    """One program per row, the whole row in registers."""
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    _rms_norm_kernel[(rows,)](x, weight, y, cols, x.stride(0), eps, BLOCK=triton.next_power_of_2(cols))
    return y


@triton.jit
def _swiglu_kernel(G, U, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    g = tl.load(G + offs, mask=ok, other=0.0).to(tl.float32)
    u = tl.load(U + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(Y + offs, (g / (1.0 + tl.exp(-g)) * u).to(Y.dtype.element_ty), mask=ok)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up, elementwise, in one pass over both inputs."""
    gate, up = gate.contiguous(), up.contiguous()
    y = torch.empty_like(gate)
    n = gate.numel()
    block = 1024
    _swiglu_kernel[(triton.cdiv(n, block),)](gate, up, y, n, BLOCK=block)
    return y
