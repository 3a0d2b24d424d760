"""Decode and grouped-query prefill as cases: config, case ids, inputs laid out as serving stacks keep them,
the float64 reference, the work model and where it puts decode and prefill on one roofline."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from tierbench.suite.ceilings import Ceilings
from tierbench.suite.measure.plan import PlanError, cases_from_config, make_plan
from tierbench.suite.ops import attention, decode
from tierbench.suite.ops.attention import attention_ref

REPO = Path(__file__).resolve().parent.parent
CPU = torch.device("cpu")


def _inputs(case, seed: int = 0):
    op = decode.PAGED_OP if case.op == "decode_paged" else decode.OP
    return op, op.make_inputs(case, CPU, torch.Generator().manual_seed(seed))


def _small(**kw):
    params = dict(batch=3, heads=6, kv_heads=2, q_len=3, kv_len=40, head_dim=16, dtype="fp16")
    return decode.make_case(**(params | kw))


# -- case ids and suites --------------------------------------------------------------------------------


# Committed H200 runs of suite=attention and suite=all (named: runs a user makes in this checkout count not).
COMMITTED_ATTENTION_RUNS = ("h200-all", "h200-attention-9")


def _committed_attention_ids() -> set[str]:
    ids = set()
    for path in (REPO / "results" / "runs" / name / "measurements.jsonl" for name in COMMITTED_ATTENTION_RUNS):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            case = record.get("case", {})
            # The forward multi-head cases: later runs add backward passes and grouped-query layouts.
            if record.get("op") == "attention" and case.get("mode", "fwd") == "fwd" and "kv_heads" not in case:
                ids.add(record["case_id"])
    return ids


def test_todays_attention_cases_keep_their_case_ids(compose, catalog):
    """The committed H200 runs' attention cases are exactly suite=attention's multi-head cases, id for id."""
    committed = _committed_attention_ids()
    assert len(committed) == 48
    cases = [c for c, _ in cases_from_config(compose(["suite=attention"]), catalog)]
    multi_head = {c.case_id for c in cases if "kv_heads" not in c.params and "kv_seq" not in c.params}
    assert multi_head == committed
    # A layout that is not grouped names no kv_heads, so its id is today's.
    same = attention.make_case(8, 16, 2048, 128, True, "bf16", "fwd", kv_heads=16, kv_seq=2048)
    assert same.case_id == "attention/batch=8,causal=True,dtype=bf16,head_dim=128,heads=16,mode=fwd,seq=2048"


def test_suite_attention_has_llama3_grouped_layouts_at_2k_to_16k(compose, catalog):
    cases = [c for c, _ in cases_from_config(compose(["suite=attention"]), catalog)]
    grouped = [c for c in cases if "kv_heads" in c.params]
    layouts = {(c.params["heads"], c.params["kv_heads"], c.params["head_dim"]) for c in grouped}
    assert layouts == {(32, 8, 128), (64, 8, 128)}
    assert {c.params["seq"] for c in grouped} == {2048, 4096, 8192, 16384}
    assert all(c.params["batch"] * c.params["seq"] == 16384 for c in grouped)
    assert {c.params["causal"] for c in grouped} == {True, False}
    assert any(c.label == "llama3-70b B1 H64/8 S16384 D128 causal" for c in grouped)
    assert len({c.case_id for c in cases}) == len(cases)


def test_smoke_has_one_grouped_prefill_layout_and_one_decode_step_per_cache_layout(compose, catalog):
    # The decode family's own cases (the smoke's tiny model adds a decode step of its own as a part).
    cases = [c for c, _ in cases_from_config(compose(["suite=smoke", "model.enabled=false"]), catalog)]
    grouped = [c for c in cases if c.op == "attention" and "kv_heads" in c.params]
    assert grouped and all(c.params["kv_heads"] < c.params["heads"] for c in grouped)
    steps = [c for c in cases if c.family == "decode"]
    assert sorted(c.op for c in steps) == ["decode", "decode_paged"]
    assert all(c.params["q_len"] == 1 and c.params["kv_heads"] < c.params["heads"] for c in steps)
    (paged,) = [c for c in steps if c.op == "decode_paged"]
    assert paged.params["kv_len"] // paged.params["page_size"] > 1  # a block table of several blocks


def test_suite_decode_sweeps_kv_length_per_layout_batch_and_query_length(compose, catalog):
    cfg = compose(["suite=decode"])
    cases = [c for c, _ in cases_from_config(cfg, catalog)]
    assert {c.family for c in cases} == {"decode"} and {c.op for c in cases} == {"decode", "decode_paged"}
    assert {c.params["kv_len"] for c in cases} == {1024, 4096, 16384, 65536, 131072}
    assert {c.params["q_len"] for c in cases} == {1, 4} and {c.params["batch"] for c in cases} == {1, 64}
    assert {(c.params["heads"], c.params["kv_heads"]) for c in cases} == {(32, 8), (64, 8)}
    assert all(c.params["batch"] * c.params["kv_len"] <= cfg.decode.max_tokens for c in cases)
    assert {c.params.get("page_size") for c in cases} == {None, 256}
    assert len(cases) == len({c.case_id for c in cases}) == 64
    fp16 = [c for c, _ in cases_from_config(compose(["suite=decode", "decode.dtypes=[bf16,fp16]"]), catalog)]
    assert {c.params["dtype"] for c in fp16} == {"bf16", "fp16"} and len(fp16) == 128


def test_ragged_lengths_need_two_sequences(compose, catalog):
    cfg = compose(["suite=decode", "decode.lengths=[full,ragged]", "decode.batches=[1,64]", "decode.layouts=[paged]"])
    cases = [c for c, _ in cases_from_config(cfg, catalog)]
    assert {c.params["batch"] for c in cases if c.params["lengths"] == "ragged"} == {64}


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "decode.models=[{name:odd,heads:30,kv_heads:8,head_dim:128}]",
            "decode.models[odd]: heads=30 is not a multiple",
        ),
        (
            "decode.models=[{name:d,heads:8,kv_heads:8,head_dim:100}]",
            "decode.models[d]: head_dim=100 is not a multiple",
        ),
        ("decode.q_lens=[2048]", "decode.q_lens=[2048]: q_len 2048 exceeds the shortest of decode.kv_lens (1024)"),
        ("decode.page_size=0", "decode.page_size=0: sizes must be whole numbers >= 1"),
        ("decode.kv_lens=[0,1024]", "decode.kv_lens=[0, 1024]: sizes must be whole numbers >= 1"),
        ("attention.models=[{name:g,heads:12,kv_heads:5,head_dim:64}]", "attention.models[g]: heads=12 is not a"),
        ("attention.model_seq_lens=[-1]", "attention.model_seq_lens=[-1]: sizes must be whole numbers"),
    ],
)
def test_bad_values_fail_when_the_plan_is_made_naming_their_key(compose, catalog, override, message):
    suite = "suite=attention" if override.startswith("attention") else "suite=decode"
    with pytest.raises(PlanError, match=None) as info:
        make_plan(compose([suite, override]), catalog)
    assert message in str(info.value)


def test_a_case_that_cannot_be_a_decode_step_is_refused_before_any_allocation():
    with pytest.raises(ValueError, match="heads=6 must be a multiple of kv_heads=4"):
        _small(kv_heads=4)
    with pytest.raises(ValueError, match="q_len=50 exceeds kv_len=40"):
        _small(q_len=50)
    with pytest.raises(ValueError, match="mode must be 'fwd'"):
        _small(mode="bwd")
    with pytest.raises(ValueError, match="lengths must be 'full' or 'ragged'"):
        _small(lengths="short")
    with pytest.raises(ValueError, match="a contiguous cache has no page_size"):
        decode.OP.case(batch=1, heads=2, kv_heads=1, q_len=1, kv_len=8, head_dim=16, dtype="bf16", page_size=16)
    with pytest.raises(ValueError, match="page_size .* is required"):
        decode.PAGED_OP.case(batch=1, heads=2, kv_heads=1, q_len=1, kv_len=8, head_dim=16, dtype="bf16")
    with pytest.raises(ValueError, match="heads=12 must be a multiple of kv_heads=5"):
        attention.make_case(1, 12, 64, 64, False, "bf16", "fwd", kv_heads=5)
    with pytest.raises(ValueError, match="causal needs seq <= kv_seq"):
        attention.make_case(1, 4, 64, 64, True, "bf16", "fwd", kv_seq=32)


# -- inputs --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", [0, 16])
def test_inputs_have_the_signatures_shapes_and_the_serving_layout(page):
    case = _small(page_size=page, lengths="ragged")
    op, i = _inputs(case)
    assert list(i) == list(op.tensors)
    assert tuple(i["q"].shape) == (3, 6, 3, 16) and i["q"].transpose(1, 2).is_contiguous()
    rows = 3 * math.ceil(40 / 16) if page else 3
    cache_shape = (rows, 2, page, 16) if page else (3, 2, 40, 16)
    for name in ("k_cache", "v_cache"):
        t = i[name]
        assert tuple(t.shape) == cache_shape and t.dtype == torch.float16
        assert t.transpose(1, 2).is_contiguous(), f"{name}: sequence-first memory, as serving stacks keep it"
        assert (t != 0).float().mean() > 0.99
    assert i["cache_seqlens"].dtype == torch.int32 and i["cache_seqlens"].tolist() == [40, 30, 20]
    if page:
        table = i["block_table"]
        assert table.dtype == torch.int32 and tuple(table.shape) == (3, 3)
        assert sorted(table.flatten().tolist()) == list(range(9)) and table.flatten().tolist() != list(range(9))
    again = _inputs(case)[1]
    assert all(torch.equal(i[n], again[n]) for n in i)
    assert not torch.equal(i["k_cache"], _inputs(case, seed=1)[1]["k_cache"])


def test_ragged_lengths_keep_every_causal_row_a_key():
    shape = dict(batch=4, heads=2, kv_heads=1, q_len=4, kv_len=6, head_dim=16, dtype="bf16")
    assert decode.seq_lengths(decode.make_case(**shape, lengths="ragged")) == [6, 6, 5, 4]  # causal: >= q_len
    assert decode.seq_lengths(decode.make_case(**shape, lengths="ragged", causal=False)) == [6, 5, 4, 3]
    assert decode.seq_lengths(decode.make_case(**shape)) == [6] * 4


# -- reference -----------------------------------------------------------------------------------------


def _per_sequence(q, k, v, lens, causal):
    """Independent: attention_ref (K/V repeated per query head) on each sequence's own keys."""
    return torch.cat([attention_ref(q[b : b + 1], k[b : b + 1, :, :n], v[b : b + 1, :, :n], causal)
                      for b, n in enumerate(lens)])  # fmt: skip


