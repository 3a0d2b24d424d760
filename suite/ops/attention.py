"""Attention forward: softmax(q k^T * scale [+ causal mask]) v, layout (batch, heads, seq, head_dim)."""

from __future__ import annotations

import math
from typing import Any

import torch

from .base import Case, Op, WorkModel, choice_name, element_size, randn

# Query rows per chunk of the reference, so its score matrix stays a few hundred MiB at any length.
_REFERENCE_SCORE_ELEMENTS = 1 << 26


def cases(conf: Any) -> list[Case]:
    causal_values = [False, True] if conf.causal is None else [bool(conf.causal)]
    out: list[Case] = []
    for dtype in conf.dtypes:
        for mode in conf.modes:
            for head_dim in conf.head_dims:
                if conf.model_dim % head_dim:
                    raise ValueError(f"attention.model_dim={conf.model_dim} is not a multiple of head_dim={head_dim}")
                heads = conf.model_dim // head_dim
                for causal in causal_values:
                    for seq in conf.seq_lens:
                        batch = max(1, conf.tokens // seq)
                        params = {
                            "batch": batch,
                            "heads": heads,
                            "seq": seq,
                            "head_dim": head_dim,
                            "causal": causal,
                            "dtype": choice_name(dtype),
                            "mode": choice_name(mode),
                        }
                        label = f"B{batch} H{heads} S{seq} D{head_dim}" + (" causal" if causal else "")
                        out.append(Case("attention", "attention", params, label, x=float(seq)))
    return out


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


def reference(inputs: dict[str, torch.Tensor], case: Case) -> torch.Tensor:
    opts = options(case)
    return attention_ref(inputs["q"], inputs["k"], inputs["v"], opts["causal"], opts["scale"])


def work(case: Case) -> WorkModel:
    p = case.params
    b, h, s, d = p["batch"], p["heads"], p["seq"], p["head_dim"]
    flops = 4.0 * b * h * s * s * d
    if p["causal"]:
        flops /= 2
    # q, k, v read once and o written once: the score matrix never needs to reach memory.
    return WorkModel(flops=flops, min_bytes=float(4 * b * h * s * d * element_size(case)))


OP = Op(name="attention", family="attention", make_inputs=make_inputs, reference=reference, work=work, options=options)
