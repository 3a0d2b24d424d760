"""Inputs of the attention tests, shared by the Triton and the Hopper kernel's tests."""

import torch


def random_qkv(b: int, h: int, sq: int, sk: int, d: int, dtype: torch.dtype, device, seed: int = 0):
    """q (b, h, sq, d), k and v (b, h, sk, d): standard normal from a seeded CPU generator, then moved."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, sq, d, generator=g).to(device=device, dtype=dtype)
    k = torch.randn(b, h, sk, d, generator=g).to(device=device, dtype=dtype)
    v = torch.randn(b, h, sk, d, generator=g).to(device=device, dtype=dtype)
    return q, k, v
