"""Decode and grouped-query prefill through the tiers on the CPU: real providers checked (Triton through its
interpreter), wrong ones caught, and the reasons of those that cannot run here or cannot take a layout."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from cpu_run import FAST, cpu_context

from tierbench.suite.measure.runner import RunContext, measure_case
from tierbench.suite.ops import attention, decode
from tierbench.suite.providers.base import Unavailable, call_provider
from tierbench.suite.tiers import interpreted
from tierbench.timing import CudaEventTimer

CPU = torch.device("cpu")
OPS = {op.name: op for op in (attention.OP, decode.OP, decode.PAGED_OP)}

RAGGED = decode.make_case(
    batch=2, heads=4, kv_heads=2, q_len=1, kv_len=160, head_dim=32, dtype="bf16", lengths="ragged"
)
PAGED = decode.make_case(batch=2, heads=4, kv_heads=1, q_len=4, kv_len=100, head_dim=32, dtype="fp16", page_size=32)
GQA = attention.make_case(2, 4, 64, 32, True, "bf16", "fwd", kv_heads=2, name="tiny")
CHUNK = attention.make_case(1, 4, 24, 32, True, "fp16", "fwd", kv_heads=2, kv_seq=80)


def _ctx(tmp_path) -> RunContext:
    return cpu_context(tmp_path)


def _measure(case, providers, tmp_path) -> dict:
    return {r.provider: r for r in measure_case(case, providers, _ctx(tmp_path), OPS[case.op])}


@pytest.mark.slow
@pytest.mark.parametrize("case", [RAGGED, PAGED, GQA, CHUNK], ids=["ragged", "paged", "gqa", "chunk"])
def test_every_tier_that_runs_on_a_cpu_is_checked(case, catalog, tmp_path):
    providers = [p for p in catalog.providers() if p.op == case.op]
    records = _measure(case, providers, tmp_path)
    assert records["compile"].status == "ok" and records["compile"].rel_error <= records["compile"].tolerance
    triton = records["triton"]
    if interpreted():  # checked through the interpreter, not timed
        assert triton.status == "skipped" and "correct, not timed" in triton.reason
        assert triton.rel_error is not None and triton.rel_error <= triton.tolerance
        assert ("split-kv" in triton.launch) == (case.family == "decode"), triton.launch
    else:
        assert triton.status == "skipped" and "needs a CUDA GPU, or TRITON_INTERPRET=1" in triton.reason
    for name in ("flash-attn-2", "flash-attn-3", "flash-attn-4", "sdpa-cudnn", "sdpa-efficient"):
        assert records[name].status == "skipped" and records[name].reason, name
    for name in ("sdpa-flash", "sdpa-math"):
        r = records[name]
        if case.op == "decode_paged":
            assert r.status == "skipped" and "SDPA takes no block table" in r.reason
        else:
            assert r.status == "ok" and r.rel_error <= r.tolerance and r.median_ms > 0, (name, r.reason)
    timed = [r for r in records.values() if r.status == "ok"]
    assert timed and all(r.gbps > 0 and r.flops == OPS[case.op].work(case).flops for r in timed)


GPU_CASES = [
    decode.make_case(batch=4, heads=32, kv_heads=8, q_len=1, kv_len=8192, head_dim=128, dtype="bf16"),
    decode.make_case(
        batch=4, heads=64, kv_heads=8, q_len=4, kv_len=5000, head_dim=128, dtype="fp16", lengths="ragged"
    ),  # fmt: skip
    decode.make_case(batch=4, heads=32, kv_heads=8, q_len=1, kv_len=8192, head_dim=128, dtype="bf16", page_size=256),
    decode.make_case(
        batch=3, heads=32, kv_heads=8, q_len=4, kv_len=3000, head_dim=128, dtype="bf16", page_size=16, lengths="ragged"
    ),  # fmt: skip
    attention.make_case(2, 32, 2048, 128, True, "bf16", "fwd", kv_heads=8, name="llama3-8b"),
    attention.make_case(1, 64, 512, 128, True, "bf16", "fwd", kv_heads=8, kv_seq=4096, name="llama3-70b"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c.label.replace(" ", "-"))
def test_every_tier_on_a_gpu_is_correct_or_says_why_not(case, catalog, tmp_path):
    """Full-size Llama-3 layouts: every provider ok and correct, or skipped with its reason; none wrong."""
    device = torch.device("cuda")
    ctx = _ctx(tmp_path)
    ctx.device, ctx.timer = device, CudaEventTimer(FAST, device)
    providers = [p for p in catalog.providers() if p.op == case.op]
    records = {r.provider: r for r in measure_case(case, providers, ctx, OPS[case.op])}
    for name, r in records.items():
        print(f"{case.label} {name}: {r.status} {r.median_ms} {r.gbps} {r.reason[:200]}")
        assert r.status in ("ok", "skipped"), (name, r.status, r.reason)
        assert r.status == "skipped" or r.rel_error <= r.tolerance
    assert records["triton"].status == "ok" and records["compile"].status == "ok"
    if case.op == "decode_paged":
        assert all("block table" in records[n].reason for n in ("sdpa-flash", "sdpa-math"))


def _mine(name: str, case, fn):
    return call_provider(name, "mine", OPS[case.op], fn)


def test_a_decode_that_ignores_the_sequence_lengths_is_incorrect(tmp_path):
    def all_keys(q, k, v, lens, causal, scale):
        return decode.decode_math(q, k, v, torch.full_like(lens, k.shape[2]), causal, scale)

    records = _measure(
        RAGGED, [_mine("right", RAGGED, decode.decode_math), _mine("all-keys", RAGGED, all_keys)], tmp_path
    )
    assert records["right"].status == "ok"
    assert records["all-keys"].status == "incorrect" and "tolerance" in records["all-keys"].reason


def test_a_paged_decode_that_ignores_the_block_table_is_incorrect(tmp_path):
    def in_order(q, k, v, lens, table, causal, scale):
        return decode.decode_paged_math(q, k, v, lens, torch.arange(table.numel()).view_as(table), causal, scale)

    providers = [_mine("right", PAGED, decode.decode_paged_math), _mine("in-order", PAGED, in_order)]
    records = _measure(PAGED, providers, tmp_path)
    assert records["right"].status == "ok"
    assert records["in-order"].status == "incorrect"


def test_top_left_causal_is_wrong_for_speculative_tokens(tmp_path):
    """SDPA's is_causal aligns the mask top-left: four new tokens would miss most of the cache."""
    full = decode.make_case(batch=2, heads=4, kv_heads=2, q_len=4, kv_len=64, head_dim=32, dtype="fp16")

    def top_left(q, k, v, lens, causal, scale):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)

    def bottom_right(q, k, v, lens, causal, scale):
        mask = decode.length_mask(lens, q.shape[2], k.shape[2], causal)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)

    providers = [_mine("top-left", full, top_left), _mine("bottom-right", full, bottom_right)]
    records = _measure(full, providers, tmp_path)
    assert records["top-left"].status == "incorrect" and records["bottom-right"].status == "ok"


