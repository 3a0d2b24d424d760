"""The kernel tests' reference precision, in one place: float64 on the CPU, float32 on a GPU (as the suite's
own references), and a GPU's float32 products without TF32 (its 10-bit mantissa would be the reference's
error, not the kernel's)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


def reference_dtype(device: torch.device) -> torch.dtype:
    return torch.float64 if device.type == "cpu" else torch.float32


def high(t: torch.Tensor) -> torch.Tensor:
    """t in the reference precision of its device."""
    return t.to(reference_dtype(t.device))


@contextmanager
def no_tf32() -> Iterator[None]:
    """float32 products in float32 within the block; the setting as it was after it."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def exact_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in reference precision, TF32 off on a GPU."""
    with no_tf32():
        return high(a) @ high(b)
