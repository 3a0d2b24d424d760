"""The cuda tier: hand-written CUDA/CuTe kernels from the flash-attn packages (2, 3 and 4).

The packages take (batch, seq, heads, head_dim); inputs are converted while preparing, outside the timed
region; the checked output is viewed back as (batch, heads, seq, head_dim), the timed call is the package's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..ops.base import Case
from .base import Inputs, Prepared, Provider, missing_module, needs_compute_capability


@dataclass(frozen=True)
class FlashAttnPackage:
    provider: str
    module: str
    function: str
    distribution: str  # the pip name, for the version and for the install hint
    install_hint: str
    min_cc: tuple[int, int]
    below_cc: tuple[int, int] | None
    head_dims: tuple[int, ...]


FLASH_ATTN = (
    FlashAttnPackage("flash-attn-2", "flash_attn", "flash_attn_func", "flash-attn",
                     "flash-attn --no-build-isolation (builds CUDA sources: needs nvcc)", (8, 0), None,
                     tuple(range(8, 257, 8))),
    FlashAttnPackage("flash-attn-3", "flash_attn_interface", "flash_attn_func", "flash-attn-3",
                     "flash-attn-3 (built from the flash-attn repository's hopper/ folder)", (9, 0), (10, 0),
                     (64, 96, 128, 192, 256)),
    FlashAttnPackage("flash-attn-4", "flash_attn.cute", "flash_attn_func", "flash-attn-4",
                     "flash-attn-4", (9, 0), (11, 0), (64, 96, 128)),
)


def _function(pkg: FlashAttnPackage) -> Callable[..., Any] | None:
    try:
        return getattr(importlib.import_module(pkg.module), pkg.function, None)
    except ImportError:
        return None


def _why_unavailable(pkg: FlashAttnPackage):
    def why(case: Case, device: torch.device) -> str | None:
        reason = missing_module(pkg.module, pkg.install_hint)
        if reason:
            return reason
        if _function(pkg) is None:
            return f"{pkg.module} has no {pkg.function} (another package owns that module name); " \
                   f"pip install {pkg.install_hint}"
        reason = needs_compute_capability(device, *pkg.min_cc, below=pkg.below_cc)
        if reason:
            return reason
        if case.params["dtype"] not in ("fp16", "bf16"):
            return f"dtype {case.params['dtype']} unsupported: {pkg.provider} takes fp16 and bf16"
        if case.params["head_dim"] not in pkg.head_dims:
            return f"head_dim {case.params['head_dim']} unsupported: {pkg.provider} takes {pkg.head_dims}"
        return None

    return why


def _prepare(pkg: FlashAttnPackage):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Prepared:
        fn = _function(pkg)
        q, k, v = (inputs[n].transpose(1, 2).contiguous() for n in ("q", "k", "v"))
        causal, scale = options["causal"], options["scale"]

        def call() -> torch.Tensor:
            out = fn(q, k, v, softmax_scale=scale, causal=causal)
            # Some versions return (out, logsumexp).
            return out[0] if isinstance(out, tuple) else out

        return call

    return prepare


def providers() -> list[Provider]:
    return [Provider(pkg.provider, "cuda", "attention", _prepare(pkg), _why_unavailable(pkg),
                     package=pkg.distribution, to_op_layout=_heads_first) for pkg in FLASH_ATTN]


def _heads_first(out: torch.Tensor) -> torch.Tensor:
    return out.transpose(1, 2)
