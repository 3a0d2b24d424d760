"""The exact product the matmul family's references are built on (matmul, the GEMM epilogue, FP8)."""

from __future__ import annotations

import torch


def matmul_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in float64 on the CPU, float32 with TF32 off on the GPU (fast at 8192^3, exact enough)."""
    if a.device.type == "cpu":
        return a.double() @ b.double()
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return a.float() @ b.float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