@pytest.mark.parametrize("page, causal", [(0, True), (0, False), (16, True), (7, False)])
def test_reference_reads_each_sequence_as_the_kernels_do(page, causal):
    case = _small(page_size=page, lengths="ragged", causal=causal)
    op, i = _inputs(case)
    ref = op.reference(*op.args(i), **op.options(case))
    assert ref.dtype == torch.float64 and tuple(ref.shape) == (3, 6, 3, 16)
    lens = i["cache_seqlens"].tolist()
    k, v = i["k_cache"], i["v_cache"]
    if page:  # the blocks through the table, laid end to end
        k, v = (torch.stack([decode._keys(t, i["block_table"], b, 40) for b in range(3)]) for t in (k, v))
    expect = _per_sequence(i["q"], k, v, lens, causal)
    torch.testing.assert_close(ref, expect, rtol=1e-12, atol=1e-12)


def test_reference_refuses_a_table_pointing_past_the_cache_and_lengths_outside_it():
    op, i = _inputs(_small(page_size=16))
    args = op.args(i)
    bad = i["block_table"].clone()
    bad[1, 2] = 9
    with pytest.raises(ValueError, match=r"block_table\[1, 2\]=9 points past the cache: blocks are 0..8"):
        op.reference(*args[:4], bad, causal=True)
    lens = torch.tensor([40, 49, 3], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"cache_seqlens\[1\]=49 must be in \[3, 48\]"):
        op.reference(*args[:3], lens, args[4], causal=True)
    with pytest.raises(ValueError, match=r"cache_seqlens\[2\]=2 must be in \[3, 48\] \(causal: at least q_len\)"):
        op.reference(*args[:3], torch.tensor([40, 40, 2], dtype=torch.int32), args[4], causal=True)
    q = torch.randn(3, 5, 3, 16)
    with pytest.raises(ValueError, match=r"q's heads \(5\) must be a multiple of the cache's kv_heads \(2\)"):
        op.reference(q, *args[1:], causal=True)


