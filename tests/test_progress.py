"""What a run says while it runs: plain lines off a terminal, one live line on it, and spread warnings."""

from __future__ import annotations

import io
import logging

from cpu_run import cpu_context

from tierbench.suite.ceilings import Ceilings
from tierbench.suite.measure import progress
from tierbench.suite.measure.plan import PlannedCase
from tierbench.suite.measure.runner import WIDE_SPREAD, run_plan, spread_warning, summarize
from tierbench.suite.ops import matmul
from tierbench.suite.providers import vendor
from tierbench.suite.store.reading import read_records
from tierbench.suite.store.records import Measurement

CASE = matmul.make_case(32, 32, 32, "fp32", "fwd", "32^3")
CEILINGS = Ceilings(device_name="cpu", copy_gbps=10.0, matmul_tflops={"fp32": 0.1})


def _record(provider: str, median: float | None, warning: str = "") -> Measurement:
    return Measurement(
        run_id="r",
        op="matmul",
        family="matmul",
        case=CASE.to_json(),
        case_id=CASE.case_id,
        label=CASE.label,
        x=CASE.x,
        provider=provider,
        tier="vendor",
        status="ok" if median else "skipped",
        median_ms=median,
        warning=warning,
    )


def test_a_spread_wider_than_the_stated_factor_is_a_warning():
    assert spread_warning(8.0, {"p10": 7.6, "p90": 8.8}) == ""  # (8.8 - 7.6) / 8 = 0.15
    text = spread_warning(8.0, {"p10": 0.28, "p90": 9.0})
    assert "p10 0.280 ms" in text and "median of 8.00 ms" in text and f"> {WIDE_SPREAD:g}" in text
    assert spread_warning(8.0, {}) == "" and spread_warning(0.0, {"p10": 1.0, "p90": 2.0}) == ""
    # The record of a noisy provider carries it; a steady one carries nothing.
    noisy = summarize([0.3, 8.0, 8.0, 8.1, 30.0, 8.0, 7.9, 0.2, 25.0, 8.0], 1e6, 1e6, "fp32", CEILINGS)
    steady = summarize([8.0, 8.1, 7.9, 8.0, 8.05, 7.95, 8.0, 8.0, 8.1, 7.9], 1e6, 1e6, "fp32", CEILINGS)
    assert noisy["warning"].startswith("wide spread") and steady["warning"] == ""


def test_plain_lines_say_what_was_measured_how_long_it_took_and_what_is_left(caplog):
    shown = progress.for_run(2, stream=io.StringIO())  # not a terminal: plain lines
    assert type(shown) is progress.PlainProgress
    with caplog.at_level(logging.INFO, logger="tierbench"):
        shown.case(1, 1, CASE, ["eager", "compile"])
        shown.record(_record("eager", 1.5))
        shown.record(_record("compile", 2.0, warning="wide spread: p10 ..."))
        shown.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "[1/1] matmul 32^3 (fp32, fwd): eager, compile"
    assert lines[1].startswith("  1/2 eager: ok 1.5 ms (0:00 elapsed, ~0:00 left)")
    assert "2/2 compile: ok 2 ms" in lines[2]
    assert [r.levelname for r in caplog.records][-1] == "WARNING" and "wide spread" in lines[-1]


def test_the_live_line_counts_measurements_and_names_the_last_one():
    stream = io.StringIO()
    shown = progress.for_run(2, live=True, stream=stream)
    assert isinstance(shown, progress.LiveProgress)
    shown.case(1, 1, CASE, ["eager", "compile"])
    shown.record(_record("eager", 1.5))
    shown.record(_record("compile", 2.0, warning="wide spread: p10 ..."))
    shown.close()
    text = stream.getvalue()
    assert "2/2 [" in text and "matmul 32^3 (fp32, fwd) · compile: ok 2 ms" in text
    assert "warning: matmul 32^3 (fp32, fwd) compile: wide spread" in text


def test_run_plan_reports_each_measurement(tmp_path, caplog):
    ctx = cpu_context(tmp_path, ceilings=CEILINGS, env={})
    eager = next(p for p in vendor.providers([matmul.OP]) if p.op == "matmul")
    with caplog.at_level(logging.INFO, logger="tierbench"):
        (record,) = run_plan([PlannedCase(CASE, matmul.OP, (eager,))], ctx, live=False)
    assert any(m.getMessage().startswith("  1/1 eager: ok") for m in caplog.records)
    assert isinstance(record.warning, str) and read_records(tmp_path)[0].warning == record.warning


def test_a_provider_checked_but_not_timed_is_said_to_be_correct_not_skipped(caplog):
    r = Measurement(
        run_id="r", op="matmul", family="matmul", case={"dtype": "fp32"}, case_id="matmul/x", label="x", x=1.0,
        provider="triton", tier="triton", status="skipped",
        reason="correct, not timed: TRITON_INTERPRET=1 runs the kernel through Triton's CPU interpreter",
    )  # fmt: skip
    assert progress._outcome(r) == "correct, not timed"
    missing = Measurement(**{**r.__dict__, "reason": "package not installed: flash_attn"})
    assert progress._outcome(missing) == "skipped"


def test_the_final_table_wraps_a_long_reason_instead_of_cutting_it():
    from tierbench.suite.show import table

    reason = "needs compute capability 8.0 or newer; this device has 7.5 " + "and more words " * 12 + "THE-END"
    r = Measurement(
        run_id="r", op="matmul", family="matmul", case={"dtype": "fp32"}, case_id="matmul/x", label="x", x=1.0,
        provider="p", tier="vendor", status="skipped", reason=reason,
    )  # fmt: skip
    text = table.render([r], width=80)
    assert "THE-END" in text and "compute capability 8.0" in text
    assert all(len(line) <= 90 for line in text.splitlines())
