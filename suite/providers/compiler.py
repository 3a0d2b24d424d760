"""The compiler tier: torch.compile (Inductor) of the same eager formulations the vendor tier runs.

Attention is compiled from its plain math (scores, mask, softmax, product): what the compiler makes of
the textbook formula is the question this tier answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..ops.base import Case
from .base import Inputs, Prepared, Provider
from .vendor import EAGER


def attention_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    scores = (q @ k.transpose(-1, -2)) * scale
    if causal:
        seq_q, seq_k = q.shape[-2], k.shape[-2]
        mask = torch.ones(seq_q, seq_k, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


FORMULATIONS: dict[str, Callable[[Inputs, dict[str, Any]], torch.Tensor]] = {
    **EAGER,
    "attention": lambda i, o: attention_math(i["q"], i["k"], i["v"], o["causal"], o["scale"]),
}

# With dynamic=True, the dims that vary along a suite are symbolic (tokens, sequence), the feature dims stay
# static: one graph per shape family, as a serving stack with varying batches would see it.
DYNAMIC_DIMS: dict[str, dict[str, tuple[int, ...]]] = {
    "matmul": {"a": (0,)},
    "layer_norm": {"x": (0,)},
    "rms_norm": {"x": (0,)},
    "bias_gelu_layer_norm": {"x": (0,)},
    "attention": {"q": (0, 2), "k": (0, 2), "v": (0, 2)},
}

# One compiled callable per (op, mode): Dynamo recompiles it per new shape, or per shape family.
_COMPILED: dict[tuple[str, str, bool], Callable[..., torch.Tensor]] = {}


def _compiled(op: str, mode: str, dynamic: bool) -> Callable[..., torch.Tensor]:
    key = (op, mode, dynamic)
    if key not in _COMPILED:
        # Every suite shape is its own graph; past Dynamo's default recompile limit it would silently
        # fall back to eager and time the wrong tier.
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 1024)
        if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
            torch._dynamo.config.accumulated_cache_size_limit = max(
                torch._dynamo.config.accumulated_cache_size_limit, 4096
            )
        _COMPILED[key] = torch.compile(FORMULATIONS[op], mode=mode, fullgraph=True, dynamic=None if dynamic else False)
    return _COMPILED[key]


def _prepare(op: str, mode: str, dynamic: bool):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Prepared:
        if dynamic:
            for name, dims in DYNAMIC_DIMS[op].items():
                torch._dynamo.mark_dynamic(inputs[name], dims)
        fn = _compiled(op, mode, dynamic)
        return lambda: fn(inputs, options)

    return prepare


def providers(modes: list[str], dynamic: bool = False) -> list[Provider]:
    out = []
    for mode in modes:
        name = "compile" if mode == "default" else f"compile-{mode}"
        out += [Provider(name, "compiler", op, _prepare(op, mode, dynamic)) for op in FORMULATIONS]
    return out
