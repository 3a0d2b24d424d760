"""Inputs and checks of the attention tests, shared by the Triton, decode and Hopper kernels' tests."""

import torch

from tierbench.suite.measure.checking import TOLERANCE


def random_qkv(b: int, h: int, sq: int, sk: int, d: int, dtype: torch.dtype, device, seed: int = 0, kv_heads=None):
    """q (b, h, sq, d), k and v (b, kv_heads or h, sk, d): standard normal from a seeded CPU generator, then
    moved."""
    g = torch.Generator().manual_seed(seed)
    kv_h = h if kv_heads is None else kv_heads
    q = torch.randn(b, h, sq, d, generator=g).to(device=device, dtype=dtype)
    k = torch.randn(b, kv_h, sk, d, generator=g).to(device=device, dtype=dtype)
    v = torch.randn(b, kv_h, sk, d, generator=g).to(device=device, dtype=dtype)
    return q, k, v


def assert_rows_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str = "") -> None:
    """Each output row (one query token of one head of one sequence) within the dtype's tolerance of the
    reference's row, by relative norm: a wrong head, sequence or token fails here even where the error over
    the whole tensor would be small. Rows whose reference is zero (no visible key) must be exactly zero."""
    assert out.shape == ref.shape, f"{what}: output shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    out = out.double()
    ref = ref.to(device=out.device, dtype=torch.float64)
    diff = (out - ref).norm(dim=-1)
    scale = ref.norm(dim=-1)
    zero = scale == 0
    assert torch.equal(out[zero], ref[zero]), f"{what}: rows that see no key must be zero"
    rel = diff[~zero] / scale[~zero]
    worst = rel.max().item() if rel.numel() else 0.0
    if worst > TOLERANCE[dtype]:
        where = (diff / scale.clamp_min(1e-30) == worst).nonzero()[0].tolist()
        raise AssertionError(
            f"{what}: row {where} (batch, head, token) relative error {worst:.2e} > {TOLERANCE[dtype]:.0e}"
        )
