"""Decode: a few new query tokens attending over a KV cache, as a serving stack's decode step runs it.

Two ops, one per cache layout, each with its own signature (every tier calls `fn(*tensors, **options)`):
- `decode`: q (batch, heads, q_len, head_dim), k_cache and v_cache (batch, kv_heads, kv_len, head_dim),
  cache_seqlens (batch,) int32;
- `decode_paged`: the same q and cache_seqlens, k_cache and v_cache (num_blocks, kv_heads, page_size,
  head_dim), and block_table (batch, blocks_per_seq) int32, whose entry [b, j] is the physical block holding
  keys j·page_size .. (j + 1)·page_size − 1 of sequence b (the blocks are shuffled, so a kernel that ignores
  the table reads the wrong keys).
The shapes are heads-first, like every op here; the memory is laid out as serving stacks keep their caches
(flash-attn's and vLLM's): sequence-first storage, (batch, kv_len, kv_heads, head_dim) or (num_blocks,
page_size, kv_heads, head_dim), of which the inputs are transposed views (q too: (batch, q_len, heads,
head_dim) storage). flash-attn takes them back with a zero-copy `.transpose(1, 2)`, and
`tierbench.kernels.attention_with_kvcache` reads them through their strides.

Sequence b attends to keys [0, cache_seqlens[b]): `full`, every sequence kv_len long, or `ragged`, lengths
spread evenly from kv_len down to kv_len / 2. Grouped-query heads: query head h reads K/V head
h // (heads // kv_heads). causal=True is bottom-right aligned, as flash-attn defines it for decode: query
token i sees keys 0..i + cache_seqlens[b] − q_len (the new tokens are the last q_len keys of the cache),
which is what speculative decoding verifies; with one token it masks nothing. SDPA's `is_causal` is top-left
aligned, so the vendor tier passes the mask materialised (its providers below).

Work model: decode is bandwidth-bound. Bytes: K and V read once over each sequence's actual length, q read
and o written once (cache_seqlens and the block table, a few bytes per sequence, are left out). FLOPs: what
is computed, 4·heads·head_dim per (query row, key it sees): q_len·n_b keys per sequence of length n_b, or
with causal q_len·n_b − q_len·(q_len − 1)/2 (the kernels' tile padding is not counted).

The family's own providers are declared here too (`FAMILY.providers`), beside the op they call: SDPA with
each backend pinned over the cache (vendor tier) and flash-attn's KV-cache entry points (cuda tier). The
catalog puts them in their tiers' places; the triton tier calls tierbench.kernels.attention_with_kvcache.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..providers.base import Inputs, Provider, Unavailable, needs_cuda
from ..providers.cuda_flash_attn import FLASH_ATTN, FlashAttnPackage, heads_first
from ..providers.cuda_packages import CudaTierProvider, attribute, import_problem, on_gpu, package_version_of
from ..providers.vendor import SDPA_BACKENDS, first_call
from .attention import HeadLayout, layout_problems, repeat_kv
from .base import (
    Case,
    DType,
    Family,
    FamilySuite,
    Op,
    View,
    WorkModel,
    choice_name,
    element_size,
    hi_precision,
    positive,
    randn,
)


class CacheLayout(Enum):
    contiguous = "contiguous"
    paged = "paged"


class Lengths(Enum):
    full = "full"
    ragged = "ragged"


@dataclass
class DecodeConf:
    enabled: bool = True
    dtypes: list[DType] = field(default_factory=lambda: [DType.bf16])
    models: list[HeadLayout] = field(default_factory=list)
    # New query tokens per step: 1, or a few verified at once by speculative decoding.
    q_lens: list[int] = field(default_factory=lambda: [1])
    batches: list[int] = field(default_factory=list)
    kv_lens: list[int] = field(default_factory=list)
    # Cases holding more cached tokens than this (batch x kv_len) are left out: the cache must fit.
    max_tokens: int = 1 << 20
    layouts: list[CacheLayout] = field(default_factory=lambda: [CacheLayout.contiguous])
    # Keys per block of a paged cache (flash-attn 2 takes multiples of 256 only).
    page_size: int = 256
    lengths: list[Lengths] = field(default_factory=lambda: [Lengths.full])
    causal: bool = True


def validate(conf: Any) -> list[str]:
    problems = positive(
        "decode",
        {
            "q_lens": conf.q_lens,
            "batches": conf.batches,
            "kv_lens": conf.kv_lens,
            "max_tokens": conf.max_tokens,
            "page_size": conf.page_size,
        },
    )
    if problems:
        return problems
    if conf.kv_lens:
        shortest = min(conf.kv_lens)
        too_long = [q for q in conf.q_lens if q > shortest]
        if too_long:
            problems.append(
                f"decode.q_lens={list(conf.q_lens)}: q_len {too_long[0]} exceeds the shortest of decode.kv_lens "
                f"({shortest}); a step's new tokens are the last q_len keys of its cache"
            )
    return problems + layout_problems("decode", conf.models)


def make_case(
    batch: int,
    heads: int,
    kv_heads: int,
    q_len: int,
    kv_len: int,
    head_dim: int,
    dtype: str,
    mode: str = "fwd",
    causal: bool = True,
    lengths: str = "full",
    page_size: int = 0,
    name: str = "",
) -> Case:
    """One decode step; page_size 0: a contiguous cache (op decode), else a paged one (op decode_paged).
    ValueError, before anything is allocated, for a shape that cannot be a decode step."""
    sizes = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "q_len": q_len, "kv_len": kv_len}
    for key, value in {**sizes, "head_dim": head_dim}.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"decode: {key} must be a whole number >= 1, got {value!r}")
    if heads % kv_heads:
        raise ValueError(f"decode: heads={heads} must be a multiple of kv_heads={kv_heads}")
    if q_len > kv_len:
        raise ValueError(f"decode: q_len={q_len} exceeds kv_len={kv_len} (the new tokens are the cache's last keys)")
    if lengths not in ("full", "ragged"):
        raise ValueError(f"decode: lengths must be 'full' or 'ragged', got {lengths!r}")
    if mode != "fwd":
        raise ValueError(f"decode: mode must be 'fwd' (a decode step has no backward), got {mode!r}")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 0:
        raise ValueError(f"decode: page_size must be 0 (contiguous) or a whole number of keys, got {page_size!r}")
    params: dict[str, Any] = {**sizes, "head_dim": head_dim, "causal": causal, "lengths": lengths}
    params |= {"dtype": dtype, "mode": mode}
    if page_size:
        params["page_size"] = page_size
    label = f"B{batch} H{heads}/{kv_heads} q{q_len} KV{kv_len} D{head_dim}"
    label += (f" paged{page_size}" if page_size else "") + (" ragged" if lengths == "ragged" else "")
    label += " causal" if causal else ""
    op = "decode_paged" if page_size else "decode"
    return Case(op, "decode", params, f"{name} {label}" if name else label, x=float(kv_len))


def _contiguous_case(**params: Any) -> Case:
    if params.get("page_size"):
        raise ValueError("decode: a contiguous cache has no page_size (op decode_paged takes one)")
    return make_case(**params)


def _paged_case(**params: Any) -> Case:
    if not params.get("page_size"):
        raise ValueError("decode_paged: page_size (keys per block, >= 1) is required")
    return make_case(**params)


def cases(conf: Any) -> list[Case]:
    out = []
    for dtype in conf.dtypes:
        for layout in conf.layouts:
            page_size = conf.page_size if choice_name(layout) == "paged" else 0
            for model in conf.models:
                for q_len in conf.q_lens:
                    for batch in conf.batches:
                        for lengths in conf.lengths:
                            if choice_name(lengths) == "ragged" and batch == 1:
                                continue  # one sequence is never ragged
                            for kv_len in conf.kv_lens:
                                if batch * kv_len > conf.max_tokens:
                                    continue
                                params = dict(batch=batch, heads=model.heads, kv_heads=model.kv_heads)
                                params |= dict(q_len=q_len, kv_len=kv_len, head_dim=model.head_dim)
                                out.append(
                                    make_case(
                                        **params,
                                        dtype=choice_name(dtype),
                                        causal=bool(conf.causal),
                                        lengths=choice_name(lengths),
                                        page_size=page_size,
                                        name=model.name,
                                    )
                                )
    unique: dict[str, Case] = {}
    for case in out:
        unique.setdefault(case.case_id, case)
    return list(unique.values())


def seq_lengths(case: Case) -> list[int]:
    """Each sequence's length: kv_len for all (full), or spread evenly from kv_len down to kv_len / 2 (ragged;
    at least q_len when causal, so every query row sees a key)."""
    p = case.params
    n, batch = p["kv_len"], p["batch"]
    if p["lengths"] == "full" or batch == 1:
        return [n] * batch
    least = max(p["q_len"] if p["causal"] else 1, n // 2)
    return [n - (n - least) * i // (batch - 1) for i in range(batch)]


def _sequence_first(shape: tuple[int, int, int, int], case: Case, device: torch.device, gen: torch.Generator):
    """Random values in (rows, seq, heads, head_dim) storage, seen as (rows, heads, seq, head_dim)."""
    return randn(shape, case.dtype, device, gen).transpose(1, 2)


def make_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = case.params
    batch, kv_heads, head_dim = p["batch"], p["kv_heads"], p["head_dim"]
    inputs = {"q": _sequence_first((batch, p["q_len"], p["heads"], head_dim), case, device, gen)}
    page = p.get("page_size", 0)
    if page:
        per_seq = math.ceil(p["kv_len"] / page)
        shape = (batch * per_seq, page, kv_heads, head_dim)
    else:
        shape = (batch, p["kv_len"], kv_heads, head_dim)
    # Every slot holds random values, past each sequence's length too: a kernel that reads them is wrong.
    inputs["k_cache"] = _sequence_first(shape, case, device, gen)
    inputs["v_cache"] = _sequence_first(shape, case, device, gen)
    inputs["cache_seqlens"] = torch.tensor(seq_lengths(case), dtype=torch.int32, device=device)
    if page:
        order = torch.randperm(batch * per_seq, generator=gen, device=gen.device)
        inputs["block_table"] = order.to(device=device, dtype=torch.int32).view(batch, per_seq)
    return inputs


def options(case: Case) -> dict[str, Any]:
    return {"causal": case.params["causal"], "scale": 1.0 / math.sqrt(case.params["head_dim"])}


# -- reference ---------------------------------------------------------------------------------------


def _check_cache(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: torch.Tensor,
    block_table: torch.Tensor | None,
    causal: bool,
) -> list[int]:
    """Shapes, then the lengths and the block table's entries (read to the host); the sequence lengths."""
    fn = "decode_ref"
    if q.ndim != 4 or k_cache.ndim != 4 or tuple(v_cache.shape) != tuple(k_cache.shape):
        raise ValueError(f"{fn}: q and the caches must be 4-d, k_cache and v_cache of one shape, got "
                         f"{tuple(q.shape)}, {tuple(k_cache.shape)}, {tuple(v_cache.shape)}")  # fmt: skip
    batch, heads, q_len, head_dim = q.shape
    kv_heads = k_cache.shape[1]
    if k_cache.shape[3] != head_dim or heads % kv_heads:
        raise ValueError(
            f"{fn}: q's heads ({heads}) must be a multiple of the cache's kv_heads ({kv_heads}) and their head_dim "
            f"agree, got q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}"
        )
    if tuple(cache_seqlens.shape) != (batch,):
        raise ValueError(f"{fn}: cache_seqlens must have shape ({batch},), got {tuple(cache_seqlens.shape)}")
    if block_table is None:
        if k_cache.shape[0] != batch:
            raise ValueError(f"{fn}: a contiguous k_cache has batch {batch} rows, got shape {tuple(k_cache.shape)}")
        capacity = k_cache.shape[2]
    else:
        if block_table.ndim != 2 or block_table.shape[0] != batch:
            raise ValueError(f"{fn}: block_table must have shape ({batch}, blocks), got {tuple(block_table.shape)}")
        capacity = block_table.shape[1] * k_cache.shape[2]
    lens = [int(n) for n in cache_seqlens.tolist()]
    least = q_len if causal else 0
    for b, n in enumerate(lens):
        if not least <= n <= capacity:
            raise ValueError(f"{fn}: cache_seqlens[{b}]={n} must be in [{least}, {capacity}]"
                             + (" (causal: at least q_len)" if causal else ""))  # fmt: skip
    if block_table is not None:
        page, blocks = k_cache.shape[2], k_cache.shape[0]
        table = block_table.cpu()
        for b, n in enumerate(lens):
            used = table[b, : math.ceil(n / page)]
            bad = ((used < 0) | (used >= blocks)).nonzero()
            if len(bad):
                j = int(bad[0, 0])
                raise ValueError(
                    f"{fn}: block_table[{b}, {j}]={int(used[j])} points past the cache: blocks are 0..{blocks - 1}"
                )
    return lens


