"""SwiGLU, the gated activation of Llama's MLP: y = silu(gate) * up, forward and backward.

The input is the gate/up projection's output as one (rows, 2·I) tensor, the gate in its first I columns and
the up projection in its last I (the layout a fused gate/up projection writes); the output is (rows, I). Each
program reads a tile of both halves of one row once, computes in fp32 registers and writes one rounding of
the result; the backward reads dy and both halves and writes dx = [dgate, dup] in one pass:
    dgate = dy · up · s · (1 + gate · (1 − s)),  dup = dy · silu(gate),  s = sigmoid(gate).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from ._common import FLOAT_DTYPES, Export, check_tensor, next_pow2, note_launch, on_device, round_to

# Columns per program: a tile of each half (1024 fp32 values each in registers at 4 warps).
MAX_BLOCK = 1024
WARPS = 4


@triton.jit
def _swiglu_forward_kernel(X, Y, HALF, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < HALF
    gate = tl.load(X + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    up = tl.load(X + row * stride_x + HALF + cols, mask=ok, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(Y + row * stride_y + cols, round_to(y, Y.dtype.element_ty), mask=ok)


@triton.jit
def _swiglu_backward_kernel(X, DY, DX, HALF, stride_x, stride_dy, stride_dx, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < HALF
    gate = tl.load(X + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    up = tl.load(X + row * stride_x + HALF + cols, mask=ok, other=0.0).to(tl.float32)
    dy = tl.load(DY + row * stride_dy + cols, mask=ok, other=0.0).to(tl.float32)
    s = 1.0 / (1.0 + tl.exp(-gate))
    dgate = dy * up * s * (1.0 + gate * (1.0 - s))
    dup = dy * gate * s
    out_ty = DX.dtype.element_ty
    tl.store(DX + row * stride_dx + cols, round_to(dgate, out_ty), mask=ok)
    tl.store(DX + row * stride_dx + HALF + cols, round_to(dup, out_ty), mask=ok)


def _check(fn: str, x: object) -> int:
    """x: a 2-D float tensor of an even number of columns, unit column stride; returns I (half its width)."""
    check_tensor(fn, "x", x, dtypes=FLOAT_DTYPES, ndim=2, ndim_hint="(rows, 2 * intermediate)")
    width = x.shape[1]
    if width == 0 or width % 2:
        raise ValueError(f"{fn}: x must have an even, non-zero number of columns (gate | up), got {tuple(x.shape)}")
    if x.stride(1) != 1:
        raise ValueError(f"{fn}: x must be contiguous in its last dim, got strides {tuple(x.stride())}")
    return width // 2


def _grid(rows: int, half: int, kind: str) -> tuple[tuple[int, int], int]:
    block = min(next_pow2(half), MAX_BLOCK)
    note_launch("swiglu", triton.Config({"BLOCK": block}, num_warps=WARPS), kind)
    return (rows, triton.cdiv(half, block)), block


def _forward(x: torch.Tensor, half: int) -> torch.Tensor:
    y = torch.empty((x.shape[0], half), dtype=x.dtype, device=x.device)
    if x.shape[0]:
        grid, block = _grid(x.shape[0], half, "forward: a row tile per program")
        _swiglu_forward_kernel[grid](x, y, half, x.stride(0), y.stride(0), BLOCK=block, num_warps=WARPS)
    return y


def _backward(x: torch.Tensor, dy: torch.Tensor, half: int) -> torch.Tensor:
    dy = dy if dy.stride(1) == 1 else dy.contiguous()
    dx = torch.empty((x.shape[0], 2 * half), dtype=x.dtype, device=x.device)
    if x.shape[0]:
        grid, block = _grid(x.shape[0], half, "backward: a row tile per program")
        args = (x, dy, dx, half, x.stride(0), dy.stride(0), dx.stride(0))
        _swiglu_backward_kernel[grid](*args, BLOCK=block, num_warps=WARPS)
    return dx


class _SwiGLUFunction(torch.autograd.Function):
    """Saves x (the gate/up output), which the backward reads whole; never the result."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[1] // 2
        ctx.save_for_backward(x)
        ctx.half = half
        return _forward(x, half)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor):
        (x,) = ctx.saved_tensors
        with on_device(x):
            return _backward(x, dy, ctx.half)


def swiglu(x: torch.Tensor) -> torch.Tensor:
    """silu(x[:, :I]) * x[:, I:] for x of shape (rows, 2·I): fp16, bf16 or fp32, fp32 arithmetic.
    Differentiable: where x requires grad (and grad mode is on) the forward saves x for the backward kernel."""
    half = _check("swiglu", x)
    with on_device(x):
        if torch.is_grad_enabled() and x.requires_grad:
            return _SwiGLUFunction.apply(x)
        return _forward(x, half)


# What tierbench.kernels exports of this module.
EXPORTS = {
    "swiglu": Export(FLOAT_DTYPES, "swiglu"),
}
