"""On a GPU: the harness's timer agrees with an independent one, and records carry the card's state."""

from __future__ import annotations

import pytest
import torch

from tierbench.suite.catalog import build
from tierbench.suite.ceilings import Ceilings
from tierbench.suite.measure.runner import RunContext, measure_case
from tierbench.suite.ops.base import Case
from tierbench.timing import CudaEventTimer, TimingSettings, bring_to_steady_state

pytestmark = pytest.mark.gpu

CASES = [
    Case("matmul", "matmul", {"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "mode": "fwd"}, "4096^3", 4096.0),
    Case(
        "attention",
        "attention",
        {"batch": 2, "heads": 16, "seq": 4096, "head_dim": 128, "causal": False, "dtype": "bf16", "mode": "fwd"},
        "B2 H16 S4096 D128",
        4096.0,
    ),
]
PROVIDER = {"matmul": "eager", "attention": "sdpa-flash"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.op)
def test_harness_median_agrees_with_triton_do_bench(case, tmp_path):
    import triton.testing

    device = torch.device("cuda")
    bring_to_steady_state(device, 3.0)
    catalog = build(entry_points=False)
    op = catalog.ops[case.op]
    provider = next(p for p in catalog.providers() if p.op == case.op and p.name == PROVIDER[case.op])
    settings = TimingSettings(warmup_ms=25, rep_ms=100, rounds=5, min_reps=10, max_reps=1000)
    ctx = RunContext(
        run_id="t",
        run_dir=tmp_path,
        device=device,
        timer=CudaEventTimer(settings, device),
        ceilings=Ceilings("gpu", 4000.0, {"bf16": 700.0}),
        env={},
    )
    (record,) = list(measure_case(case, [provider], ctx, op))
    assert record.status == "ok", record.reason

    inputs = op.make_inputs(case, device, torch.Generator(device=device).manual_seed(0))
    fn = provider.prepare(inputs, op.options(case), case)
    independent = triton.testing.do_bench(fn, warmup=25, rep=500, return_mode="median")
    ratio = record.median_ms / independent
    print(
        f"{case.op} {case.label}: harness {record.median_ms:.4f} ms, do_bench {independent:.4f} ms, ratio {ratio:.3f}"
    )
    assert 0.95 <= ratio <= 1.05
    assert record.telemetry.get("sm_clock_mhz", 0) > 0, record.telemetry
    assert "power_w" in record.telemetry and isinstance(record.telemetry["throttle_reasons"], list)
    assert record.peak_mem_bytes is not None and record.peak_mem_bytes > 0
    assert record.timer == "cuda-events+graph"


def test_the_timer_sees_the_device_work_of_a_runtime_on_its_own_stream(tmp_path):
    """XLA runs on JAX's stream: DLPack's handshake must put its product between the timer's events, so the
    median cannot fall below what the card's peak allows (an unseen product would time as a few us)."""
    pytest.importorskip("jax", reason="jax not installed: pip install 'tierbench[xla]'")
    case = CASES[0]
    catalog = build(entry_points=False)
    provider = next(p for p in catalog.providers() if p.name == "xla" and p.op == case.op)
    device = torch.device("cuda")
    ctx = RunContext(
        run_id="t",
        run_dir=tmp_path,
        device=device,
        timer=CudaEventTimer(TimingSettings(steady_state_s=0), device),
        ceilings=Ceilings("gpu", 4000.0, {"bf16": 700.0}),
        env={},
    )
    (record,) = measure_case(case, [provider], ctx, catalog.ops[case.op])
    assert record.status == "ok", record.reason
    assert record.timer == "cuda-events+dlpack-stream-sync"
    assert record.median_ms > 2 * 4096**3 / 2000e12 * 1e3  # 2 PFLOP/s: above any card's bf16 peak