def _keys(cache: torch.Tensor, block_table: torch.Tensor | None, b: int, n: int) -> torch.Tensor:
    """Sequence b's first n rows of a cache, (kv_heads, n, head_dim): its own slice, or its blocks in order."""
    if block_table is None:
        return cache[b, :, :n]
    page = cache.shape[2]
    blocks = block_table[b, : math.ceil(n / page)].long()
    rows = cache[blocks].transpose(0, 1)  # (kv_heads, blocks, page, head_dim)
    return rows.reshape(cache.shape[1], -1, cache.shape[3])[:, :n]


def decode_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: torch.Tensor,
    block_table: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Exact attention over the cache in float64 (CPU) or float32 (GPU), one sequence at a time, reading each
    sequence's keys as the kernels do (its slice, or its blocks through the table). A query head group shares
    its K/V head without copies (the group's rows are stacked). Rows that see no key (a zero length) are 0.
    ValueError, before anything is computed, for inconsistent shapes, a length outside the cache, or a block
    table entry pointing past it."""
    lens = _check_cache(q, k_cache, v_cache, cache_seqlens, block_table, causal)
    hi = hi_precision(q.device)
    batch, heads, q_len, head_dim = q.shape
    kv_heads = k_cache.shape[1]
    group = heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = torch.zeros((batch, heads, q_len, head_dim), dtype=hi, device=q.device)
    token = torch.arange(group * q_len, device=q.device) % q_len  # row r of a group is token r % q_len
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for b, n in enumerate(lens):
            if n == 0:
                continue
            k = _keys(k_cache, block_table, b, n).to(hi)
            v = _keys(v_cache, block_table, b, n).to(hi)
            rows = q[b].to(hi).reshape(kv_heads, group * q_len, head_dim)
            scores = (rows @ k.transpose(-1, -2)) * scale
            if causal:
                seen = torch.arange(n, device=q.device)[None, :] <= (token + n - q_len)[:, None]
                scores = scores.masked_fill(~seen, float("-inf"))
            out[b] = (torch.softmax(scores, dim=-1) @ v).reshape(heads, q_len, head_dim)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return out


# -- the formula the compiler tier compiles ----------------------------------------------------------------


def length_mask(cache_seqlens: torch.Tensor, q_len: int, capacity: int, causal: bool) -> torch.Tensor:
    """(batch, 1, q_len, capacity) booleans: query token i of sequence b (of length n) sees keys 0..n - 1, or
    with causal 0..i + n - q_len (bottom-right aligned)."""
    last = cache_seqlens.long()[:, None] - 1
    if causal:
        last = last - (q_len - 1) + torch.arange(q_len, device=cache_seqlens.device)[None, :]
    keys = torch.arange(capacity, device=cache_seqlens.device)
    return (keys[None, None, :] <= last.expand(-1, q_len)[:, :, None])[:, None]


def _masked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache_seqlens: torch.Tensor, causal: bool, scale: float
) -> torch.Tensor:
    """The textbook formula over a (batch, kv_heads, keys, head_dim) cache: K/V heads repeated to the query
    heads, keys past each sequence's length (and, causal, right of its bottom-right diagonal) masked, softmax
    in float32."""
    k, v = repeat_kv(q, k, v)
    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~length_mask(cache_seqlens, q.shape[2], k.shape[2], causal), float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


def decode_math(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: torch.Tensor,
    causal: bool,
    scale: float,
) -> torch.Tensor:
    return _masked_attention(q, k_cache, v_cache, cache_seqlens, causal, scale)


def decode_paged_math(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: torch.Tensor,
    block_table: torch.Tensor,
    causal: bool,
    scale: float,
) -> torch.Tensor:
    """The blocks gathered through the table into (batch, kv_heads, blocks · page_size, head_dim), then the
    contiguous formula."""
    batch, blocks = block_table.shape
    _, kv_heads, page, head_dim = k_cache.shape
    index = block_table.long()

    def gather(cache: torch.Tensor) -> torch.Tensor:
        return cache[index].transpose(1, 2).reshape(batch, kv_heads, blocks * page, head_dim)

    return _masked_attention(q, gather(k_cache), gather(v_cache), cache_seqlens, causal, scale)


# -- work ----------------------------------------------------------------------------------------------


def work(case: Case) -> WorkModel:
    """Bytes: K and V over each sequence's actual length, read once, plus q read and o written. FLOPs: four
    per head_dim per (query row, key it sees); causal rows see q_len·n − q_len·(q_len − 1)/2 keys in all."""
    p = case.params
    size = element_size(case)
    heads, kv_heads, q_len, head_dim = p["heads"], p["kv_heads"], p["q_len"], p["head_dim"]
    lens = seq_lengths(case)
    cache = 2 * sum(lens) * kv_heads * head_dim * size
    q_and_o = 2 * p["batch"] * heads * q_len * head_dim * size
    pairs = sum(q_len * n - (q_len * (q_len - 1) // 2 if p["causal"] else 0) for n in lens)
    return WorkModel(4.0 * heads * head_dim * pairs, float(cache + q_and_o))


_COMMON: dict[str, Any] = dict(
    family="decode",
    reference=decode_ref,
    work=work,
    eager=False,  # the vendor tier's decode is SDPA with each backend pinned (sdpa_providers below)
    options=options,
    kernel="attention_with_kvcache",
)

OP = Op(
    name="decode",
    tensors=("q", "k_cache", "v_cache", "cache_seqlens"),
    make_inputs=make_inputs,
    formula=decode_math,
    baseline=("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math"),
    dynamic_dims={"q": (0,), "k_cache": (0, 2), "v_cache": (0, 2), "cache_seqlens": (0,)},
    case=_contiguous_case,
    **_COMMON,
)

PAGED_OP = Op(
    name="decode_paged",
    tensors=("q", "k_cache", "v_cache", "cache_seqlens", "block_table"),
    make_inputs=make_inputs,
    formula=decode_paged_math,
    # SDPA takes no block table: the compiled gather-and-attend formula is the generic reference point.
    baseline=("compile",),
    dynamic_dims={"q": (0,), "k_cache": (0,), "v_cache": (0,), "cache_seqlens": (0,), "block_table": (0, 1)},
    case=_paged_case,
    **_COMMON,
)


# -- the vendor tier's providers ------------------------------------------------------------------------
#
# The vendor tier's decode: SDPA with each backend pinned, grouped K/V heads through `enable_gqa`.
#
# SDPA reads a contiguous cache as it is (its heads-first shape is what SDPA takes; the sequence-first memory
# behind it is what its flash backend prefers). Each sequence's length and the bottom-right causal mask (SDPA's
# `is_causal` is top-left aligned) become one boolean mask, built while preparing; where no row misses a key
# (every sequence full, one query token or not causal) no mask is passed, which is what lets the flash backend,
# which takes none, run. SDPA has no block table, so a paged cache is not an input it can take: those cases
# are skipped with that reason rather than timed with a gather no serving stack would make.


def needs_mask(case: Case) -> bool:
    """Whether some query row of the case misses a key of the cache."""
    p = case.params
    return p["lengths"] != "full" or (bool(p["causal"]) and p["q_len"] > 1)


def _sdpa_prepare(backend: SDPBackend):
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


def _sdpa_function(backend: SDPBackend):
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


def _sdpa_why(name: str, op: str):
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


def sdpa_providers(ops: list[Op]) -> list[Provider]:
    """SDPA's backends over the cache, one provider per backend and op."""
    names = {op.name for op in ops}
    return [
        Provider(
            name,
            "vendor",
            op,
            _sdpa_prepare(backend),
            _sdpa_why(name, op),
            function=_sdpa_function(backend) if op == "decode" else None,
        )
        for op in ("decode", "decode_paged")
        if op in names
        for name, backend in SDPA_BACKENDS.items()
    ]


# -- the cuda tier's providers --------------------------------------------------------------------------
#
# The cuda tier's decode: flash-attn's KV-cache entry points, contiguous and paged.
#
# - flash-attn 2: `flash_attn.flash_attn_interface.flash_attn_with_kvcache(q, k_cache, v_cache,
#   cache_seqlens=, block_table=)`; a paged cache's blocks must hold a multiple of 256 keys (flash_api.cpp).
# - flash-attn 3: `flash_attn_interface.flash_attn_with_kvcache(..., cache_seqlens=, page_table=)`; any block
#   size. A build whose function takes no `page_table` runs the contiguous cases only.
# - flash-attn 4 (`flash_attn.cute`) has no `flash_attn_with_kvcache`: its varlen entry point
#   `flash_attn_varlen_func(q, k, v, seqused_k=, page_table=)` takes batched q and caches with per-sequence
#   lengths, which is the same step. Where its kernels lack a feature (paged KV on 9.x in the versions read
#   while writing this) the package asserts: that message becomes the skip reason.
#
# The packages take sequence-first tensors, which is how the op's inputs are laid out in memory: `.transpose(1,
# 2)` gives them back without a copy (a copy is made, while preparing, only for inputs laid out otherwise).
# The output (batch, q_len, heads, head_dim) is viewed back heads-first for the check. causal is bottom-right
# aligned in all three, as the op defines it.

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


def _flash_why(pkg: FlashAttnPackage, op: str) -> Callable[[Case, torch.device], str | None]:
    _, lengths_kw, table_kw = ENTRY_POINTS[pkg.provider]

    def why(case: Case, device: torch.device) -> str | None:
        if reason := import_problem(pkg.module, pkg.install):
            return reason
        fn = attribute(pkg.module, pkg.function)
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
        cc = on_gpu(device)
        if isinstance(cc, str):
            return cc
        return pkg.rule(cc, case.params["dtype"], int(case.params["head_dim"]))

    return why


def _as_stored(t: torch.Tensor) -> torch.Tensor:
    """(rows, heads, seq, head_dim) as the packages take it: a view where the memory already is so."""
    return t.transpose(1, 2).contiguous()


def _flash_prepare(pkg: FlashAttnPackage, op: str) -> Callable[[Inputs, dict[str, Any], Case], Callable[[], Any]]:
    _, lengths_kw, table_kw = ENTRY_POINTS[pkg.provider]

    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], Any]:
        fn = attribute(pkg.module, pkg.function)
        if fn is None:
            raise Unavailable(f"{pkg.module} has no {pkg.function}")
        q, k, v = (_as_stored(inputs[n]) for n in ("q", "k_cache", "v_cache"))
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


