"""GEMM with a fused epilogue: gelu(a @ b + bias), and its backward.

The forward is the matmul kernels of `matmul.py` with their epilogue on: the bias (shape (N,)) is added to
the fp32 accumulator tile and GELU applied in registers before the one store, so the output is written once
and the epilogue's cost over a plain matmul is what it adds to the same kernel (family "matmul-epilogue"; its kind says
"keep-z" when the pre-activation is stored too).

Backward. GELU's derivative needs the pre-activation z = a @ b + bias. When a gradient is needed the forward
stores z as well, from the same registers (one more (M, N) write in the output dtype, the tensor autograd
would keep for an unfused linear + GELU), rather than the backward recomputing a @ b (a second GEMM).
Without grad nothing but the output is written and nothing is saved. The backward then runs
- `_gelu_backward_kernel`: dz = dy * gelu'(z) in fp32, stored in the input dtype, and, when the bias needs
  a gradient, its column sums over a slice of rows per program (fp32 partial sums, added up by a torch sum
  of a few rows: deterministic, no atomics). Family "matmul-epilogue-bwd".
- dA = dz B^T and dB = A^T dz by the matmul kernels reading transposed views (family "matmul-bwd").
Saved for backward: z always, a only if b needs a gradient, b only if a does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from . import _activations as activations
from ._activations import activation_grad
from ._common import FLOAT_DTYPES, INTERPRET, Export, check_same_device, check_tensor, note_launch, num_sms, on_device
from .matmul import _check_matmul, launch_matmul, matmul_input_grads

# ----------------------------------------------------------------------------------------------------------
# Backward kernel
# ----------------------------------------------------------------------------------------------------------

# One fixed config (an elementwise pass over dy and z; not yet measured on a GPU; 32x128 tiles spilled in an
# sm_90 compile): small tiles under the interpreter so that the test shapes cover several column blocks, row
# slices and ragged edges.
_BWD_CONFIG = (
    triton.Config({"BLOCK_M": 8, "BLOCK_N": 16}, num_warps=1)
    if INTERPRET
    else triton.Config({"BLOCK_M": 16, "BLOCK_N": 128}, num_warps=4)
)

# Row slices per column block: enough programs to fill the GPU, few partial sums to add.
_PROGRAMS_PER_SM = 4


@triton.jit
def _gelu_backward_kernel(
    dy_ptr,
    z_ptr,
    dz_ptr,
    dbias_ptr,
    M,
    N,
    rows_per_program,
    stride_dym,
    stride_dyn,
    stride_zm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ACTIVATION: tl.constexpr,
    HAS_DBIAS: tl.constexpr,
):
    # Program (column block, row slice): dz over its rows, and the slice's column sums into row pid_s of the
    # (slices, N) fp32 partial-sum buffer.
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = offs_n < N
    row_start = pid_s * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, M)
    col_sum = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for r in range(row_start, row_end, BLOCK_M):
        offs_m = r + tl.arange(0, BLOCK_M)
        mask = (offs_m < row_end)[:, None] & col_ok[None, :]
        rows = offs_m.to(tl.int64)[:, None]
        dy = tl.load(dy_ptr + rows * stride_dym + offs_n[None, :] * stride_dyn, mask=mask, other=0.0)
        z = tl.load(z_ptr + rows * stride_zm + offs_n[None, :], mask=mask, other=0.0)
        dz = dy.to(tl.float32) * activation_grad(z.to(tl.float32), ACTIVATION)
        tl.store(dz_ptr + rows * stride_zm + offs_n[None, :], dz.to(dz_ptr.dtype.element_ty), mask=mask)
        if HAS_DBIAS:
            col_sum += tl.sum(tl.where(mask, dz, 0.0), axis=0)
    if HAS_DBIAS:
        tl.store(dbias_ptr + pid_s * N + offs_n, col_sum, mask=col_ok)


def _gelu_backward(
    dy: torch.Tensor, z: torch.Tensor, activation: int, need_dbias: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """dz = dy * gelu'(z) (z contiguous), and dbias = dz summed over rows if asked for (fp32, then z's dtype)."""
    M, N = z.shape
    dz = torch.empty_like(z)
    if M == 0 or N == 0:
        return dz, torch.zeros(N, dtype=z.dtype, device=z.device) if need_dbias else None
    cfg = _BWD_CONFIG
    block_m, block_n = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
    col_blocks = triton.cdiv(N, block_n)
    row_blocks = triton.cdiv(M, block_m)
    slices = max(1, min(row_blocks, triton.cdiv(_PROGRAMS_PER_SM * num_sms(z.device), col_blocks)))
    rows_per_program = triton.cdiv(row_blocks, slices) * block_m
    slices = triton.cdiv(M, rows_per_program)
    partial = torch.empty((slices, N), dtype=torch.float32, device=z.device) if need_dbias else None
    _gelu_backward_kernel[(col_blocks, slices)](
        dy,
        z,
        dz,
        partial,
        M,
        N,
        rows_per_program,
        dy.stride(0),
        dy.stride(1),
        z.stride(0),
        ACTIVATION=activation,
        HAS_DBIAS=need_dbias,
        num_warps=cfg.num_warps,
        **cfg.kwargs,
    )
    note_launch("matmul-epilogue-bwd", cfg, "gelu-backward")
    return dz, partial.sum(0).to(z.dtype) if need_dbias else None


# ----------------------------------------------------------------------------------------------------------
# Autograd and the public op
# ----------------------------------------------------------------------------------------------------------


def _forward(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None,
    activation: int,
    keep_pre: bool,
    *,
    path: str | None = None,
    config: triton.Config | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(gelu(a @ b + bias), a @ b + bias if keep_pre else None), one kernel, without validation."""
    shape = (a.shape[0], b.shape[1])
    y = torch.empty(shape, dtype=a.dtype, device=a.device)
    z = torch.empty(shape, dtype=a.dtype, device=a.device) if keep_pre else None
    kind = "keep-z" if keep_pre else ""
    launch_matmul(
        a, b, y, z=z, bias=bias, activation=activation, path=path, config=config, family="matmul-epilogue", kind=kind
    )
    return y, z


