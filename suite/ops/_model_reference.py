"""The model block's reference, written out in float64 (CPU) / float32 (GPU, TF32 off) from the block's own
definition, independently of its parts' references: a test holds that the chain of those equals this.

The layout helpers (the QKV projection's rows seen as heads, the heads merged back) are the chain's own
(suite/ops/model.py imports them from here), so both read the projection's memory the same way.
"""

from __future__ import annotations

import math

import torch

from .norm import RMS_NORM_EPS


def split_heads(qkv: torch.Tensor, batch: int, tokens: int, heads: int, kv_heads: int, head_dim: int):
    """q (batch, heads, tokens, head_dim) and k, v (batch, kv_heads, tokens, head_dim) as views of the QKV
    projection's rows (token-major memory, as serving stacks keep it): no copy."""
    qkv = qkv.view(batch, tokens, heads + 2 * kv_heads, head_dim)
    q, k, v = qkv.split([heads, kv_heads, kv_heads], dim=2)
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)


def merge_heads(o: torch.Tensor) -> torch.Tensor:
    """(batch, heads, tokens, head_dim) -> (batch · tokens, heads · head_dim): the O projection's rows."""
    batch, heads, tokens, head_dim = o.shape
    return o.transpose(1, 2).reshape(batch * tokens, heads * head_dim)


def _hi(t: torch.Tensor) -> torch.Tensor:
    return t.double() if t.device.type == "cpu" else t.float()


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * _hi(weight)


def _reference_mlp(h: torch.Tensor, x: torch.Tensor, mlp_norm, w_gate_up, w_down, eps: float) -> torch.Tensor:
    r = h + x
    gate, up = (_rms(r, mlp_norm, eps) @ _hi(w_gate_up)).chunk(2, dim=-1)
    return r + (gate * torch.sigmoid(gate) * up) @ _hi(w_down)


# Query rows per chunk of the reference's attention: its score matrix stays a few hundred MiB at any length
# (a training pass keeps each chunk's probabilities for the backward, the whole matrix once).
_REFERENCE_SCORE_ELEMENTS = 1 << 26


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None):
    """Softmax attention with each K/V head repeated to its query heads, chunked over query rows; causal:
    query i (of the last q rows of the keys) sees keys up to i + keys - q."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    seq_q, seq_k = q.shape[2], k.shape[2]
    rows = max(1, _REFERENCE_SCORE_ELEMENTS // (q.shape[0] * q.shape[1] * seq_k))
    out = []
    for start in range(0, seq_q, rows):
        scores = (q[:, :, start : start + rows] @ k.transpose(-1, -2)) * scale
        if causal:
            qi = torch.arange(start, min(seq_q, start + rows), device=q.device)[:, None] + (seq_k - seq_q)
            scores = scores.masked_fill(torch.arange(seq_k, device=q.device)[None, :] > qi, float("-inf"))
        out.append(torch.softmax(scores, dim=-1) @ v)
    return torch.cat(out, dim=2)


def block_ref(
    x, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, batch, heads, kv_heads, head_dim,
    eps=RMS_NORM_EPS, scale=None,
):  # fmt: skip
    """The prefill/training block written out in float64 (CPU) / float32 (GPU, TF32 off), independently of the
    parts' references (a test holds that the chain of those equals this)."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        xh = _hi(x)
        tokens = xh.shape[0] // batch
        q, k, v = split_heads(_rms(xh, attn_norm, eps) @ _hi(w_qkv), batch, tokens, heads, kv_heads, head_dim)
        o = merge_heads(_attend(q, k, v, True, scale))
        return _reference_mlp(o @ _hi(w_o), xh, mlp_norm, w_gate_up, w_down, eps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def decode_block_ref(
    x, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, k_cache, v_cache, cache_seqlens,
    batch, heads, kv_heads, head_dim, eps=RMS_NORM_EPS, scale=None,
):  # fmt: skip
    """The decode block in float64 / float32: the cache's last slot replaced (in a copy) by the new token's keys
    and values, then each sequence's one query over its cache."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        xh = _hi(x)
        q, k, v = split_heads(_rms(xh, attn_norm, eps) @ _hi(w_qkv), batch, 1, heads, kv_heads, head_dim)
        keys, values = _hi(k_cache).clone(), _hi(v_cache).clone()
        lens = [int(n) for n in cache_seqlens.tolist()]
        out = torch.empty_like(q)
        for b, n in enumerate(lens):
            keys[b, :, n - 1], values[b, :, n - 1] = k[b, :, 0], v[b, :, 0]
            out[b : b + 1] = _attend(q[b : b + 1], keys[b : b + 1, :, :n], values[b : b + 1, :, :n], False, scale)
        return _reference_mlp(merge_heads(out) @ _hi(w_o), xh, mlp_norm, w_gate_up, w_down, eps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
