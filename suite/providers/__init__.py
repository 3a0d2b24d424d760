"""The providers of the built-in tiers: each tier module adapts an op's signature into calls.

vendor: the op's eager formula (and SDPA's pinned backends for attention and decode); compiler: the formula
compiled; triton: tierbench.kernels' function of the op's name; cuda: the authors' packages (flash-attn,
quack). Decode's special providers (SDPA over a KV cache, flash-attn's KV-cache entry points) sit in
vendor_decode.py and cuda_decode.py.
"""

from __future__ import annotations

from ..ops.base import Op
from . import compiler, cuda_decode, cuda_tier, triton_tier, vendor, vendor_decode
from .base import Prepared, Provider, Unavailable, call_provider


def builtin_providers(ops: list[Op], compile_modes: list[str] | None = None, dynamic: bool = False) -> list[Provider]:
    return (
        vendor.providers(ops)
        + vendor_decode.providers(ops)
        + compiler.providers(ops, compile_modes or ["default"], dynamic)
        + triton_tier.providers(ops)
        + cuda_tier.providers(ops)
        + cuda_decode.providers(ops)
    )


__all__ = ["Prepared", "Provider", "Unavailable", "builtin_providers", "call_provider"]
