"""Attention (prefill): softmax(q k^T * scale [+ causal mask]) v, layout (batch, heads, seq, head_dim).

q is (batch, heads, seq, head_dim); k and v (batch, kv_heads, kv_seq, head_dim). kv_heads may divide heads
(grouped-query attention, as Llama-3's 32 or 64 query heads over 8 K/V heads): query head h reads K/V head
h // (heads // kv_heads). kv_seq may exceed seq (a chunk of queries over a longer context). causal=True is
then bottom-right aligned, as flash-attn defines it: query i sees keys 0..i + kv_seq - seq. SDPA's
`is_causal` is top-left aligned (query i sees keys 0..i), which is the same only when seq == kv_seq; its
bottom-right mask is `torch.nn.attention.bias.causal_lower_right`, whose dispatch calls the flash or
memory-efficient kernels directly, past `sdpa_kernel`'s pinning, so the vendor tier passes that mask
materialised instead (providers/vendor.py).

A case names kv_heads and kv_seq only where they differ from heads and seq, so the multi-head cases keep
the case ids (and asv history) they had before either existed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..measure.checking import gradient_bounds
from ..show.panels_format1 import RECOMPUTATION
from .base import Case, DType, Family, Mode, Op, View, WorkModel, choice_name, element_size, per_pass, positive, randn

# Query rows per chunk of the reference, so its score matrix stays a few hundred MiB at any length.
_REFERENCE_SCORE_ELEMENTS = 1 << 26


@dataclass
class HeadLayout:
    """A model's attention heads: query heads, K/V heads (fewer with grouped-query attention), head_dim."""

    name: str = "???"
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128


@dataclass
class AttentionConf:
    enabled: bool = True
    dtypes: list[DType] = field(default_factory=lambda: [DType.bf16])
    modes: list[Mode] = field(default_factory=lambda: [Mode.fwd])
    # batch x seq_len is held at this many tokens, so every sequence length does comparable work per token.
    tokens: int = 16384
    seq_lens: list[int] = field(default_factory=list)
    head_dims: list[int] = field(default_factory=lambda: [128])
    # heads x head_dim: the model width, held fixed across head_dims.
    model_dim: int = 2048
    # null runs both causal and non-causal; true or false runs one.
    causal: bool | None = None
    # Models' head layouts (grouped-query attention), each at every length of model_seq_lens, batch x seq_len
    # held at `tokens` too.
    models: list[HeadLayout] = field(default_factory=list)
    model_seq_lens: list[int] = field(default_factory=list)


def layout_problems(section: str, models: Any) -> list[str]:
    """What is wrong with a list of HeadLayouts, each message naming `<section>.models[<name>]`."""
    problems = []
    for model in models:
        key = f"{section}.models[{model.name}]"
        sizes = positive(key, {"heads": model.heads, "kv_heads": model.kv_heads, "head_dim": model.head_dim})
        if sizes:
            problems += sizes
            continue
        if model.heads % model.kv_heads:
            problems.append(f"{key}: heads={model.heads} is not a multiple of kv_heads={model.kv_heads}")
        if model.head_dim % 8:
            problems.append(f"{key}: head_dim={model.head_dim} is not a multiple of 8 (tensor-core kernels need it)")
    return problems


def validate(conf: Any) -> list[str]:
    problems = positive(
        "attention",
        {
            "tokens": conf.tokens,
            "seq_lens": conf.seq_lens,
            "head_dims": conf.head_dims,
            "model_dim": conf.model_dim,
            "model_seq_lens": conf.model_seq_lens,
        },
    )
    if problems:
        return problems
    for head_dim in conf.head_dims:
        if head_dim % 8:
            problems.append(f"attention.head_dims: {head_dim} is not a multiple of 8 (tensor-core kernels need it)")
        elif conf.model_dim % head_dim:
            problems.append(f"attention.model_dim={conf.model_dim} is not a multiple of head_dim={head_dim}")
    return problems + layout_problems("attention", conf.models)


def make_case(
    batch: int,
    heads: int,
    seq: int,
    head_dim: int,
    causal: bool,
    dtype: str,
    mode: str,
    kv_heads: int | None = None,
    kv_seq: int | None = None,
    name: str = "",
) -> Case:
    """One case; kv_heads and kv_seq enter its params only where they differ from heads and seq. ValueError
    for heads that kv_heads does not divide, and for causal with seq > kv_seq (a query row with no key)."""
    kv_heads = heads if kv_heads is None else kv_heads
    kv_seq = seq if kv_seq is None else kv_seq
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"attention: heads={heads} must be a multiple of kv_heads={kv_heads}")
    if causal and seq > kv_seq:
        raise ValueError(f"attention: causal needs seq <= kv_seq (bottom-right aligned), got {seq} > {kv_seq}")
    params: dict[str, Any] = {
        "batch": batch,
        "heads": heads,
        "seq": seq,
        "head_dim": head_dim,
        "causal": causal,
        "dtype": dtype,
        "mode": mode,
    }
    if kv_heads != heads:
        params["kv_heads"] = kv_heads
    if kv_seq != seq:
        params["kv_seq"] = kv_seq
    heads_label = f"H{heads}" + (f"/{kv_heads}" if kv_heads != heads else "")
    seq_label = f"S{seq}" + (f"/{kv_seq}" if kv_seq != seq else "")
    label = f"B{batch} {heads_label} {seq_label} D{head_dim}" + (" causal" if causal else "")
    return Case("attention", "attention", params, f"{name} {label}" if name else label, x=float(kv_seq))