@pytest.mark.parametrize("page", [0, 16])
def test_the_compiled_formula_agrees_with_the_reference_in_eager(page):
    case = _small(page_size=page, lengths="ragged")
    op, i = _inputs(case)
    ref = op.reference(*op.args(i), **op.options(case))
    out = op.formula(*op.args(i), **op.options(case))
    assert out.dtype == torch.float16 and ((out.double() - ref).norm() / ref.norm()) < 2e-3


# -- work model and the shared roofline --------------------------------------------------------------------


def test_decode_work_model_reads_the_cache_once_over_the_actual_lengths():
    case = _small(lengths="ragged")  # lengths 40, 30, 20 of 40
    w = decode.OP.work(case)
    lens = [40, 30, 20]
    assert w.min_bytes == (2 * sum(lens) * 2 * 16 + 2 * 3 * 6 * 3 * 16) * 2
    assert w.flops == 4 * 6 * 16 * sum(3 * n - 3 for n in lens)  # causal: 3 tokens see n-2, n-1, n keys
    non_causal = decode.OP.work(_small(lengths="ragged", causal=False))
    assert non_causal.flops == 4 * 6 * 16 * 3 * sum(lens) and non_causal.min_bytes == w.min_bytes
    assert decode.PAGED_OP.work(_small(lengths="ragged", page_size=16)) == w


