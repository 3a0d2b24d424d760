"""Attention: softmax(q k^T * scale [+ causal mask]) v, layout (batch, heads, seq, head_dim)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from .base import Case, DType, Family, Mode, Op, View, WorkModel, choice_name, element_size, per_pass, positive, randn

# Query rows per chunk of the reference, so its score matrix stays a few hundred MiB at any length.
_REFERENCE_SCORE_ELEMENTS = 1 << 26


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


def validate(conf: Any) -> list[str]:
    problems = positive(
        "attention",
        {"tokens": conf.tokens, "seq_lens": conf.seq_lens, "head_dims": conf.head_dims, "model_dim": conf.model_dim},
    )
    if problems:
        return problems
    for head_dim in conf.head_dims:
        if head_dim % 8:
            problems.append(f"attention.head_dims: {head_dim} is not a multiple of 8 (tensor-core kernels need it)")
        elif conf.model_dim % head_dim:
            problems.append(f"attention.model_dim={conf.model_dim} is not a multiple of head_dim={head_dim}")
    return problems


def make_case(batch: int, heads: int, seq: int, head_dim: int, causal: bool, dtype: str, mode: str) -> Case:
    params = {
        "batch": batch,
        "heads": heads,
        "seq": seq,
        "head_dim": head_dim,
        "causal": causal,
        "dtype": dtype,
        "mode": mode,
    }
    label = f"B{batch} H{heads} S{seq} D{head_dim}" + (" causal" if causal else "")
    return Case("attention", "attention", params, label, x=float(seq))


def cases(conf: Any) -> list[Case]:
    causal_values = [False, True] if conf.causal is None else [bool(conf.causal)]
    return [
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


def make_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = case.params
    shape = (p["batch"], p["heads"], p["seq"], p["head_dim"])
    return {name: randn(shape, case.dtype, device, gen) for name in ("q", "k", "v")}


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


def attention_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    """The textbook formula in the inputs' dtype (softmax in float32): what the compiler tier compiles."""
    scores = (q @ k.transpose(-1, -2)) * scale
    if causal:
        seq_q, seq_k = q.shape[-2], k.shape[-2]
        mask = torch.ones(seq_q, seq_k, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


def forward_flops(case: Case) -> float:
    p = case.params
    flops = 4.0 * p["batch"] * p["heads"] * p["seq"] * p["seq"] * p["head_dim"]
    return flops / 2 if p["causal"] else flops


# FlashAttention's count of the backward: five products against the forward's two (the four of the
# textbook backward plus the recomputed q k^T), i.e. 2.5x the forward's FLOPs.
BACKWARD_FLOPS_FACTOR = 2.5


def work(case: Case) -> WorkModel:
    """fwd: q, k, v read once and o written once (the score matrix never needs to reach memory).
    bwd: q, k, v, o and dO read, dq, dk, dv written. fwd_bwd: both passes."""
    p = case.params
    tile = p["batch"] * p["heads"] * p["seq"] * p["head_dim"] * element_size(case)
    fwd = WorkModel(forward_flops(case), float(4 * tile))
    bwd = WorkModel(BACKWARD_FLOPS_FACTOR * fwd.flops, float(8 * tile))
    return per_pass(case, fwd, bwd)


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
    baseline=("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math"),
    dynamic_dims={"q": (0, 2), "k": (0, 2), "v": (0, 2)},
    case=make_case,
)

FAMILY = Family(
    name="attention",
    ops=(OP,),
    schema=AttentionConf,
    cases=cases,
    view=View("tflops", "TFLOP/s", "sequence length", ("dtype", "head_dim", "causal")),
    validate=validate,
    order=2,
)