def test_sdpa_gets_a_mask_only_where_a_row_misses_a_key():
    one = decode.make_case(batch=2, heads=4, kv_heads=2, q_len=1, kv_len=64, head_dim=32, dtype="bf16")
    assert not decode.needs_mask(one)
    assert decode.needs_mask(RAGGED) and decode.needs_mask(PAGED)
    mask = decode.length_mask(torch.tensor([5, 3], dtype=torch.int32), 2, 6, causal=True)
    assert mask.shape == (2, 1, 2, 6)
    assert mask[0, 0].int().tolist() == [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]]
    assert mask[1, 0].int().tolist() == [[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]]
    assert (
        decode.length_mask(torch.tensor([4], dtype=torch.int32), 2, 6, False)[0, 0].int().tolist()
        == [[1, 1, 1, 1, 0, 0]] * 2
    )


# -- flash-attn's KV-cache entry points, with stand-ins for the packages ------------------------------------


def _cuda(name: str, op: str):
    return next(p for p in decode.flash_attn_providers(list(OPS.values())) if p.name == name and p.op == op)


def test_the_cuda_tier_lists_three_kvcache_entry_points_per_layout():
    listed = [(p.name, p.op) for p in decode.flash_attn_providers(list(OPS.values()))]
    assert listed == [
        (n, op) for op in ("decode", "decode_paged") for n in ("flash-attn-2", "flash-attn-3", "flash-attn-4")
    ]
    assert all(p.tier == "cuda" for p in decode.flash_attn_providers(list(OPS.values())))


