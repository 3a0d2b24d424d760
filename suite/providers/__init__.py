"""The providers of the built-in tiers: each tier module adapts an op's signature into calls.

vendor: the op's eager formula (and SDPA's pinned backends for attention and decode); compiler: the formula
compiled by torch.compile (compiler.py), XLA (xla.py, the formula in jax.numpy) and TVM (tvm_compiler.py);
triton: tierbench.kernels' function of the op's name; cuda: the authors' packages (cuda_tier.py, a module per package);
portable: tierbench's Mojo kernels through MAX and the formula through IREE (portable.py). Decode's special
providers (SDPA over a KV cache, flash-attn's KV-cache entry points) sit in vendor_decode.py and
cuda_decode.py.
"""

from __future__ import annotations

from ..ops.base import Op
from . import compiler, cuda_decode, cuda_tier, portable, triton_tier, tvm_compiler, vendor, vendor_decode, xla
from .base import Prepared, Provider, Unavailable, call_provider


def builtin_providers(ops: list[Op], compile_modes: list[str] | None = None, dynamic: bool = False) -> list[Provider]:
    return (
        vendor.providers(ops)
        + vendor_decode.providers(ops)
        + compiler.providers(ops, compile_modes or ["default"], dynamic)
        + xla.providers(ops)
        + tvm_compiler.providers(ops)
        + triton_tier.providers(ops)
        + cuda_tier.providers(ops)
        + cuda_decode.providers(ops)
        + portable.providers(ops)
    )


__all__ = ["Prepared", "Provider", "Unavailable", "builtin_providers", "call_provider"]
