"""The compiler tier's XLA and TVM providers and the portable tier (Mojo through MAX, IREE), on the CPU.

Each provider is checked by the harness itself (measure_case: the reference, the check, the timing) at
small odd shapes; where its package is not installed the test is skipped with the provider's own reason,
and a provider whose package cannot be imported is recorded `skipped` with the pip extra to install.
"""

from __future__ import annotations

import sys

import pytest
import torch
from cpu_run import cpu_context

from tierbench.suite import tiers
from tierbench.suite.catalog import build
from tierbench.suite.measure import profiling
from tierbench.suite.measure.runner import measure_case
from tierbench.suite.ops import _matmul_epilogue as epilogue
from tierbench.suite.ops import attention, decode, matmul, norm
from tierbench.suite.providers.xla import storage_order

CPU = torch.device("cpu")
CATALOG = build(entry_points=False)


def _provider(name: str, op: str):
    return next(p for p in CATALOG.providers() if p.name == name and p.op == op)


def _measure(tmp_path, name: str, case):
    """The harness's record of one provider on one case (skipped test where the package is absent)."""
    provider = _provider(name, case.op)
    reason = provider.why_unavailable(case, CPU)
    if reason and reason.startswith("package not installed"):
        pytest.skip(reason)
    ctx = cpu_context(tmp_path)
    (record,) = measure_case(case, [provider], ctx, CATALOG.ops[case.op])
    return record


def _assert_checked_and_timed(record, tier: str):
    assert record.status == "ok", (record.status, record.reason)
    assert record.tier == tier and record.timer == "cpu-clock" and record.median_ms > 0
    assert record.element_error is not None and record.element_error <= 1.0
    # Their code runs in a runtime of their own, which the CPU profiler does not see: no count, a reason.
    assert record.launches is None and record.launches_reason == profiling.OWN_RUNTIME_REASON


# Small odd shapes: a tail in every dim, a grouped-query layout, ragged and paged caches.
MATMUL = matmul.make_case(37, 29, 45, "fp32", "fwd")
MATMUL_BWD = matmul.make_case(37, 29, 45, "fp32", "fwd_bwd")
EPILOGUE_BWD = epilogue.make_case(21, 35, 19, "gelu_tanh", "fp32", "bwd")
RMS_NORM = norm.make_case("rms_norm", 13, 203, "fp32", "fwd")
RMS_NORM_BWD = norm.make_case("rms_norm", 13, 203, "fp32", "bwd")
LAYER_NORM_BWD = norm.make_case("layer_norm", 13, 203, "fp32", "fwd_bwd")


def _attention(mode: str):
    return attention.make_case(batch=1, heads=4, seq=37, head_dim=16, causal=True, dtype="bf16", mode=mode,
                               kv_heads=2)  # fmt: skip


def _decode(page_size: int):
    return decode.make_case(batch=2, heads=4, kv_heads=2, head_dim=16, q_len=2, kv_len=70, causal=True,
                            lengths="ragged", page_size=page_size, dtype="bf16")  # fmt: skip


@pytest.mark.parametrize(
    "case", [MATMUL_BWD, LAYER_NORM_BWD, _attention("fwd_bwd"), _decode(16)], ids=lambda c: f"{c.op}-{c.mode}"
)
def test_xla_checks_and_times_every_formula_it_expresses(tmp_path, case):
    _assert_checked_and_timed(_measure(tmp_path, "xla", case), "compiler")


@pytest.mark.parametrize("case", [EPILOGUE_BWD, RMS_NORM_BWD, LAYER_NORM_BWD], ids=lambda c: f"{c.op}-{c.mode}")
def test_tvm_checks_and_times_the_formulas_its_frontend_takes(tmp_path, case):
    _assert_checked_and_timed(_measure(tmp_path, "tvm", case), "compiler")


@pytest.mark.parametrize(
    "case",
    [matmul.make_case(37, 29, 45, "bf16", "fwd"), norm.make_case("add_rms_norm", 13, 203, "bf16", "fwd")],
    ids=lambda c: c.op,
)
def test_tvm_returns_the_formulas_dtypes_and_every_output(tmp_path, case):
    """TVM's CPU build returns a bf16 product in float32: the provider hands back the formula's dtype (the
    check holds every output to the case's), and each output of an op of several."""
    _assert_checked_and_timed(_measure(tmp_path, "tvm", case), "compiler")