def _flash_function(pkg: FlashAttnPackage) -> Callable[[Case], Callable[..., torch.Tensor]]:
    """The contiguous-cache call as a function of decode's signature (for a composed chain): the caches seen
    sequence-first (no copy where their memory already is), the output seen heads-first."""
    _, lengths_kw, _ = ENTRY_POINTS[pkg.provider]

    def function(case: Case) -> Callable[..., torch.Tensor]:
        fn = attribute(pkg.module, pkg.function)

        def decode(q, k_cache, v_cache, cache_seqlens, causal: bool, scale: float) -> torch.Tensor:
            q, k, v = (_as_stored(t) for t in (q, k_cache, v_cache))
            out = fn(q, k, v, **{lengths_kw: cache_seqlens}, softmax_scale=float(scale), causal=bool(causal))
            return heads_first(out[0] if isinstance(out, tuple) else out)

        return decode

    return function


def flash_attn_providers(ops: list[Op]) -> list[Provider]:
    """flash-attn 2, 3 and 4's KV-cache entry points, one provider per package and op."""
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
                    _flash_prepare(pkg, op),
                    _flash_why(pkg, op),
                    package=pkg.distributions[0],
                    to_op_layout=heads_first,
                    function=_flash_function(pkg) if op == "decode" else None,
                    distributions=pkg.distributions,
                    owner_of=pkg.owner_of,
                    version_module=pkg.version_module,
                )
            )
    return out


def own_providers(ops: list[Op]) -> list[Any]:
    """SDPA's backends over the KV cache (vendor tier) and flash-attn's KV-cache entry points (cuda tier)."""
    return sdpa_providers(ops) + flash_attn_providers(ops)


FAMILY = Family(
    name="decode",
    ops=(OP, PAGED_OP),
    schema=DecodeConf,
    cases=cases,
    view=View(
        "gbps",
        "GB/s",
        "KV length (keys per sequence)",
        ("dtype", "heads", "kv_heads", "head_dim", "batch", "q_len", "page_size", "lengths", "causal"),
        roofline_with=("attention",),
    ),
    validate=validate,
    providers=own_providers,
    # suite=decode: conf/shapes/decode.yaml alone.
    suite=FamilySuite(
        "Llama-3 8B/70B decode steps over 1k-128k-key KV caches, contiguous and paged",
        on_cpu="GPU-sized",
        on_h200="7 min (h200-decode-1)",
    ),
    order=3,
)
