"""The providers of the built-in tiers: each tier module adapts an op's signature into calls.

vendor: the op's eager formula (and SDPA's pinned backends for attention); compiler: the formula compiled;
triton: tierbench.kernels' function of the op's name; cuda: the authors' packages (flash-attn, quack).
"""

from __future__ import annotations

from ..ops.base import Op
from . import compiler, cuda_tier, triton_tier, vendor
from .base import Prepared, Provider, Unavailable, call_provider


def builtin_providers(ops: list[Op], compile_modes: list[str] | None = None, dynamic: bool = False) -> list[Provider]:
    return (
        vendor.providers(ops)
        + compiler.providers(ops, compile_modes or ["default"], dynamic)
        + triton_tier.providers(ops)
        + cuda_tier.providers(ops)
    )


__all__ = ["Prepared", "Provider", "Unavailable", "builtin_providers", "call_provider"]