def cases(conf: Any) -> list[Case]:
    causal_values = [False, True] if conf.causal is None else [bool(conf.causal)]
    out = [
        make_case(
            max(1, conf.tokens // seq),
            conf.model_dim // head_dim,
            seq,
            head_dim,
            causal,
            choice_name(dtype),
            choice_name(mode),
        )  # fmt: skip
        for dtype in conf.dtypes
        for mode in conf.modes
        for head_dim in conf.head_dims
        for causal in causal_values
        for seq in conf.seq_lens
    ]
    out += [
        make_case(
            max(1, conf.tokens // seq),
            model.heads,
            seq,
            model.head_dim,
            causal,
            choice_name(dtype),
            choice_name(mode),
            kv_heads=model.kv_heads,
            name=model.name,
        )
        for dtype in conf.dtypes
        for mode in conf.modes
        for model in conf.models
        for causal in causal_values
        for seq in conf.model_seq_lens
    ]
    # A model whose layout is also the sweep's makes the same case twice: keep the first.
    unique: dict[str, Case] = {}
    for case in out:
        unique.setdefault(case.case_id, case)
    return list(unique.values())


def make_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = case.params
    q_shape = (p["batch"], p["heads"], p["seq"], p["head_dim"])
    kv_shape = (p["batch"], p.get("kv_heads", p["heads"]), p.get("kv_seq", p["seq"]), p["head_dim"])
    return {name: randn(q_shape if name == "q" else kv_shape, case.dtype, device, gen) for name in ("q", "k", "v")}


def options(case: Case) -> dict[str, Any]:
    return {"causal": case.params["causal"], "scale": 1.0 / math.sqrt(case.params["head_dim"])}


def attention_ref(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None
) -> torch.Tensor:
    """Exact softmax attention in float64 (CPU) or float32 (GPU), chunked over query rows.

    k and v may have fewer heads than q (grouped-query attention): query head h reads K/V head
    h // (heads // kv_heads). Causal is bottom-right aligned, as flash-attn's: query i of seq_q attends to
    keys 0..i + seq_k - seq_q (with seq_q == seq_k this is SDPA's top-left is_causal); causal with
    seq_q > seq_k is an error.
    """
    hi = torch.float64 if q.device.type == "cpu" else torch.float32
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    batch, heads, seq_q, _ = q.shape
    kv_heads, seq_k = k.shape[1], k.shape[-2]
    if heads % kv_heads:
        raise ValueError(f"attention_ref: q's heads ({heads}) must be a multiple of k's heads ({kv_heads})")
    if causal and seq_q > seq_k:
        raise ValueError(f"attention_ref: causal needs seq_q <= seq_k, got seq_q={seq_q}, seq_k={seq_k}")
    group = heads // kv_heads
    out = torch.empty((*q.shape[:-1], v.shape[-1]), dtype=hi, device=q.device)
    # The reference may copy K/V per query head; only the kernels must not.
    kt = k.to(hi).repeat_interleave(group, dim=1).transpose(-1, -2)
    vh = v.to(hi).repeat_interleave(group, dim=1)
    rows = max(1, _REFERENCE_SCORE_ELEMENTS // (batch * heads * seq_k))
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for start in range(0, seq_q, rows):
            stop = min(seq_q, start + rows)
            scores = (q[:, :, start:stop].to(hi) @ kt) * scale
            if causal:
                qi = torch.arange(start, stop, device=q.device)[:, None] + (seq_k - seq_q)
                kj = torch.arange(seq_k, device=q.device)[None, :]
                scores.masked_fill_(kj > qi, float("-inf"))
            out[:, :, start:stop] = torch.softmax(scores, dim=-1) @ vh
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return out


def repeat_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """k and v with each grouped K/V head repeated to its query heads: the textbook formulas' grouped-query
    attention (a copy; the kernels read each K/V head for its whole group instead)."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return k, v


def bottom_right_mask(seq_q: int, seq_k: int, device: torch.device) -> torch.Tensor:
    """The bottom-right causal mask as booleans: query i sees keys 0..i + seq_k - seq_q (SDPA's
    causal_lower_right bias; the top-left one where seq_q == seq_k)."""
    return torch.ones(seq_q, seq_k, dtype=torch.bool, device=device).tril(seq_k - seq_q)


def attention_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    """The textbook formula in the inputs' dtype (softmax in float32): what the compiler tier compiles. Grouped
    K/V heads are repeated to the query heads; causal is bottom-right aligned."""
    k, v = repeat_kv(q, k, v)
    scores = (q @ k.transpose(-1, -2)) * scale
    if causal:
        scores = scores.masked_fill(~bottom_right_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


def forward_flops(case: Case) -> float:
    """4·B·H·S·S_kv·D; causal: half of it when S == S_kv (FlashAttention's count), else the S x S triangle
    counted as half (4·B·H·D·(S·S_kv − S²/2))."""
    p = case.params
    seq, kv_seq = p["seq"], p.get("kv_seq", p["seq"])
    if kv_seq == seq:
        flops = 4.0 * p["batch"] * p["heads"] * p["seq"] * p["seq"] * p["head_dim"]
        return flops / 2 if p["causal"] else flops
    pairs = seq * kv_seq - seq * seq / 2 if p["causal"] else seq * kv_seq
    return 4.0 * p["batch"] * p["heads"] * p["head_dim"] * pairs


# FlashAttention's count of the backward: five products against the forward's two (the four of the
# textbook backward plus the recomputed q k^T), i.e. 2.5x the forward's FLOPs.
BACKWARD_FLOPS_FACTOR = 2.5
# Products of (seq x seq x head_dim) each pass executes: the forward's q k^T and P v; the textbook
# backward's dV = P^T dO, dP = dO V^T, dQ = dS K and dK = dS^T Q; FlashAttention's adds the recomputed q k^T.
FORWARD_PRODUCTS = 2
TEXTBOOK_BACKWARD_PRODUCTS = 4
RECOMPUTING_BACKWARD_PRODUCTS = 5


def executed_flops(case: Case, backward_products: int, skips_masked: bool) -> float:
    """The FLOPs a provider executes for this case's pass: its forward's two products and its backward's
    `backward_products`, each 2·B·H·S·S_kv·D, causal counted as forward_flops counts it only where the kernel
    skips the masked tiles (one that computes the whole score matrix and masks it afterwards does the full
    work)."""
    p = case.params
    product = 2.0 * p["batch"] * p["heads"] * p["seq"] * p.get("kv_seq", p["seq"]) * p["head_dim"]
    if p["causal"] and skips_masked:
        product = forward_flops(case) / FORWARD_PRODUCTS
    products = {
        "fwd": FORWARD_PRODUCTS,
        "bwd": backward_products,
        "fwd_bwd": FORWARD_PRODUCTS + backward_products,
    }[case.mode]
    return products * product


def work(case: Case) -> WorkModel:
    """fwd: q, k, v read once and o written once (the score matrix never needs to reach memory); k and v
    have kv_heads heads of kv_seq rows. bwd: q, k, v, o and dO read, dq, dk, dv written. fwd_bwd: both."""
    p = case.params
    q_tile = p["batch"] * p["heads"] * p["seq"] * p["head_dim"] * element_size(case)
    kv_tile = p["batch"] * p.get("kv_heads", p["heads"]) * p.get("kv_seq", p["seq"]) * p["head_dim"]
    kv_tile *= element_size(case)
    fwd = WorkModel(forward_flops(case), float(2 * q_tile + 2 * kv_tile))
    bwd = WorkModel(BACKWARD_FLOPS_FACTOR * fwd.flops, float(4 * q_tile + 4 * kv_tile))
    return per_pass(case, fwd, bwd)


# The triton tier's backward (kernels/attention_backward.py) runs two passes rather than one with atomic dQ:
# its dK/dV kernel recomputes q k^T and dO V^T for dV and dK, its dQ kernel recomputes both again for dQ, so
# seven products against FlashAttention's five; causal tiles above the diagonal are skipped in both.
KERNEL_BACKWARD_PRODUCTS = 7


def kernel_flops(case: Case) -> float:
    """What tierbench.kernels.attention executes for the case's pass."""
    return executed_flops(case, KERNEL_BACKWARD_PRODUCTS, skips_masked=True)


# The gradients' elementwise bound in 16 bits, stated in suite/bounds.py (which says why) so that readers of
# records judge by it too.
GRADIENT_ELEMENT_TOLERANCE = gradient_bounds("attention")

OP = Op(
    name="attention",
    family="attention",
    tensors=("q", "k", "v"),
    make_inputs=make_inputs,
    reference=attention_ref,
    work=work,
    formula=attention_math,
    eager=False,  # the vendor tier's attention is SDPA with each backend pinned (providers/vendor.py)
    options=options,
    grads=("q", "k", "v"),
    kernel="attention",
    kernel_flops=kernel_flops,
    baseline=("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math"),
    dynamic_dims={"q": (0, 2), "k": (0, 2), "v": (0, 2)},
    case=make_case,
    gradient_element_tolerance=GRADIENT_ELEMENT_TOLERANCE,
)

FAMILY = Family(
    name="attention",
    ops=(OP,),
    schema=AttentionConf,
    cases=cases,
    # heads and kv_heads split grouped-query layouts from the multi-head sweep (decode's page draws these
    # points on its roofline too).
    view=View(
        "tflops",
        "TFLOP/s",
        "sequence length",
        ("dtype", "head_dim", "heads", "kv_heads", "causal"),
        panels=(RECOMPUTATION,),
    ),
    validate=validate,
    order=2,
)