def test_tvm_says_why_where_its_frontend_refuses_a_formula(tmp_path):
    """bf16 attention: TVM 0.27's frontend mixes dtypes in the mask's where(); the record says so, or runs."""
    record = _measure(tmp_path, "tvm", _attention("fwd"))
    assert record.status == "ok" or (record.status == "skipped" and "TVM" in record.reason), record.reason


@pytest.mark.parametrize("case", [MATMUL_BWD, RMS_NORM_BWD, _decode(0)], ids=lambda c: f"{c.op}-{c.mode}")
def test_iree_checks_and_times_the_compiled_formulas(tmp_path, case):
    _assert_checked_and_timed(_measure(tmp_path, "iree", case), "portable")


def test_iree_says_why_where_it_cannot_compile_a_backward(tmp_path):
    """iree-turbine cannot trace the backward of a masked score: skipped with IREE's message, not an error."""
    record = _measure(tmp_path, "iree", _attention("fwd_bwd"))
    if record.status == "ok":  # a later IREE that compiles it: then it must be right
        _assert_checked_and_timed(record, "portable")
    else:
        assert record.status == "skipped", (record.status, record.reason)
        assert record.reason.startswith("IREE does not compile this formula's backward: "), record.reason


@pytest.mark.slow
@pytest.mark.parametrize("case", [MATMUL, RMS_NORM], ids=lambda c: c.op)
def test_mojo_kernels_are_checked_and_timed_as_own_code(tmp_path, case):
    record = _measure(tmp_path, "mojo", case)
    _assert_checked_and_timed(record, "portable")
    assert record.own_code  # the project's kernels: their history is judged, in a tier that also holds IREE


def test_mojo_says_why_it_has_no_backward(tmp_path):
    record = _measure(tmp_path, "mojo", RMS_NORM_BWD)
    assert record.status == "skipped" and "no backward" in record.reason


@pytest.mark.parametrize(
    ("provider", "module", "extra"),
    [
        ("xla", "jax", "tierbench[xla]"),
        ("tvm", "tvm", "tierbench[tvm]"),
        ("mojo", "max.experimental.torch", "tierbench[mojo]"),
        ("iree", "iree.turbine", "tierbench[iree]"),
    ],  # fmt: skip
)
def test_a_provider_whose_package_is_absent_is_skipped_with_the_extra_to_install(
    tmp_path, monkeypatch, provider, module, extra
):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError, as when absent
    record = _measure_absent(tmp_path, provider)
    assert record.status == "skipped" and record.reason.startswith("package not installed")
    assert extra in record.reason and record.median_ms is None


def _measure_absent(tmp_path, name: str):
    ctx = cpu_context(tmp_path)
    (record,) = measure_case(RMS_NORM, [_provider(name, "rms_norm")], ctx, norm.RMS_NORM)
    return record


def test_storage_order_hands_a_sequence_first_cache_over_without_a_copy():
    cache = torch.randn(2, 70, 3, 16).transpose(1, 2)  # (batch, kv_heads, keys, head_dim), sequence-first
    order = storage_order(cache)
    view = cache.permute(order)
    assert view.is_contiguous() and view.data_ptr() == cache.data_ptr()
    assert storage_order(torch.randn(5, 7)) == (0, 1)


def test_the_ladder_has_five_tiers_in_the_seeds_order():
    rungs = [name for name, t in tiers.BUILTIN.items() if t.rung]
    assert rungs == ["vendor", "compiler", "triton", "cuda", "portable"]
    assert not tiers.MIX.rung  # a model block's best mix composes rungs; it is none of its own
    assert [t.order for t in tiers.BUILTIN.values()] == sorted(t.order for t in tiers.BUILTIN.values())
    assert "XLA" in tiers.COMPILER.label and "TVM" in tiers.COMPILER.label
    assert "mojo" in tiers.PORTABLE.description and "iree" in tiers.PORTABLE.description
    providers = {(p.name, p.tier) for p in CATALOG.providers()}
    assert {("xla", "compiler"), ("tvm", "compiler"), ("mojo", "portable"), ("iree", "portable")} <= providers