class _MatmulBiasGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, activation: int) -> torch.Tensor:
        need_a, need_b = ctx.needs_input_grad[:2]
        y, z = _forward(a, b, bias, activation, keep_pre=True)
        ctx.activation = activation
        ctx.save_for_backward(z, a if need_b else None, b if need_a else None)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor):
        z, a, b = ctx.saved_tensors
        need_a, need_b, need_bias = ctx.needs_input_grad[:3]
        with on_device(dy):
            dz, dbias = _gelu_backward(dy, z, ctx.activation, need_bias)
            da, db = matmul_input_grads(dz, a, b, need_a, need_b)
        return da, db, dbias, None


def matmul_bias_gelu(
    a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, approximate: str = "none"
) -> torch.Tensor:
    """gelu(a @ b + bias) in one kernel: a (M, K), b (K, N), bias (N,) or None, of one dtype (fp16, bf16,
    fp32); fp32 accumulation, bias and GELU on the fp32 tile, the result rounded once.

    `approximate` is "none" (exact, erf) or "tanh", as in `torch.nn.functional.gelu`. Operands take the
    layouts `matmul` takes. Differentiable in a, b and bias (see the module docstring for what is saved).
    """
    _check_matmul(a, b, "matmul_bias_gelu")
    if bias is not None:
        check_tensor("matmul_bias_gelu", "bias", bias, dtypes=(a.dtype,))
        if tuple(bias.shape) != (b.shape[1],):
            raise ValueError(
                f"matmul_bias_gelu: bias must have shape (N,) = ({b.shape[1]},), got shape {tuple(bias.shape)}"
            )
        if bias.stride(0) != 1 and bias.shape[0] > 1:
            raise ValueError(f"matmul_bias_gelu: bias must be contiguous, got stride {bias.stride(0)}")
        check_same_device("matmul_bias_gelu", a=a, bias=bias)
    if approximate not in activations.GELU_CODES:
        raise ValueError(f"matmul_bias_gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    activation = activations.GELU_CODES[approximate]
    with on_device(a):
        inputs = (a, b) if bias is None else (a, b, bias)
        if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
            return _MatmulBiasGelu.apply(a, b, bias, activation)
        return _forward(a, b, bias, activation, keep_pre=False)[0]


# What tierbench.kernels exports of this module.
EXPORTS = {
    "matmul_bias_gelu": Export(FLOAT_DTYPES, "matmul-epilogue"),
}
