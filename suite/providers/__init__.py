"""Every provider of every tier, listed explicitly: vendor, compiler, triton, cuda."""

from __future__ import annotations

from . import compiler, cuda_tier, triton_tier, vendor
from .base import Provider, Unavailable

TIERS = ("vendor", "compiler", "triton", "cuda")

# The provider each op's speedups are quoted against, in order of preference (the first that ran wins).
BASELINES: dict[str, tuple[str, ...]] = {
    "matmul": ("eager",),
    "layer_norm": ("eager",),
    "rms_norm": ("eager",),
    "bias_gelu_layer_norm": ("eager",),
    "attention": ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math"),
}


def all_providers(compile_modes: list[str] | None = None, dynamic: bool = False) -> list[Provider]:
    return (
        vendor.providers()
        + compiler.providers(compile_modes or ["default"], dynamic)
        + triton_tier.providers()
        + cuda_tier.providers()
    )


__all__ = ["Provider", "Unavailable", "TIERS", "BASELINES", "all_providers"]
