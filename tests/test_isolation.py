"""A misbehaving provider costs only its own record: wrong kinds of output, writes and wrong answers only
while timed (in process, fast), and crashes, hangs, exits and hostile names through the real command.

The providers are the plugins under tests/plugins/: hostile_plugin (every way a kernel misbehaves),
hostile_names (names that would drive a terminal) and exits_at_import (sys.exit while imported).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import tierbench_cli
from cpu_run import FAST, RUN_TIMING, cpu_context

from tierbench.suite.measure.plan import PlannedCase
from tierbench.suite.measure.runner import RunContext, measure_case, run_plan
from tierbench.suite.ops import norm
from tierbench.suite.providers import vendor
from tierbench.suite.providers.base import Provider
from tierbench.suite.store.reading import read_records
from tierbench.suite.store.records import RECORDS_FILE, Measurement

PLUGINS = Path(__file__).resolve().parent / "plugins"
THREE_ROUNDS = dataclasses.replace(FAST, rounds=3)
CASE = norm.make_case("rms_norm", 16, 64, "fp32", "fwd")
CONTROL = "\x1b\x07\u202e"


@pytest.fixture
def hostile(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    import hostile_plugin

    return {p.name: p for p in hostile_plugin.PROVIDERS}


def _ctx(tmp_path: Path) -> RunContext:
    return cpu_context(tmp_path, timing=THREE_ROUNDS)


def _eager(case=CASE) -> Provider:
    return next(p for p in vendor.providers([norm.RMS_NORM]) if p.name == "eager")


def _measure(tmp_path: Path, providers: list[Provider], case=CASE) -> dict[str, Measurement]:
    return {r.provider: r for r in measure_case(case, providers, _ctx(tmp_path), norm.RMS_NORM)}


def test_whatever_a_provider_returns_is_incorrect_with_what_it_was_and_every_reader_reads_it(tmp_path, hostile):
    names = ["returns-none", "returns-float", "returns-tuple", "returns-ndarray", "returns-nan", "wrong-shape",
             "wrong-dtype", "sys-exits"]  # fmt: skip
    records = _measure(tmp_path, [_eager(), *(hostile[n] for n in names)])
    expected = {
        "returns-none": "the provider returned NoneType, not a tensor",
        "returns-float": "the provider returned float, not a tensor",
        "returns-tuple": "the provider returned tuple, not a tensor",
        "returns-ndarray": "the provider returned numpy.ndarray, not a tensor",
        "returns-nan": "1024 of 1024 output elements are NaN or Inf (1024 NaN)",
        "wrong-shape": "output shape (16, 63) != expected (16, 64)",
        "wrong-dtype": "output dtype float64, expected the case's float32",
    }
    for name, reason in expected.items():
        assert records[name].status == "incorrect" and records[name].reason == reason, records[name].reason
    assert records["sys-exits"].status == "error" and records["sys-exits"].reason == "SystemExit: 3"
    assert records["eager"].status == "ok" and "timed in the same rounds" not in records["eager"].warning
    # Written and read back as every view reads them: none dropped, none measured again on resume.
    run_plan([PlannedCase(CASE, norm.RMS_NORM, (_eager(), *(hostile[n] for n in names)))], _ctx(tmp_path))
    with_errors = json.loads((tmp_path / RECORDS_FILE).read_text().splitlines()[1])
    assert with_errors["errors"] == {}  # an output never compared has no error, not a null one
    assert {r.provider for r in read_records(tmp_path)} == {"eager", *names}
    older = {**with_errors, "errors": {"out": None}, "median_ms": float("nan")}  # as older runs wrote them
    again = Measurement.from_dict(json.loads(json.dumps(older)))
    assert again.errors == {"out": None} and again.median_ms is None


def test_an_answer_in_another_dtype_than_the_cases_is_incorrect(tmp_path):
    case = norm.make_case("rms_norm", 16, 64, "bf16", "fwd")

    def in_float32(i, o, c):
        return lambda: norm.eager_rms_norm(i["x"].float(), i["weight"].float(), o["eps"])

    wide = Provider("wide", "vendor", "rms_norm", in_float32)
    records = _measure(tmp_path, [_eager(case), wide], case)
    assert records["eager"].status == "ok"
    assert records["wide"].status == "incorrect" and records["wide"].reason == (
        "output dtype float32, expected the case's bfloat16"
    )


def test_a_write_into_the_inputs_only_while_timed_is_caught_after_its_turn(tmp_path, hostile):
    records = _measure(tmp_path, [_eager(), hostile["writes-while-timed"]])
    writer = records["writes-while-timed"]
    assert writer.status == "error" and writer.reason.startswith("wrote into its inputs (x) while timed (")
    assert writer.median_ms is None
    # The provider timed beside it ran on restored inputs (its last output passed the check again) and
    # says whom it was timed with.
    eager = records["eager"]
    assert eager.status == "ok" and eager.median_ms > 0
    assert "timed in the same rounds as writes-while-timed" in eager.warning


def test_an_output_that_goes_wrong_only_while_timed_is_incorrect(tmp_path, hostile):
    records = _measure(tmp_path, [_eager(), hostile["wrong-while-timed"]])
    wrong = records["wrong-while-timed"]
    assert wrong.status == "incorrect" and wrong.median_ms is None
    assert wrong.reason.startswith("its last timed output fails the check its checked output passed: relative error")
    assert records["eager"].status == "ok" and "wrong-while-timed" in records["eager"].warning


def test_a_last_timed_output_that_cannot_be_checked_is_never_called_wrong(tmp_path, hostile):
    """Running out of memory while checking the last timed output marks the record oom, not incorrect (nothing
    wrong was seen); a check that runs out once passes on its second try, after the cache is freed."""
    records = _measure(
        tmp_path, [_eager(), hostile["check-runs-out-of-memory"], hostile["check-runs-out-of-memory-once"]]
    )
    lost = records["check-runs-out-of-memory"]
    assert lost.status == "oom" and lost.median_ms is None, (lost.status, lost.reason)
    assert lost.reason == (
        "its last timed output could not be checked: OutOfMemoryError: CUDA out of memory while the output was checked"
    )
    once = records["check-runs-out-of-memory-once"]
    assert once.status == "ok" and once.median_ms > 0, once.reason
    # Neither is a suspect for the providers timed beside them.
    assert records["eager"].status == "ok" and "same rounds" not in records["eager"].warning


def test_a_provider_moving_the_process_elsewhere_misplaces_no_record(tmp_path, hostile, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ctx = _ctx(Path("run"))  # a relative run folder, as results_dir=... gives
    (tmp_path / "run").mkdir()
    run_plan([PlannedCase(CASE, norm.RMS_NORM, (_eager(), hostile["chdirs"]))], ctx)
    assert Path.cwd() == tmp_path
    assert {r.provider: r.status for r in read_records(tmp_path / "run")} == {"eager": "ok", "chdirs": "ok"}


SMALL = ["suite=smoke", *RUN_TIMING, "matmul.enabled=false", "attention.enabled=false", "decode.enabled=false",
         "pointwise.enabled=false", "model.enabled=false",
         "norm.kinds=[rms_norm]", "norm.modes=[fwd]", "html=false"]  # fmt: skip


def _env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
def test_a_crash_a_hang_or_an_exit_costs_only_its_own_record_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    import hostile_names
    import hostile_plugin

    runs = tmp_path / "runs"
    args = [*SMALL, "plugins=[hostile_plugin,hostile_names]", "tiers=[vendor,hostile,names]",
            f"results_dir={runs}", f"ceilings_dir={tmp_path}/ceilings", "time_limit_s=8", "run_id=r"]  # fmt: skip
    result = tierbench_cli("run", *args, cwd=tmp_path, timeout=900, env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    lines = (runs / "r" / RECORDS_FILE).read_text().splitlines()
    records = {r.provider: r for r in read_records(runs / "r")}
    expected = {"eager", hostile_names.NAME, *(p.name for p in hostile_plugin.PROVIDERS)}
    assert len(lines) == len(records) and set(records) == expected  # one record per key, none lost
    died = {
        "hangs": "still running after the time limit of 8 s per measurement (time_limit_s); its process was stopped "
        "while preparing, compiling and checking its output",
        "segfaults": "its process was killed by SIGSEGV",
        "aborts": "its process was killed by SIGABRT",
        "exits": "its process exited with code 0 while preparing",
        "segfaults-while-timed": "its process was killed by SIGSEGV",
    }
    for name, reason in died.items():
        assert records[name].status == "error" and reason in records[name].reason, records[name].reason
        assert records[name].reason.endswith("; the run went on in a new process")
    assert "while warming up" in records["segfaults-while-timed"].reason
    assert records["returns-none"].status == records["wrong-while-timed"].status == "incorrect"
    assert records["writes-while-timed"].status == records["sys-exits"].status == "error"
    # A runtime that keeps its pool after running out of memory hands the case on to a new process.
    assert records["oom-keeps-pool"].status == "oom" and "pool of its own" in records["oom-keeps-pool"].reason
    assert (
        "oom-keeps-pool ran out of memory and its runtime keeps the memory it had grown to; "
        "the case goes on in a new process" in result.stdout + result.stderr
    )
    for name in ("eager", "chdirs", hostile_names.NAME):
        assert records[name].status == "ok" and records[name].median_ms > 0, records[name].reason
    meta = json.loads((runs / "r" / "run.json").read_text())
    assert meta["done"] == meta["planned"] == len(records)
    # Nothing a name holds reaches the terminal raw.
    shown = result.stdout + result.stderr
    assert not any(c in shown for c in CONTROL) and "\\x1b]0;owned\\x07" in shown
    # Every reader reads every record; a resume measures nothing again.
    summary = tierbench_cli("summary", str(runs / "r"), cwd=tmp_path, timeout=120)
    assert summary.returncode == 0 and not any(c in summary.stdout for c in CONTROL)
    cell = summary.stdout.splitlines()[-1]  # the case's "not timed" column, by outcome
    assert re.search(r"incorrect: [^;|]*returns-none", cell) and re.search(r"error: [^;|]*hangs", cell), cell
    resumed = tierbench_cli("run", "resume=r", f"results_dir={runs}", cwd=tmp_path, timeout=300, env=_env())
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (runs / "r" / RECORDS_FILE).read_text().splitlines() == lines


def test_a_case_whose_start_dies_after_an_earlier_case_is_tried_again_in_a_new_process(tmp_path):
    """A provider that leaves the process broken (the next case's inputs abort it) costs no other record: the
    next case is tried once more in a new process, where it starts."""
    runs = tmp_path / "runs"
    args = [*SMALL, "norm.hidden=[1024,512]", "plugins=[poisons_the_process]", "tiers=[vendor,poisoning]",
            "providers=[eager,poisons-the-process]", f"results_dir={runs}", f"ceilings_dir={tmp_path}/ceilings",
            "run_id=r"]  # fmt: skip
    result = tierbench_cli("run", *args, cwd=tmp_path, timeout=600, env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_records(runs / "r")
    assert len(records) == 4 and all(r.status == "ok" for r in records), [(r.case_id, r.reason) for r in records]
    shown = result.stdout + result.stderr
    assert "killed by SIGABRT" in shown and "tried again in a new process" in shown


@pytest.mark.slow
def test_an_interrupt_during_a_hang_keeps_the_records_made_before_it(tmp_path):
    runs = tmp_path / "runs"
    exe = Path(sys.executable).parent / "tierbench"
    args = [*SMALL, "plugins=[hostile_plugin]", "tiers=[hostile]", "providers=[returns-none,hangs]",
            f"results_dir={runs}", f"ceilings_dir={tmp_path}/ceilings", "run_id=r"]  # fmt: skip
    proc = subprocess.Popen(
        [str(exe), "run", *args], cwd=tmp_path, env={**os.environ, **_env()}, stderr=subprocess.PIPE, text=True
    )
    records = runs / "r" / RECORDS_FILE
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (records.exists() and records.read_text().strip()):
        time.sleep(0.2)
    time.sleep(2)  # the hang has begun
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "1 records are safe" in err and [r.provider for r in read_records(runs / "r")] == ["returns-none"]


@pytest.mark.slow
def test_a_plugin_that_exits_at_import_is_an_error_naming_it(tmp_path):
    result = tierbench_cli(
        "run", "plugins=[exits_at_import]", f"results_dir={tmp_path}/runs", cwd=tmp_path, timeout=300, env=_env()
    )
    assert result.returncode == 2 and "plugin 'exits_at_import' called sys.exit(0) at import" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "runs").exists()
