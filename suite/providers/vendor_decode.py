"""The vendor tier's decode: SDPA with each backend pinned, grouped K/V heads through `enable_gqa`.

SDPA reads a contiguous cache as it is (its heads-first shape is what SDPA takes; the sequence-first memory
behind it is what its flash backend prefers). Each sequence's length and the bottom-right causal mask (SDPA's
`is_causal` is top-left aligned) become one boolean mask, built while preparing; where no row misses a key
(every sequence full, one query token or not causal) no mask is passed, which is what lets the flash backend,
which takes none, run. SDPA has no block table, so a paged cache is not an input it can take: those cases
are skipped with that reason rather than timed with a gather no serving stack would make.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..ops.base import Case, Op
from ..ops.decode import length_mask
from .base import Inputs, Provider, needs_cuda
from .vendor import SDPA_BACKENDS, first_call


def needs_mask(case: Case) -> bool:
    """Whether some query row of the case misses a key of the cache."""
    p = case.params
    return p["lengths"] != "full" or (bool(p["causal"]) and p["q_len"] > 1)


def _prepare(backend: SDPBackend):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case):
        q, k, v, lens = inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["cache_seqlens"]
        mask = length_mask(lens, q.shape[2], k.shape[2], bool(options["causal"])) if needs_mask(case) else None
        scale = options["scale"]

        def call() -> torch.Tensor:
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)

        first_call(backend, call)
        return call

    return prepare


def _function(backend: SDPBackend):
    """The same call as a function of decode's signature (for a composed chain): the mask, where the case
    needs one, made from the lengths at each call."""

    def function(case: Case):
        masked = needs_mask(case)

        def decode(q, k_cache, v_cache, cache_seqlens, causal: bool, scale: float) -> torch.Tensor:
            mask = length_mask(cache_seqlens, q.shape[2], k_cache.shape[2], bool(causal)) if masked else None
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask, scale=scale, enable_gqa=True)

        return decode

    return function


def _why(name: str, op: str):
    def why_unavailable(case: Case, device: torch.device) -> str | None:
        if op == "decode_paged":
            return (
                "SDPA takes no block table: a paged KV cache is not an input it has (gathering the blocks "
                "first would time a copy no serving stack makes)"
            )
        if name in ("sdpa-cudnn", "sdpa-efficient"):  # CUDA-only backends; math and flash run on a CPU too
            return needs_cuda(device)
        return None

    return why_unavailable


def providers(ops: list[Op]) -> list[Provider]:
    names = {op.name for op in ops}
    return [
        Provider(
            name,
            "vendor",
            op,
            _prepare(backend),
            _why(name, op),
            function=_function(backend) if op == "decode" else None,
        )
        for op in ("decode", "decode_paged")
        if op in names
        for name, backend in SDPA_BACKENDS.items()
    ]
