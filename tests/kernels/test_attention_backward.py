"""attention's backward (FlashAttention-2) against float64 autograd on the reference, and what it saves."""

import importlib
import math

import pytest
import torch
from attention_inputs import random_qkv
from build_script import run_build_script
from grad_checks import assert_grad_close, reference_grads

from tierbench.kernels import attention
from tierbench.kernels._common import last_launch
from tierbench.suite.ops.attention import GRADIENT_ELEMENT_TOLERANCE, attention_ref

at = importlib.import_module("tierbench.kernels.attention")
ab = importlib.import_module("tierbench.kernels.attention_backward")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _grad_out(q: torch.Tensor, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(q.shape, generator=g).to(device=q.device, dtype=q.dtype)


def _check(q, k, v, do, causal, what, scale=None):
    """Forward and backward through the public function; dq, dk, dv against float64 autograd."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    grads = torch.autograd.grad(attention(*leaves, causal=causal, scale=scale), leaves, do)
    refs = reference_grads(lambda q, k, v: attention_ref(q, k, v, causal, scale), [q, k, v], do)
    for name, grad, ref in zip(("dq", "dk", "dv"), grads, refs):
        assert_grad_close(grad, ref, q.dtype, f"{what} {name}", GRADIENT_ELEMENT_TOLERANCE)
    return grads


def _lse_ref(q, k, causal, scale):
    scores = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        scores.masked_fill_(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    return torch.logsumexp(scores, dim=-1)


# ----------------------------------------------------------------------------------------------------------
# Gradients
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [1, 17, 77])  # 1: dq = dk = 0 exactly; 17, 77: ragged blocks of every kernel
@pytest.mark.parametrize("head_dim", [64, 128])
def test_attention_backward(head_dim, seq, causal, dtype, device):
    q, k, v = random_qkv(1, 2, seq, seq, head_dim, dtype, device)
    _check(q, k, v, _grad_out(q, 1), causal, f"S={seq} D={head_dim} causal={causal} {dtype}")
    mask = "causal" if causal else "full"
    assert last_launch("attention-bwd").startswith(f"{mask}, dk/dv: BLOCK_M=")
    assert f"; {mask}, dq: BLOCK_M=" in last_launch("attention-bwd")


@pytest.mark.parametrize(
    "seq,head_dim,causal,dtype",
    [(77, 64, False, torch.float16), (77, 64, True, torch.bfloat16), (17, 128, True, torch.float16)],
)
def test_one_pass_backward_adds_dq_with_atomics(seq, head_dim, causal, dtype, device):
    """deterministic=False: one dK/dV pass that also adds dQ into fp32 sums; ragged blocks, both masks."""
    q, k, v = random_qkv(1, 2, seq, seq, head_dim, dtype, device, seed=30)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    do = _grad_out(q, 31)
    grads = torch.autograd.grad(attention(*leaves, causal=causal, deterministic=False), leaves, do)
    refs = reference_grads(lambda q, k, v: attention_ref(q, k, v, causal), [q, k, v], do)
    for name, grad, ref in zip(("dq", "dk", "dv"), grads, refs):
        assert_grad_close(grad, ref, dtype, f"one pass S={seq} causal={causal} {name}", GRADIENT_ELEMENT_TOLERANCE)
    mask = "causal" if causal else "full"
    assert last_launch("attention-bwd").startswith(f"{mask}, dk/dv + atomic dq: BLOCK_M=")
    assert "; " not in last_launch("attention-bwd")  # one kernel logged: no dQ pass


def test_one_pass_backward_cross_lengths_groups_and_a_lone_dq(device):
    """The one pass with queries longer than keys and shorter (rows past either length add nothing), with
    grouped K/V heads (each query head's dQ from its group's K), and asked for dq alone (two-pass dQ)."""
    for sq, sk in ((77, 33), (17, 50)):
        q, k, v = random_qkv(1, 2, sq, sk, 64, torch.float16, device, seed=32)
        _check_one_pass(q, k, v, 1, f"Sq={sq} Sk={sk}")
    q, _, _ = random_qkv(1, 4, 33, 33, 64, torch.bfloat16, device, seed=33)
    _, k, v = random_qkv(1, 2, 33, 33, 64, torch.bfloat16, device, seed=34)
    _check_one_pass(q, k, v, 2, "group 2")
    do = _grad_out(q, 35)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=device)
    o = at._attention_forward(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1), False, 0.125, lse=lse)
    dq, dk, dv = ab.attention_backward(do, q, k, v, o, lse, False, 0.125, group=2, need_dkdv=False, atomic_dq=True)
    assert dk is None and dv is None
    assert last_launch("attention-bwd").startswith("full, dq: BLOCK_M=")


def _check_one_pass(q, k, v, group, what):
    """The one pass against float64 autograd, from a forward on K/V repeated per query head."""
    assert "atomic dq" in _check_direct(q, k, v, group, False, f"one pass {what}", seed=36, atomic_dq=True)


def _check_direct(q, k, v, group, causal, what, seed=37, **kwargs):
    """attention_backward with `kwargs` against float64 autograd, from a forward on K/V repeated per query
    head; returns its launch record."""
    do = _grad_out(q, seed)
    scale = 1 / math.sqrt(q.shape[-1])
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    kr, vr = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    o = at._attention_forward(q, kr, vr, causal, scale, lse=lse)
    grads = ab.attention_backward(do, q, k, v, o, lse, causal, scale, group=group, **kwargs)

    def ref(q, k, v):
        return attention_ref(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), causal, scale)

    for name, grad, r in zip(("dq", "dk", "dv"), grads, reference_grads(ref, [q, k, v], do)):
        assert_grad_close(grad, r, q.dtype, f"{what} {name}", GRADIENT_ELEMENT_TOLERANCE)
    return last_launch("attention-bwd")


@pytest.mark.parametrize("atomic_dq", [False, True])
@pytest.mark.parametrize(
    "seq,head_dim,causal,dtype",
    [(37, 64, False, torch.float16), (21, 32, True, torch.bfloat16), (50, 16, True, torch.float16)],
)
def test_backward_through_tma_descriptors(seq, head_dim, causal, dtype, atomic_dq, device):
    """tma=True: the streamed tiles through descriptors made on the device (rows past the length read as
    zeros), and the one pass's dQ sums in their transposed layout, whose rows (37, 21 and 50 queries) are
    padded to 16 bytes; grouped K/V heads."""
    q, k, v = random_qkv(1, 4, seq, seq, head_dim, dtype, device, seed=38, kv_heads=2)
    what = f"tma S={seq} D={head_dim} causal={causal} atomic_dq={atomic_dq} {dtype}"
    launch = _check_direct(q, k, v, 2, causal, what, tma=True, atomic_dq=atomic_dq)
    mask = "causal" if causal else "full"
    if atomic_dq:
        assert launch.startswith(f"{mask}, dk/dv + atomic dq, TMA: BLOCK_M=") and "; " not in launch
    else:
        assert launch.startswith(f"{mask}, dk/dv, TMA: BLOCK_M=") and f"; {mask}, dq, TMA: BLOCK_M=" in launch


@pytest.mark.parametrize("sq,sk", [(37, 21), (9, 50)])
def test_backward_through_tma_cross_lengths(sq, sk, device):
    """tma=True with queries longer than keys and shorter: each descriptor clips at its own length."""
    q, k, v = random_qkv(1, 2, sq, sk, 32, torch.float16, device, seed=43)
    for atomic_dq in (False, True):
        _check_direct(q, k, v, 1, False, f"tma Sq={sq} Sk={sk} atomic_dq={atomic_dq}", tma=True, atomic_dq=atomic_dq)


def test_backward_through_tma_needs_aligned_inputs(device):
    """A tensor whose rows start off a 16-byte boundary cannot be read by TMA: a clear error, not a wrong
    gradient."""
    q, k, v = random_qkv(1, 2, 16, 16, 16, torch.float16, device, seed=40)
    shifted = torch.empty(q.numel() + 1, dtype=q.dtype, device=device)[1:].view(q.shape)
    shifted.copy_(q)
    assert ab.tma_fits(q, k, v) and not ab.tma_fits(shifted)
    rows_of_40_bytes = torch.empty(1, 2, 16, 20, dtype=torch.float16, device=device)[..., :16]
    assert not ab.tma_fits(q.transpose(-1, -2)) and not ab.tma_fits(rows_of_40_bytes)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=device)
    o = at._attention_forward(q, k, v, False, 0.25, lse=lse)
    with pytest.raises(ValueError, match="16-byte aligned"):
        ab.attention_backward(o, shifted, k, v, o, lse, False, 0.25, tma=True)


def test_which_backward_takes_tma_by_default(device):
    """tma=None: the two passes through TMA on a GPU that has it, where the inputs fit; the one pass never;
    nothing under the interpreter (its tests ask for TMA where they test it)."""
    q, k, v = random_qkv(1, 2, 32, 32, 64, torch.float16, device, seed=38)
    gpu_with_tma = device.type == "cuda" and torch.cuda.get_device_capability()[0] >= 9
    assert ab.takes_tma(False, q, k, v) == gpu_with_tma
    assert not ab.takes_tma(True, q, k, v)
    shifted = torch.empty(v.numel() + 1, dtype=v.dtype, device=device)[1:].view(v.shape)
    assert not ab.takes_tma(False, q, k, shifted)  # rows off a 16-byte boundary: not a TMA layout
    launch = _check_direct(q, k, v, 1, True, "default tma")
    assert (", TMA: " in launch) == gpu_with_tma, launch


def test_tma_builds_move_their_tiles_by_tma_for_sm90():
    """The GPU builds (compiled ahead of time in a fresh process without the interpreter): with TMA the
    streamed tiles come by TMA loads and the one pass's dQ leaves by TMA's bulk reduction, not by per-thread
    atomics; without, neither appears."""
    builds = run_build_script("backward_tma_builds.py")
    for kernel in ("dkdv", "dkdv+dq", "dq"):
        plain, tma = builds[kernel], builds[f"{kernel} tma"]
        assert plain["UTMALDG"] == 0 and plain["UTMAREDG"] == 0, kernel
        assert tma["UTMALDG"] > 0, f"{kernel} with TMA loads no tile by TMA: {tma}"
    assert builds["dkdv+dq"]["REDG"] > 0 and builds["dkdv+dq tma"]["REDG"] == 0
    assert builds["dkdv+dq tma"]["UTMAREDG"] > 0
    assert builds["dq tma"]["LDGSTS"] == 0  # K and V: every streamed tile by TMA
    assert builds["dkdv tma"]["spill_bytes"] == 0 and builds["dq tma"]["spill_bytes"] == 0


@pytest.mark.parametrize("sq,sk", [(1, 17), (17, 77), (77, 33)])
def test_attention_backward_cross_lengths(sq, sk, device):
    q, k, v = random_qkv(1, 2, sq, sk, 64, torch.float16, device, seed=2)
    _check(q, k, v, _grad_out(q, 3), False, f"Sq={sq} Sk={sk}", scale=0.3)


def test_attention_backward_small_head_dims_and_batches(device):
    q, k, v = random_qkv(2, 3, 24, 24, 32, torch.bfloat16, device, seed=4)
    _check(q, k, v, _grad_out(q, 5), True, "B=2 H=3 D=32")
    q, k, v = random_qkv(1, 1, 20, 20, 16, torch.float16, device, seed=6)
    _check(q, k, v, _grad_out(q, 7), False, "D=16")


def test_attention_backward_strided_inputs_and_an_expanded_output_gradient(device):
    # (batch, seq, heads, dim) storage seen as (batch, heads, seq, dim); loss = sum: dO arrives expanded.
    g = torch.Generator().manual_seed(8)
    qkv = torch.randn(2, 50, 3, 2, 64, generator=g).to(device=device, dtype=torch.bfloat16)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    attention(*leaves, causal=True).sum().backward()
    refs = reference_grads(lambda q, k, v: attention_ref(q, k, v, True), [q, k, v], torch.ones_like(q))
    for name, t, ref in zip(("dq", "dk", "dv"), leaves, refs):
        assert_grad_close(t.grad, ref, torch.bfloat16, f"strided {name}", GRADIENT_ELEMENT_TOLERANCE)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dkdv,dq", [((32, 32), (64, 64)), ((32, 64), (64, 32)), ((16, 64), (32, 32))])
def test_forced_backward_configs(dkdv, dq, causal, device):
    """Other block shapes than the interpreter's config: 64 keys (whole blocks, dQ's unmasked single loop)
    and 70 (a ragged last block)."""
    for seq in (64, 70):
        q, k, v = random_qkv(1, 2, seq, seq, 64, torch.float16, device, seed=9)
        do = _grad_out(q, 10)
        lse = torch.empty(q.shape[:3], dtype=torch.float32, device=device)
        scale = 1 / math.sqrt(64)
        o = at._attention_forward(q, k, v, causal, scale, lse=lse)
        grads = ab.attention_backward(
            do, q, k, v, o, lse, causal, scale, dkdv_config=ab.bwd_config(*dkdv, 4, 1),
            dq_config=ab.bwd_config(*dq, 4, 1),
        )  # fmt: skip
        refs = reference_grads(lambda q, k, v, c=causal: attention_ref(q, k, v, c), [q, k, v], do)
        for name, grad, ref in zip(("dq", "dk", "dv"), grads, refs):
            assert_grad_close(
                grad,
                ref,
                torch.float16,
                f"S={seq} dk/dv {dkdv} dq {dq} causal={causal} {name}",
                GRADIENT_ELEMENT_TOLERANCE,
            )


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_kv_heads(causal, device):
    """The backward's GQA form: 4 query heads on 2 K/V heads (group 2), dK/dV summed over each group. The
    forward has no grouped heads yet: it runs on K/V repeated per query head."""
    q, _, _ = random_qkv(1, 4, 33, 33, 64, torch.bfloat16, device, seed=11)
    _, k, v = random_qkv(1, 2, 33, 33, 64, torch.bfloat16, device, seed=12)
    do = _grad_out(q, 13)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=device)
    k4, v4 = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    o = at._attention_forward(q, k4, v4, causal, 0.125, lse=lse)
    grads = ab.attention_backward(do, q, k, v, o, lse, causal, 0.125, group=2)

    def ref(q, k, v):
        return attention_ref(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1), causal, 0.125)

    for name, grad, r in zip(("dq", "dk", "dv"), grads, reference_grads(ref, [q, k, v], do)):
        assert_grad_close(grad, r, torch.bfloat16, f"group 2 causal={causal} {name}", GRADIENT_ELEMENT_TOLERANCE)
    with pytest.raises(ValueError, match="4 query heads do not make groups of 3 over 2 K/V heads"):
        ab.attention_backward(do, q, k, v, o, lse, causal, 0.125, group=3)


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_heads_through_the_public_function(causal, device):
    """attention() with fewer K/V heads than query heads (6 on 2): the forward reads each K/V head for its
    group, the backward sums dK/dV over the group; a decode-length query (S 3) takes this path too."""
    for seq in (33, 3):
        q, k, v = random_qkv(1, 6, seq, seq, 64, torch.float16, device, seed=21, kv_heads=2)
        _check(q, k, v, _grad_out(q, 22), causal, f"GQA 6/2 S={seq} causal={causal}")


def test_causal_backward_with_a_shorter_query_is_a_clear_error(device):
    q, k, v = random_qkv(1, 2, 8, 16, 64, torch.float16, device, seed=23)
    leaves = [t.requires_grad_() for t in (q, k, v)]
    with pytest.raises(ValueError, match="backward of causal attention takes equal q and k lengths"):
        attention(*leaves, causal=True)


def test_only_the_inputs_that_require_grad_get_one(device):
    q, k, v = random_qkv(1, 2, 30, 30, 64, torch.float16, device, seed=14)
    do = _grad_out(q, 15)
    refs = reference_grads(lambda q, k, v: attention_ref(q, k, v, True), [q, k, v], do)
    qr = q.clone().requires_grad_()
    (dq,) = torch.autograd.grad(attention(qr, k, v, causal=True), [qr], do)
    assert_grad_close(dq, refs[0], torch.float16, "dq alone", GRADIENT_ELEMENT_TOLERANCE)
    assert "dk/dv" not in last_launch("attention-bwd")
    vr = v.clone().requires_grad_()
    (dv,) = torch.autograd.grad(attention(q, k, vr, causal=True), [vr], do)
    assert_grad_close(dv, refs[2], torch.float16, "dv alone", GRADIENT_ELEMENT_TOLERANCE)
    assert "dq" not in last_launch("attention-bwd")


def test_gradients_are_the_same_on_every_run(device):
    """Two passes, each gradient element written once by one program: bit for bit the same gradients."""
    q, k, v = random_qkv(1, 2, 45, 45, 64, torch.bfloat16, device, seed=16)
    do = _grad_out(q, 17)
    runs = []
    for _ in range(2):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        runs.append(torch.autograd.grad(attention(*leaves, causal=True), leaves, do))
    assert all(torch.equal(a, b) for a, b in zip(*runs))


# ----------------------------------------------------------------------------------------------------------
# What the forward stores and saves
# ----------------------------------------------------------------------------------------------------------


def test_forward_only_calls_store_and_save_nothing(device, monkeypatch):
    calls = []
    real = at._attention_forward

    def spy(*args, **kwargs):
        calls.append(kwargs.get("lse"))
        return real(*args, **kwargs)

    monkeypatch.setattr(at, "_attention_forward", spy)
    q, k, v = random_qkv(1, 2, 20, 20, 64, torch.float16, device, seed=18)
    assert attention(q, k, v).grad_fn is None
    qr = q.clone().requires_grad_()
    with torch.no_grad():
        assert attention(qr, k, v).grad_fn is None
    with torch.inference_mode():
        attention(qr, k, v)
    assert calls == [None] * 3, "no log-sum-exp stored for inference"
    assert ", lse:" not in last_launch("attention")

    out = attention(qr, k, v, causal=True)
    lse = calls[-1]
    assert lse.dtype == torch.float32 and lse.shape == (1, 2, 20)
    assert torch.allclose(lse.double(), _lse_ref(q, k, True, 1 / 8), atol=1e-5)
    saved = out.grad_fn.saved_tensors  # q, k, v, O, LSE (the same storage, no copies): never P
    assert [t.data_ptr() for t in saved] == [t.data_ptr() for t in (qr, k, v, out, lse)]
    assert last_launch("attention").endswith("lse: BLOCK_M=32, BLOCK_N=16, WARP_SPECIALIZE=False, warps=4, stages=2")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq,packed", [(70, False), (128, True)])
def test_the_forward_stores_the_log_sum_exp(seq, packed, causal, device, assert_close):
    # Packed rows (contiguous, lengths multiples of 128) and per-head descriptors store it alike.
    q, k, v = random_qkv(1, 2, seq, seq, 64, torch.bfloat16, device, seed=19)
    lse = torch.full(q.shape[:3], float("nan"), dtype=torch.float32, device=device)
    out = at._attention_forward(q, k, v, causal, 0.1, lse=lse)
    assert ("packed rows" in last_launch("attention")) == packed
    assert torch.allclose(lse.double(), _lse_ref(q, k, causal, 0.1), atol=1e-5)
    assert torch.equal(out, at._attention_forward(q, k, v, causal, 0.1)), "the output does not change"
    with pytest.raises(ValueError, match="does not store the log-sum-exp"):
        at._attention_forward(q, k, v, causal, 0.1, lse=lse, kernel="gluon")


def test_backward_pruning_rules():
    gpu_dkdv = [ab.bwd_config(m, n, w, s) for m in (16, 32, 64) for n in (64, 128) for w in (4, 8) for s in (2, 3, 4)]
    for head_dim in (64, 128, 256):
        kept = ab.prune_dkdv_configs(gpu_dkdv, {"SK": 4096}, HEAD_DIM=head_dim)
        assert kept, head_dim
        for c in kept:
            m, n = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
            assert n % m == 0 and (2 * n * head_dim + 2 * n * m) // (32 * c.num_warps) <= 160
            assert (2 * n + 2 * m * c.num_stages) * head_dim * 2 <= 200 * 1024
    gpu_dq = [ab.bwd_config(m, n, w, s) for m in (64, 128) for n in (16, 32, 64) for w in (4, 8) for s in (2, 3)]
    for head_dim in (64, 128):
        kept = ab.prune_dq_configs(gpu_dq, {"SQ": 4096}, HEAD_DIM=head_dim)
        assert kept and all(c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0 for c in kept)
    assert all(c.kwargs["BLOCK_M"] <= 64 for c in ab.prune_dq_configs(gpu_dq, {"SQ": 20}, HEAD_DIM=64))


# ----------------------------------------------------------------------------------------------------------
# GPU, full size
# ----------------------------------------------------------------------------------------------------------


def _gpu_check(b, h, s, d, dtype, causal, seed, deterministic=True):
    q, k, v = random_qkv(b, h, s, s, d, dtype, "cuda", seed=seed)
    do = _grad_out(q, seed + 1)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    grads = torch.autograd.grad(attention(*leaves, causal=causal, deterministic=deterministic), leaves, do)
    assert ("atomic dq" in last_launch("attention-bwd")) != deterministic
    # The two passes take TMA by default on a Hopper-or-newer GPU; the one pass never.
    tma_expected = deterministic and torch.cuda.get_device_capability()[0] >= 9
    assert (", TMA: " in last_launch("attention-bwd")) == tma_expected, last_launch("attention-bwd")
    assert "gluon" not in last_launch("attention") and ", lse:" in last_launch("attention")
    for i in range(b):  # the float32 reference one batch at a time, to bound its memory
        refs = reference_grads(lambda q, k, v: attention_ref(q, k, v, causal), [t[i : i + 1] for t in (q, k, v)],
                               do[i : i + 1])  # fmt: skip
        for name, grad, ref in zip(("dq", "dk", "dv"), grads, refs):
            assert_grad_close(
                grad[i : i + 1],
                ref,
                dtype,
                f"B{b} H{h} S{s} D{d} causal={causal} {name} batch {i}",
                GRADIENT_ELEMENT_TOLERANCE,
            )


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_attention_backward_gpu_full_size(head_dim, causal, dtype):
    _gpu_check(2, 16, 4096, head_dim, dtype, causal, seed=20)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq,head_dim", [(1000, 64), (4097, 128), (333, 256), (77, 32)])
def test_attention_backward_gpu_ragged(seq, head_dim, causal):
    _gpu_check(1, 4, seq, head_dim, torch.bfloat16, causal, seed=22)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq,head_dim", [(4096, 128), (4097, 64), (333, 256)])
def test_one_pass_backward_gpu(seq, head_dim, causal):
    _gpu_check(2, 8, seq, head_dim, torch.bfloat16, causal, seed=26, deterministic=False)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("atomic_dq", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq,head_dim", [(4096, 128), (4097, 64), (333, 256)])
def test_backward_through_tma_gpu(seq, head_dim, causal, atomic_dq):
    """tma=True at full size on the GPU (TMA's own bulk reduction for the one pass's dQ, which the interpreter
    stands in for with atomics), grouped K/V heads."""
    q, k, v = random_qkv(1, 8, seq, seq, head_dim, torch.bfloat16, "cuda", seed=41, kv_heads=4)
    what = f"tma S={seq} D={head_dim} causal={causal} atomic_dq={atomic_dq}"
    assert ", TMA: " in _check_direct(q, k, v, 2, causal, what, tma=True, atomic_dq=atomic_dq)


def _check_forced_configs(head_dim, seed, launches):
    """Each (label, attention_backward keyword arguments) of `launches` on one forward, causal and not, against
    float32."""
    q, k, v = random_qkv(1, 8, 1024, 1024, head_dim, torch.bfloat16, "cuda", seed=seed)
    do = _grad_out(q, seed + 1)
    scale = 1 / math.sqrt(head_dim)
    for causal in (False, True):
        lse = torch.empty(q.shape[:3], dtype=torch.float32, device="cuda")
        o = at._attention_forward(q, k, v, causal, scale, lse=lse)
        refs = reference_grads(lambda q, k, v, c=causal: attention_ref(q, k, v, c), [q, k, v], do)
        for label, kwargs in launches:
            grads = ab.attention_backward(do, q, k, v, o, lse, causal, scale, **kwargs)
            for name, grad, ref in zip(("dq", "dk", "dv"), grads, refs):
                assert_grad_close(
                    grad, ref, torch.bfloat16, f"{label} causal={causal} {name}", GRADIENT_ELEMENT_TOLERANCE
                )


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("head_dim", [64, 128])
def test_every_one_pass_candidate_gpu(head_dim):
    """Each one-pass candidate the autotuner may pick, forced, causal and not, with and without TMA."""
    configs = ab.prune_dkdv_dq_configs(ab.dkdv_dq_configs(), {"SK": 1024}, HEAD_DIM=head_dim)
    launches = [(str(c), {"atomic_dq": True, "dkdv_config": c, "tma": False}) for c in configs]
    launches += [(f"{c}, TMA", {"atomic_dq": True, "dkdv_config": c, "tma": True}) for c in configs]
    _check_forced_configs(head_dim, 27, launches)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("head_dim", [64, 128])
def test_every_backward_candidate_gpu(head_dim):
    """Each dK/dV and dQ candidate the autotuners may pick, forced, causal and not, with and without TMA."""
    dkdv = ab.prune_dkdv_configs(ab.dkdv_configs(), {"SK": 1024}, HEAD_DIM=head_dim)
    dq = ab.prune_dq_configs(ab.dq_configs(), {"SQ": 1024}, HEAD_DIM=head_dim)
    pairs = [(dkdv[i % len(dkdv)], dq[i % len(dq)]) for i in range(max(len(dkdv), len(dq)))]
    launches = [(f"{c1} / {c2}", {"dkdv_config": c1, "dq_config": c2, "tma": False}) for c1, c2 in pairs]
    launches += [(f"{c1} / {c2}, TMA", {"dkdv_config": c1, "dq_config": c2, "tma": True}) for c1, c2 in pairs]
    _check_forced_configs(head_dim, 24, launches)
