"""Ops: seeded non-zero inputs, references that agree with independent formulas, FLOP and byte models."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tierbench.suite.catalog import build
from tierbench.suite.ops.attention import attention_ref
from tierbench.suite.ops.base import Case

OPS = build(entry_points=False).ops


def _case(op: str, **params) -> Case:
    family = OPS[op].family
    return Case(op, family, {"dtype": "bf16", "mode": "fwd", **params}, "t", 1.0)


def _reference(case: Case, inputs):
    op = OPS[case.op]
    return op.reference(*op.args(inputs), **op.options(case))


def test_matmul_work_model():
    w = OPS["matmul"].work(_case("matmul", m=4096, n=4096, k=4096))
    assert w.flops == 2 * 4096**3
    assert w.min_bytes == 3 * 4096 * 4096 * 2


def test_matmul_work_model_per_pass():
    """The backward is two products (4MNK), reading A, B and dC and writing dA and dB; fwd_bwd is both."""
    m, n, k = 4096, 2048, 1024
    bwd = OPS["matmul"].work(_case("matmul", m=m, n=n, k=k, mode="bwd"))
    both = OPS["matmul"].work(_case("matmul", m=m, n=n, k=k, mode="fwd_bwd"))
    assert bwd.flops == 4 * m * n * k
    assert bwd.min_bytes == (2 * (m * k + k * n) + m * n) * 2
    assert both.flops == 6 * m * n * k and both.min_bytes == bwd.min_bytes + (m * k + k * n + m * n) * 2


def test_attention_backward_counts_flash_attentions_five_products():
    params = dict(batch=1, heads=8, seq=2048, head_dim=64, causal=True)
    fwd = OPS["attention"].work(_case("attention", **params))
    bwd = OPS["attention"].work(_case("attention", mode="bwd", **params))
    assert bwd.flops == 2.5 * fwd.flops and bwd.min_bytes == 2 * fwd.min_bytes


def test_attention_work_model_halves_when_causal():
    params = dict(batch=4, heads=16, seq=4096, head_dim=128)
    full = OPS["attention"].work(_case("attention", causal=False, **params))
    causal = OPS["attention"].work(_case("attention", causal=True, **params))
    assert full.flops == 4 * 4 * 16 * 4096 * 4096 * 128
    assert causal.flops == full.flops / 2
    assert full.min_bytes == causal.min_bytes == 4 * (4 * 16 * 4096 * 128) * 2


@pytest.mark.parametrize("op, n_params", [("layer_norm", 2), ("rms_norm", 1), ("bias_gelu_layer_norm", 3)])
def test_norm_bytes_are_input_plus_output_plus_parameters(op, n_params):
    w = OPS[op].work(_case(op, rows=16384, hidden=4096))
    assert w.min_bytes == (2 * 16384 * 4096 + n_params * 4096) * 2


def test_inputs_are_seeded_random_and_never_zero():
    case = _case("matmul", m=64, n=32, k=48)
    make = OPS["matmul"].make_inputs
    a1 = make(case, torch.device("cpu"), torch.Generator().manual_seed(case.seed(0)))
    a2 = make(case, torch.device("cpu"), torch.Generator().manual_seed(case.seed(0)))
    b = make(case, torch.device("cpu"), torch.Generator().manual_seed(case.seed(1)))
    assert torch.equal(a1["a"], a2["a"]) and not torch.equal(a1["a"], b["a"])
    assert a1["a"].dtype == torch.bfloat16 and a1["a"].shape == (64, 48)
    assert (a1["a"] != 0).float().mean() > 0.99


def _inputs(case: Case):
    return OPS[case.op].make_inputs(case, torch.device("cpu"), torch.Generator().manual_seed(1))


def test_attention_reference_matches_sdpa_math_in_float64():
    for causal in (False, True):
        case = _case("attention", batch=2, heads=3, seq=37, head_dim=16, causal=causal)
        i = _inputs(case)
        ref = _reference(case, i)
        q, k, v = (i[n].double() for n in "qkv")
        expect = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1 / math.sqrt(16))
        assert ref.dtype == torch.float64
        torch.testing.assert_close(ref, expect, rtol=1e-10, atol=1e-10)


def test_attention_reference_chunks_rows_without_changing_the_result(monkeypatch):
    from tierbench.suite.ops import attention

    case = _case("attention", batch=1, heads=2, seq=50, head_dim=8, causal=True)
    i = _inputs(case)
    whole = _reference(case, i)
    monkeypatch.setattr(attention, "_REFERENCE_SCORE_ELEMENTS", 2 * 50 * 7)  # 7 query rows per chunk
    torch.testing.assert_close(_reference(case, i), whole, rtol=0, atol=0)


def test_attention_reference_grouped_heads_and_bottom_right_causal():
    # Independent formulas: SDPA's math backend with K/V repeated per query head, and an explicit mask in
    # which query i of 3 sees keys 0..i + 10 - 3.
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 6, 3, 16, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 2, 10, 16, generator=g, dtype=torch.float64) for _ in range(2))
    kr, vr = (t.repeat_interleave(3, dim=1) for t in (k, v))
    torch.testing.assert_close(attention_ref(q, k, v), F.scaled_dot_product_attention(q, kr, vr))
    mask = torch.arange(10)[None, :] <= torch.arange(3)[:, None] + 7
    expect = F.scaled_dot_product_attention(q, kr, vr, attn_mask=mask)
    torch.testing.assert_close(attention_ref(q, k, v, causal=True), expect)
    assert not torch.allclose(attention_ref(q, k, v, causal=True), attention_ref(q, k, v))
    with pytest.raises(ValueError, match=r"q's heads \(6\) must be a multiple of k's heads \(4\)"):
        attention_ref(q, torch.randn(2, 4, 10, 16), v)
    with pytest.raises(ValueError, match=r"causal needs seq_q <= seq_k, got seq_q=3, seq_k=2"):
        attention_ref(q, k[:, :, :2], v[:, :, :2], causal=True)


def test_norm_references():
    case = _case("bias_gelu_layer_norm", rows=5, hidden=33)
    i = _inputs(case)
    x = i["x"].double() + i["bias"].double()
    g = F.gelu(x)
    expect = F.layer_norm(g, (33,), i["weight"].double(), i["ln_bias"].double(), 1e-5)
    torch.testing.assert_close(_reference(case, i), expect)

    case = _case("rms_norm", rows=5, hidden=33)
    i = _inputs(case)
    x = i["x"].double()
    expect = F.rms_norm(x, (33,), i["weight"].double(), 1e-6)
    torch.testing.assert_close(_reference(case, i), expect)


def test_case_ids_are_stable_and_distinct():
    a = _case("matmul", m=1, n=2, k=3)
    assert a.case_id == "matmul/dtype=bf16,k=3,m=1,mode=fwd,n=2"
    assert a.seed(0) == _case("matmul", n=2, m=1, k=3).seed(0)
    assert a.seed(0) != a.seed(1)