def test_on_a_cpu_flash_attn_names_what_to_install_or_the_device():
    for name in ("flash-attn-2", "flash-attn-3", "flash-attn-4"):
        reason = _cuda(name, "decode").why_unavailable(RAGGED, CPU)
        assert "package not installed" in reason or "needs a CUDA GPU" in reason, reason


@pytest.fixture
def fake_packages(monkeypatch):
    """Every flash-attn module 'imports', its function is `fns[name]`, and the GPU is a 9.0."""
    fns = {}

    def with_kvcache(q, k_cache, v_cache, cache_seqlens=None, block_table=None, softmax_scale=None, causal=False):
        fns.setdefault("calls", []).append((q, k_cache, v_cache, cache_seqlens, block_table, softmax_scale, causal))
        return torch.zeros_like(q)

    fns["flash_attn_with_kvcache"] = with_kvcache
    monkeypatch.setattr(decode, "import_problem", lambda module, install: None)
    monkeypatch.setattr(decode, "attribute", lambda module, name: fns.get(name))
    monkeypatch.setattr(decode, "on_gpu", lambda device: (9, 0))
    return fns


def test_flash_attn_2_takes_paged_caches_in_blocks_of_256_only(fake_packages):
    why = _cuda("flash-attn-2", "decode_paged").why_unavailable
    assert "page_size 32 unsupported: flash-attn-2 takes paged KV caches in blocks of a multiple of 256" in why(
        PAGED, CPU
    )
    big = decode.make_case(batch=2, heads=4, kv_heads=1, q_len=1, kv_len=600, head_dim=32, dtype="fp16", page_size=512)
    assert why(big, CPU) is None
    assert _cuda("flash-attn-2", "decode").why_unavailable(RAGGED, CPU) is None


def test_a_build_whose_entry_point_takes_no_page_table_runs_contiguous_caches_only(fake_packages):
    # The stand-in has block_table, not flash-attn 3's page_table keyword.
    why = _cuda("flash-attn-3", "decode_paged").why_unavailable(PAGED, CPU)
    assert (
        why
        == "flash-attn-3: flash_attn_interface.flash_attn_with_kvcache of this install takes no page_table (paged KV)"
    )
    assert _cuda("flash-attn-3", "decode").why_unavailable(RAGGED, CPU) is None


def test_the_packages_get_sequence_first_views_of_the_cache_without_a_copy(fake_packages):
    provider = _cuda("flash-attn-2", "decode_paged")
    inputs = decode.PAGED_OP.make_inputs(PAGED, CPU, torch.Generator().manual_seed(0))
    call = provider.prepare(inputs, decode.options(PAGED), PAGED)
    out = call()
    q, k, v, lens, table, scale, causal = fake_packages["calls"][-1]
    assert k.data_ptr() == inputs["k_cache"].data_ptr() and k.is_contiguous() and tuple(k.shape) == (8, 32, 1, 32)
    assert tuple(q.shape) == (2, 4, 4, 32) and q.data_ptr() == inputs["q"].data_ptr()
    assert lens is inputs["cache_seqlens"] and table is inputs["block_table"] and causal is True
    assert tuple(provider.to_op_layout(out).shape) == tuple(inputs["q"].shape)


def test_an_assertion_of_flash_attn_4_becomes_the_skip_reason(fake_packages, monkeypatch):
    def varlen(q, k, v, seqused_k=None, page_table=None, softmax_scale=None, causal=False):
        raise AssertionError("paged KV not supported on SM 9.0")

    fake_packages["flash_attn_varlen_func"] = varlen
    assert "seqused_k" in inspect.signature(varlen).parameters
    provider = _cuda("flash-attn-4", "decode_paged")
    assert provider.why_unavailable(PAGED, CPU) is None
    inputs = decode.PAGED_OP.make_inputs(PAGED, CPU, torch.Generator().manual_seed(0))
    with pytest.raises(Unavailable, match="flash-attn-4 .* cannot run this case: paged KV not supported on SM 9.0"):
        provider.prepare(inputs, decode.options(PAGED), PAGED)
