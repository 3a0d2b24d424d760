"""Device-memory traffic from ncu's DRAM counters: the CSV read, the reasons where it cannot be measured."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cpu_run import cpu_context

from tierbench.suite.catalog import build
from tierbench.suite.measure import traffic
from tierbench.suite.measure.runner import RunContext, measure_case
from tierbench.suite.ops import norm

SAMPLE = Path(__file__).parent / "samples" / "ncu-dram-details.csv"
# Two kernels (GELU, then LayerNorm), each read and written once: the sample's four DRAM values.
SAMPLE_BYTES = 16_777_216 + 16_781_312 + 16_801_792 + 16_777_216


def test_the_details_page_csv_sums_read_and_write_over_the_kernels_of_the_range():
    assert traffic.parse_ncu_csv(SAMPLE.read_text()) == (SAMPLE_BYTES, "")


def test_prefixed_units_scale_and_unreadable_values_give_a_reason():
    head = '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n'
    scaled = head + '"0","k","s","dram__bytes_read.sum","Mbyte","1.5"\n'
    scaled += '"0","k","s","dram__bytes_write.sum","Kbyte","2"\n'
    scaled += '"1","k2","s","dram__bytes_write.sum","B","7"\n'
    assert traffic.parse_ncu_csv(scaled) == (1.5e6 + 2e3 + 7, "")
    odd, why = traffic.parse_ncu_csv(head + '"0","k","s","dram__bytes_read.sum","sector","3"\n')
    assert odd is None and "'3' sector" in why
    missing, why = traffic.parse_ncu_csv(head + '"0","k","s","dram__bytes_read.sum","byte","n/a"\n')
    assert missing is None and "dram__bytes_read.sum" in why and "'n/a'" in why
    assert traffic.parse_ncu_csv("==PROF== Connected to process 1\n")[0] is None
    other = head + '"0","k","s","gpu__time_duration.sum","nsecond","1,000"\n'
    assert traffic.parse_ncu_csv(other) == (None, "ncu printed no DRAM metrics (no kernel inside the profiled range?)")


def _fake_ncu(folder: Path, body: str) -> Path:
    """An `ncu` that records its arguments and then does what `body` says (no GPU needed)."""
    script = folder / "ncu"
    script.write_text('#!/bin/sh\necho "$@" > "$NCU_ARGS"\n' + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_ncu_runs_one_measurement_of_the_run_in_a_child_and_its_log_is_read(tmp_path, monkeypatch):
    copy_log = 'while [ $# -gt 0 ]; do [ "$1" = "--log-file" ] && cp "$NCU_SAMPLE" "$2"; shift; done\n'
    ncu = _fake_ncu(tmp_path, copy_log)
    monkeypatch.setenv("NCU_ARGS", str(tmp_path / "args"))
    monkeypatch.setenv("NCU_SAMPLE", str(SAMPLE))
    run, case_id = tmp_path / "run", "rms_norm/dtype=bf16,hidden=1024,mode=fwd,rows=512"
    found = traffic.run_ncu(str(ncu), run, case_id, "eager")
    assert found == (SAMPLE_BYTES, "")
    args = (tmp_path / "args").read_text().split()
    assert "dram__bytes_read.sum,dram__bytes_write.sum" in args and "tierbench/" in args
    child = args[args.index("-m") + 1 :]
    assert child == ["tierbench.suite.cli", "profile", str(run), case_id, "eager", "--under-ncu"]


def test_counters_refused_by_the_driver_or_a_container_are_the_reason(tmp_path, monkeypatch):
    refuse = (
        'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance '
        'Counters on the target device 0."\nexit 1\n'
    )
    ncu = _fake_ncu(tmp_path, refuse)
    monkeypatch.setenv("NCU_ARGS", str(tmp_path / "args"))
    assert traffic.run_ncu(str(ncu), tmp_path, "c/x=1", "p") == (None, traffic.PERMISSION_REASON)
    broken = _fake_ncu(tmp_path, 'echo "==ERROR== The application returned an error code (1)."\nexit 1\n')
    found, why = traffic.run_ncu(str(broken), tmp_path, "c/x=1", "p")
    assert found is None and why == "ncu exited with status 1: ==ERROR== The application returned an error code (1)."


def _ctx(tmp_path) -> RunContext:
    return cpu_context(tmp_path, metrics=("traffic",))


@pytest.mark.parametrize("ncu_on_path", [False, True])
def test_records_say_why_traffic_was_not_measured(tmp_path, monkeypatch, ncu_on_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if ncu_on_path:
        _fake_ncu(bin_dir, "exit 3\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    case = norm.make_case("rms_norm", 8, 32, "bf16", "fwd")
    eager = next(p for p in build(entry_points=False).providers() if p.op == "rms_norm" and p.name == "eager")
    (record,) = measure_case(case, [eager], _ctx(tmp_path), norm.RMS_NORM)
    assert record.status == "ok" and record.launches == 1 and record.traffic_bytes is None
    expected = "needs a CUDA GPU (running on cpu)" if ncu_on_path else "ncu (Nsight Compute) is not on PATH"
    assert record.traffic_reason == expected


def test_metrics_takes_traffic_and_a_wrong_name_names_the_valid_choices(compose):
    from tierbench.suite.ops.base import choice_name

    assert compose([]).metrics == []
    assert [choice_name(m) for m in compose(["metrics=[traffic]"]).metrics] == ["traffic"]
    with pytest.raises(Exception, match=r"metrics=\[trafic\]") as caught:
        compose(["metrics=[trafic]"])
    assert "Invalid value 'trafic', expected one of [traffic]" in str(caught.value.__cause__)
