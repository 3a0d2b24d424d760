"""The vendor tier: PyTorch eager, i.e. cuBLAS, PyTorch's own norm kernels, and SDPA's pinned backends."""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..ops.attention import RECOMPUTING_BACKWARD_PRODUCTS, TEXTBOOK_BACKWARD_PRODUCTS, executed_flops
from ..ops.base import Case, Op
from .base import Inputs, Provider, Unavailable, call_provider, needs_cuda

SDPA_BACKENDS = {
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-math": SDPBackend.MATH,
}


def _prepare_sdpa(backend: SDPBackend):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case):
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        causal, scale = options["causal"], options["scale"]

        def call() -> torch.Tensor:
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        # A backend that cannot take these inputs raises "No available kernel" and warns why: keep the why.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                call()
            except RuntimeError as exc:
                if "No available kernel" not in str(exc):
                    raise
                why = "; ".join(str(w.message).strip() for w in caught) or str(exc)
                raise Unavailable(f"SDPA {backend.name} backend cannot run this case: {why}") from None
        return call

    return prepare


# What each backend executes, per pass (suite/ops/attention.py counts the products):
# - math: the textbook formula through autograd: the whole score matrix, masked afterwards when causal, and
#   the four products of its backward (P is saved by the forward, so nothing is recomputed);
# - flash (FlashAttention-2 on CUDA, aten's tiled kernel on the CPU), memory-efficient (the CUTLASS kernel
#   of xformers) and cuDNN: the forward saves only the row log-sum-exp, the backward recomputes q k^T tile
#   by tile (five products), and causal tiles above the diagonal are skipped in both passes.
SDPA_EXECUTES = {
    "sdpa-flash": (RECOMPUTING_BACKWARD_PRODUCTS, True),
    "sdpa-cudnn": (RECOMPUTING_BACKWARD_PRODUCTS, True),
    "sdpa-efficient": (RECOMPUTING_BACKWARD_PRODUCTS, True),
    "sdpa-math": (TEXTBOOK_BACKWARD_PRODUCTS, False),
}


def _sdpa_executed_flops(name: str):
    backward_products, skips_masked = SDPA_EXECUTES[name]
    return lambda case: executed_flops(case, backward_products, skips_masked)


def _sdpa_device_rule(name: str):
    def why_unavailable(case: Case, device: torch.device) -> str | None:
        # The math and flash backends have CPU kernels too; cuDNN and memory-efficient are CUDA-only here.
        if name in ("sdpa-cudnn", "sdpa-efficient"):
            return needs_cuda(device)
        return None

    return why_unavailable


def providers(ops: list[Op]) -> list[Provider]:
    out = [call_provider("eager", "vendor", op, op.formula) for op in ops if op.formula is not None and op.eager]
    if any(op.name == "attention" for op in ops):
        out += [
            Provider(
                name,
                "vendor",
                "attention",
                _prepare_sdpa(backend),
                _sdpa_device_rule(name),
                executed_flops=_sdpa_executed_flops(name),
            )
            for name, backend in SDPA_BACKENDS.items()
        ]
    return out