def test_grouped_prefill_work_model():
    full = attention.make_case(2, 32, 2048, 128, False, "bf16", "fwd", kv_heads=8)
    w = attention.OP.work(full)
    assert w.flops == 4 * 2 * 32 * 2048 * 2048 * 128
    assert w.min_bytes == (2 * 2 * 32 * 2048 * 128 + 2 * 2 * 8 * 2048 * 128) * 2
    chunk = attention.make_case(1, 4, 256, 64, True, "bf16", "fwd", kv_seq=1024)
    assert attention.OP.work(chunk).flops == 4 * 4 * 64 * (256 * 1024 - 256 * 256 / 2)
    bwd = attention.make_case(2, 32, 2048, 128, False, "bf16", "bwd", kv_heads=8)
    assert attention.OP.work(bwd).min_bytes == 2 * w.min_bytes


def test_decode_lands_on_the_bandwidth_side_and_prefill_on_the_compute_side_of_the_h200():
    c = Ceilings(**json.loads((REPO / "results" / "ceilings" / "nvidia-h200.json").read_text()))
    ridge = c.peak_tflops("bf16") * 1e12 / (c.copy_gbps * 1e9)
    for model_heads in (32, 64):
        for q_len in (1, 4):
            step = decode.make_case(64, model_heads, 8, q_len, 16384, 128, "bf16")
            w = decode.OP.work(step)
            assert w.flops / w.min_bytes < ridge / 4  # heads / kv_heads x q_len FLOP per byte: 4 to 32
        prefill = attention.make_case(8, model_heads, 2048, 128, True, "bf16", "fwd", kv_heads=8)
        w = attention.OP.work(prefill)
        assert w.flops / w.min_bytes > ridge


def test_decode_declares_its_own_providers_and_they_take_their_tiers_place(catalog):
    """Decode's special providers come from its family's declaration (Family.providers), not from a list of
    the tiers: the catalog holds them, each beside the other providers of its tier."""
    from tierbench.suite.providers import builtin_providers
    from tierbench.suite.tiers import rank

    own = decode.FAMILY.providers(list(decode.FAMILY.ops))
    assert {p.tier for p in own} == {"vendor", "cuda"} and all(p.op in ("decode", "decode_paged") for p in own)
    listed = builtin_providers(list(catalog.ops.values()))
    keys = [(p.name, p.op) for p in listed]
    assert {(p.name, p.op) for p in own} <= set(keys)
    assert [rank(p.tier)[0] for p in listed] == sorted(rank(p.tier)[0] for p in listed)
