"""The ops tierbench measures, listed explicitly (no import-time registry)."""

from __future__ import annotations

from typing import Any

from . import attention, matmul, norm
from .base import Case, Op, WorkModel

OPS: dict[str, Op] = {
    op.name: op for op in (matmul.OP, norm.LAYER_NORM, norm.RMS_NORM, norm.BIAS_GELU_LAYER_NORM, attention.OP)
}

FAMILIES: dict[str, tuple[str, ...]] = {
    "matmul": ("matmul",),
    "norm": ("layer_norm", "rms_norm", "bias_gelu_layer_norm"),
    "attention": ("attention",),
}


def cases_from_config(cfg: Any) -> list[Case]:
    """Every case the config asks for, in a stable order: family, then dtype, mode and shape."""
    out: list[Case] = []
    if cfg.matmul.enabled:
        out += matmul.cases(cfg.matmul)
    if cfg.norm.enabled:
        out += norm.cases(cfg.norm)
    if cfg.attention.enabled:
        out += attention.cases(cfg.attention)
    return out


__all__ = ["OPS", "FAMILIES", "Case", "Op", "WorkModel", "cases_from_config"]
