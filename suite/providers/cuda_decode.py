"""The cuda tier's decode: flash-attn's KV-cache entry points, contiguous and paged.

- flash-attn 2: `flash_attn.flash_attn_interface.flash_attn_with_kvcache(q, k_cache, v_cache,
  cache_seqlens=, block_table=)`; a paged cache's blocks must hold a multiple of 256 keys (flash_api.cpp).
- flash-attn 3: `flash_attn_interface.flash_attn_with_kvcache(..., cache_seqlens=, page_table=)`; any block
  size. A build whose function takes no `page_table` runs the contiguous cases only.
- flash-attn 4 (`flash_attn.cute`) has no `flash_attn_with_kvcache`: its varlen entry point
  `flash_attn_varlen_func(q, k, v, seqused_k=, page_table=)` takes batched q and caches with per-sequence
  lengths, which is the same step. Where its kernels lack a feature (paged KV on 9.x in the versions read
  while writing this) the package asserts: that message becomes the skip reason.

The packages take sequence-first tensors, which is how the op's inputs are laid out in memory: `.transpose(1,
2)` gives them back without a copy (a copy is made, while preparing, only for inputs laid out otherwise).
The output (batch, q_len, heads, head_dim) is viewed back heads-first for the check. causal is bottom-right
aligned in all three, as the op defines it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from ..ops.base import Case, Op
from .base import Inputs, Provider, Unavailable
from .cuda_flash_attn import FLASH_ATTN, FlashAttnPackage, _heads_first
from .cuda_packages import CudaTierProvider, _attribute, _on_gpu, import_problem, package_version_of

# provider -> (the KV-cache function, its keyword for the lengths, its keyword for the block table).
ENTRY_POINTS = {
    "flash-attn-2": ("flash_attn_with_kvcache", "cache_seqlens", "block_table"),
    "flash-attn-3": ("flash_attn_with_kvcache", "cache_seqlens", "page_table"),
    "flash-attn-4": ("flash_attn_varlen_func", "seqused_k", "page_table"),
}
FA2_PAGE_MULTIPLE = 256


def _takes(fn: Any, keyword: str) -> bool:
    try:
        return keyword in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a compiled function without a signature: let the call decide
        return True


def _why(pkg: FlashAttnPackage, op: str) -> Callable[[Case, torch.device], str | None]:
    _, lengths_kw, table_kw = ENTRY_POINTS[pkg.provider]

    def why(case: Case, device: torch.device) -> str | None:
        if reason := import_problem(pkg.module, pkg.install):
            return reason
        fn = _attribute(pkg.module, pkg.function)
        if not callable(fn):
            return f"package broken: {pkg.module} has no {pkg.function}; reinstall: {pkg.install}"
        if not _takes(fn, lengths_kw):
            return f"{pkg.module}.{pkg.function} of this install takes no {lengths_kw} (per-sequence lengths)"
        if op == "decode_paged":
            if not _takes(fn, table_kw):
                return f"{pkg.provider}: {pkg.module}.{pkg.function} of this install takes no {table_kw} (paged KV)"
            page = int(case.params["page_size"])
            if pkg.provider == "flash-attn-2" and page % FA2_PAGE_MULTIPLE:
                return (
                    f"page_size {page} unsupported: flash-attn-2 takes paged KV caches in blocks of a multiple of "
                    f"{FA2_PAGE_MULTIPLE} keys"
                )
        cc = _on_gpu(device)
        if isinstance(cc, str):
            return cc
        return pkg.rule(cc, case.params["dtype"], int(case.params["head_dim"]))

    return why


def _sequence_first(t: torch.Tensor) -> torch.Tensor:
    """(rows, heads, seq, head_dim) as the packages take it: a view where the memory already is so."""
    return t.transpose(1, 2).contiguous()


def _prepare(pkg: FlashAttnPackage, op: str) -> Callable[[Inputs, dict[str, Any], Case], Callable[[], Any]]:
    _, lengths_kw, table_kw = ENTRY_POINTS[pkg.provider]

    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], Any]:
        fn = _attribute(pkg.module, pkg.function)
        if fn is None:
            raise Unavailable(f"{pkg.module} has no {pkg.function}")
        q, k, v = (_sequence_first(inputs[n]) for n in ("q", "k_cache", "v_cache"))
        kwargs: dict[str, Any] = {lengths_kw: inputs["cache_seqlens"]}
        if op == "decode_paged":
            kwargs[table_kw] = inputs["block_table"]
        kwargs |= {"softmax_scale": float(options["scale"]), "causal": bool(options["causal"])}

        def call() -> torch.Tensor:
            out = fn(q, k, v, **kwargs)
            return out[0] if isinstance(out, tuple) else out  # flash-attn 4 returns (out, lse)

        if pkg.provider == "flash-attn-4":
            # Its kernels assert what they cannot do (paged KV or split-KV on some architectures): a reason.
            try:
                call()
            except (AssertionError, NotImplementedError) as exc:
                version = package_version_of(pkg.distributions) or "(version unknown)"
                raise Unavailable(f"flash-attn-4 {version} cannot run this case: {exc}") from None
        return call

    return prepare


def _function(pkg: FlashAttnPackage) -> Callable[[Case], Callable[..., torch.Tensor]]:
    """The contiguous-cache call as a function of decode's signature (for a composed chain): the caches seen
    sequence-first (no copy where their memory already is), the output seen heads-first."""
    _, lengths_kw, _ = ENTRY_POINTS[pkg.provider]

    def function(case: Case) -> Callable[..., torch.Tensor]:
        fn = _attribute(pkg.module, pkg.function)

        def decode(q, k_cache, v_cache, cache_seqlens, causal: bool, scale: float) -> torch.Tensor:
            q, k, v = (_sequence_first(t) for t in (q, k_cache, v_cache))
            out = fn(q, k, v, **{lengths_kw: cache_seqlens}, softmax_scale=float(scale), causal=bool(causal))
            return _heads_first(out[0] if isinstance(out, tuple) else out)

        return decode

    return function


def providers(ops: list[Op]) -> list[Provider]:
    names = {op.name for op in ops}
    out: list[Provider] = []
    for op in ("decode", "decode_paged"):
        if op not in names:
            continue
        for base in FLASH_ATTN:
            pkg = replace(base, function=ENTRY_POINTS[base.provider][0])
            out.append(
                CudaTierProvider(
                    pkg.provider,
                    "cuda",
                    op,
                    _prepare(pkg, op),
                    _why(pkg, op),
                    package=pkg.distributions[0],
                    to_op_layout=_heads_first,
                    function=_function(pkg) if op == "decode" else None,
                    distributions=pkg.distributions,
                    owner_of=pkg.owner_of,
                    version_module=pkg.version_module,
                )
            )
    return out
