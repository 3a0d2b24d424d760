"""The providers of the built-in tiers: each tier module adapts an op's signature into calls.

vendor: the op's eager formula (and SDPA's pinned backends for attention and decode); compiler: the formula
compiled by torch.compile (compiler.py), XLA (xla.py, the formula in jax.numpy) and TVM (tvm_compiler.py);
triton: tierbench.kernels' function of the op's name; cuda: the authors' packages (cuda_tier.py, a module per package);
portable: tierbench's Mojo kernels through MAX and the formula through IREE (portable.py). A family's own
providers (decode's SDPA over a KV cache and flash-attn's KV-cache entry points) are declared by the family's
module beside its ops (`Family.providers`, suite/ops/decode.py); they join the list in their tier's place.
"""

from __future__ import annotations

from ..ops.base import Op
from ..tiers import rank
from . import compiler, cuda_tier, portable, triton_tier, tvm_compiler, vendor, xla
from .base import Prepared, Provider, Unavailable, call_provider


def builtin_providers(ops: list[Op], compile_modes: list[str] | None = None, dynamic: bool = False) -> list[Provider]:
    """Every tier's providers of these ops, then the built-in families' own, in ladder order (a tier's
    providers together, as each tier's module lists them)."""
    adapters = (
        vendor.providers(ops)
        + compiler.providers(ops, compile_modes or ["default"], dynamic)
        + xla.providers(ops)
        + tvm_compiler.providers(ops)
        + triton_tier.providers(ops)
        + cuda_tier.providers(ops)
        + portable.providers(ops)
    )
    return sorted(adapters + families_providers(ops), key=lambda p: rank(p.tier)[0])


def families_providers(ops: list[Op]) -> list[Provider]:
    """The providers the built-in families of these ops declare (Family.providers), given the ops they have."""
    from ..ops import builtin_families

    out: list[Provider] = []
    for family in builtin_families():
        mine = [op for op in ops if op.family == family.name]
        if family.providers is not None and mine:
            out += family.providers(mine)
    return out


__all__ = ["Prepared", "Provider", "Unavailable", "builtin_providers", "call_provider"]
