"""Each op's formula in jax.numpy, the same computation as its torch formula (suite/ops/), for XLA to compile.

Same signature as the op (tensors in op order, then its options as keywords), in the op's layout and dtype:
products in the inputs' dtype, the norms' statistics and attention's softmax in float32, as the torch
formulas compute them. Imported only where jax is installed.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def matmul(a, b):
    return a @ b


def matmul_bias_gelu(a, b, bias, approximate: str):
    return jax.nn.gelu(a @ b + bias, approximate=approximate == "tanh")


def _layer_norm(h, weight, bias, eps: float):
    x = h.astype(jnp.float32)
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    y = (x - mean) * jax.lax.rsqrt(var + eps) * weight.astype(jnp.float32) + bias.astype(jnp.float32)
    return y.astype(h.dtype)


def layer_norm(x, weight, bias, eps: float):
    return _layer_norm(x, weight, bias, eps)


def rms_norm(x, weight, eps: float):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.square(x32).mean(-1, keepdims=True) + eps) * weight.astype(jnp.float32)
    return y.astype(x.dtype)


def bias_gelu_layer_norm(x, bias, weight, ln_bias, eps: float):
    return _layer_norm(jax.nn.gelu(x + bias, approximate=False), weight, ln_bias, eps)


def _repeat_kv(q, k, v):
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
    return k, v


def _softmax_product(scores, v, dtype):
    return jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(dtype) @ v


def attention(q, k, v, causal: bool, scale: float):
    """Textbook attention: grouped K/V heads repeated, bottom-right causal mask, softmax in float32."""
    k, v = _repeat_kv(q, k, v)
    scores = (q @ jnp.swapaxes(k, -1, -2)) * scale
    if causal:
        seq_q, seq_k = q.shape[-2], k.shape[-2]
        seen = jnp.tril(jnp.ones((seq_q, seq_k), dtype=bool), seq_k - seq_q)
        scores = jnp.where(seen, scores, -jnp.inf)
    return _softmax_product(scores, v, q.dtype)


def _masked_attention(q, k, v, cache_seqlens, causal: bool, scale: float):
    """Over a (batch, kv_heads, keys, head_dim) cache: keys past each sequence's length masked (and, causal,
    right of its bottom-right diagonal), as suite/ops/decode.py's length_mask."""
    k, v = _repeat_kv(q, k, v)
    q_len, capacity = q.shape[2], k.shape[2]
    last = cache_seqlens.astype(jnp.int32)[:, None] - 1
    if causal:
        last = last - (q_len - 1) + jnp.arange(q_len)[None, :]
    last = jnp.broadcast_to(last, (q.shape[0], q_len))
    seen = (jnp.arange(capacity)[None, None, :] <= last[:, :, None])[:, None]
    scores = jnp.where(seen, (q @ jnp.swapaxes(k, -1, -2)) * scale, -jnp.inf)
    return _softmax_product(scores, v, q.dtype)


def decode(q, k_cache, v_cache, cache_seqlens, causal: bool, scale: float):
    return _masked_attention(q, k_cache, v_cache, cache_seqlens, causal, scale)


def decode_paged(q, k_cache, v_cache, cache_seqlens, block_table, causal: bool, scale: float):
    """The blocks gathered through the table into (batch, kv_heads, blocks · page_size, head_dim), then the
    contiguous formula."""
    batch, blocks = block_table.shape
    _, kv_heads, page, head_dim = k_cache.shape

    def gather(cache):
        rows = cache[block_table]  # (batch, blocks, kv_heads, page, head_dim)
        return jnp.swapaxes(rows, 1, 2).reshape(batch, kv_heads, blocks * page, head_dim)

    return _masked_attention(q, gather(k_cache), gather(v_cache), cache_seqlens, causal, scale)


FORMULAS: dict[str, Callable[..., jax.Array]] = {
    "matmul": matmul,
    "matmul_bias_gelu": matmul_bias_gelu,
    "layer_norm": layer_norm,
    "rms_norm": rms_norm,
    "bias_gelu_layer_norm": bias_gelu_layer_norm,
    "attention": attention,
    "decode": decode,
    "decode_paged": decode_paged,
}
