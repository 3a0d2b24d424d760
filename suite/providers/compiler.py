"""The compiler tier: torch.compile (Inductor) of each op's eager formula, forward and (AOTAutograd) backward.

Attention is compiled from its plain math (scores, mask, softmax, product): what the compiler makes of
the textbook formula is the question this tier answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..ops.base import Case, Op
from .base import Inputs, Provider

# One compiled callable per (op, mode, dynamic): Dynamo recompiles it per new shape, or per shape family.
_COMPILED: dict[tuple[str, str, bool], Callable[..., torch.Tensor]] = {}


def _compiled(op: Op, mode: str, dynamic: bool) -> Callable[..., torch.Tensor]:
    key = (op.name, mode, dynamic)
    if key not in _COMPILED:
        # Every suite shape is its own graph; past Dynamo's default recompile limit it would silently
        # fall back to eager and time the wrong tier.
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 1024)
        if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
            torch._dynamo.config.accumulated_cache_size_limit = max(
                torch._dynamo.config.accumulated_cache_size_limit, 4096
            )
        # A bwd pass runs its backward again and again over one forward (retain_graph), which AOTAutograd's
        # donated buffers (saved tensors freed inside the backward) forbid.
        if hasattr(torch._functorch.config, "donated_buffer"):
            torch._functorch.config.donated_buffer = False
        _COMPILED[key] = torch.compile(op.formula, mode=mode, fullgraph=True, dynamic=None if dynamic else False)
    return _COMPILED[key]


def _prepare(op: Op, mode: str, dynamic: bool):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case):
        # With dynamic=True, the dims that vary along a suite (tokens, sequence) are symbolic and the feature
        # dims static: one graph per shape family, as a serving stack with varying batches would see it.
        if dynamic:
            for name, dims in op.dynamic_dims.items():
                torch._dynamo.mark_dynamic(inputs[name], dims)
        fn = _compiled(op, mode, dynamic)
        args = op.args(inputs)
        return lambda: fn(*args, **options)

    return prepare


def _function(op: Op, mode: str, dynamic: bool) -> Callable[[Case], Callable[..., torch.Tensor]]:
    """The compiled formula itself, for a composed chain: the same compiled callable the provider times."""
    return lambda case: _compiled(op, mode, dynamic)


def providers(ops: list[Op], modes: list[str], dynamic: bool = False) -> list[Provider]:
    out = []
    for mode in modes:
        name = "compile" if mode == "default" else f"compile-{mode}"
        out += [
            Provider(
                name,
                "compiler",
                op.name,
                _prepare(op, mode, dynamic),
                function=_function(op, mode, dynamic),
            )
            for op in ops
            if op.formula
        ]
    return out
