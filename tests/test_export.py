"""`tierbench export`: runs as one flat table, one row per measurement, read back as a user would."""

from __future__ import annotations

import csv
import io
import json
import sys

import pytest

from tierbench.suite.show import export
from tierbench.suite.store.reading import read_records
from tierbench.suite.store.records import Measurement, RecordWriter


def _rec(run: str, provider: str, median: float | None, **extra) -> Measurement:
    return Measurement(
        run_id=run,
        op="rms_norm",
        family="norm",
        case={"rows": 512, "hidden": 1024, "dtype": "bf16", "mode": "fwd"},
        case_id="rms_norm/512x1024",
        label="512x1024",
        x=524288.0,
        provider=provider,
        tier="vendor",
        status="ok" if median else "skipped",
        reason="" if median else "package not installed",
        median_ms=median,
        quantiles_ms={"p10": median * 0.9, "p90": median * 1.2} if median else {},
        samples_ms=[median, median] if median else [],
        gbps=2.0 / median if median else None,
        env={"device_name": "x86_64", "device_type": "cpu", "tierbench_version": "0.1.0"},
        **extra,
    )


@pytest.fixture
def results(tmp_path):
    """A results folder of two runs, one with telemetry (a list in it) the other lacks."""
    runs = tmp_path / "runs"
    for run, records in (
        ("a", [_rec("a", "eager", 2.0), _rec("a", "quack", None)]),
        ("b", [_rec("b", "eager", 1.0, telemetry={"sm_clock_mhz": 1980, "throttle_reasons": ["sw_power_cap"]})]),
    ):
        (runs / run).mkdir(parents=True)
        writer = RecordWriter(runs / run)
        for r in records:
            writer.append(r)
    return runs


def test_csv_has_one_row_per_measurement_and_flat_columns(results, tmp_path, capsys):
    out = tmp_path / "all.csv"
    assert export.main([str(results), "--out", str(out)]) == 0  # a results folder: every run in it
    assert "wrote" in capsys.readouterr().err
    rows = list(csv.DictReader(out.open()))
    assert [(r["run_id"], r["provider"]) for r in rows] == [("a", "eager"), ("a", "quack"), ("b", "eager")]
    first = rows[0]
    assert first["case.rows"] == "512" and first["case.dtype"] == "bf16" and first["env.device_name"] == "x86_64"
    assert float(first["quantiles_ms.p10"]) == pytest.approx(1.8) and first["median_ms"] == "2.0"
    assert "samples_ms" not in first and "case" not in first and "env" not in first  # flattened, samples left out
    assert rows[1]["median_ms"] == "" and rows[1]["reason"] == "package not installed"
    assert rows[2]["telemetry.sm_clock_mhz"] == "1980" and json.loads(rows[2]["telemetry.throttle_reasons"]) == [
        "sw_power_cap"
    ]
    assert rows[0]["telemetry.sm_clock_mhz"] == ""  # a column one run lacks is empty there


def test_runs_by_id_or_folder_with_samples_as_json_lines(results, capsys):
    assert export.main(["a", str(results / "b"), "--runs-dir", str(results), "--format", "jsonl", "--samples"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 3 and lines[0]["samples_ms"] == [2.0, 2.0] and lines[0]["case.hidden"] == 1024
    assert set(lines[0]) == set(lines[2])  # every row has every column


def test_bad_input_exits_2_and_says_what_to_do(results, tmp_path, capsys):
    assert export.main(["nope", "--runs-dir", str(results)]) == 2
    assert "neither a run folder nor a run id" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert export.main([str(tmp_path / "empty")]) == 2
    assert "holds no records" in capsys.readouterr().err
    assert export.main([str(results), "--format", "parquet"]) == 2
    assert "--out FILE.parquet" in capsys.readouterr().err


def test_parquet_without_pyarrow_says_how_to_install_it(results, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed: its import fails
    assert export.main([str(results), "--out", str(tmp_path / "all.parquet")]) == 2
    assert "pip install 'tierbench[export]'" in capsys.readouterr().err


def test_parquet_with_pyarrow(results, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "all.parquet"
    assert export.main([str(results), "--out", str(out)]) == 0
    table = pq.read_table(out)
    assert table.num_rows == 3 and "quantiles_ms.p90" in table.column_names
    assert table.column("provider").to_pylist() == ["eager", "quack", "eager"]


def test_pandas_reads_the_csv_in_one_line(results):
    pandas = pytest.importorskip("pandas")
    buffer = io.StringIO()
    export.write_csv([export.flatten(r) for r in read_records(results / "a")], buffer)
    frame = pandas.read_csv(io.StringIO(buffer.getvalue()))
    assert frame.shape[0] == 2 and frame["case.rows"].tolist() == [512, 512]
    assert frame["gbps"].iloc[0] == pytest.approx(1.0)


def test_a_cell_a_spreadsheet_would_run_is_text_and_a_terminal_sees_no_control_characters(tmp_path, capsys):
    runs = tmp_path / "runs"
    (runs / "x").mkdir(parents=True)
    hostile = _rec("x", '=HYPERLINK("http://x")', 2.0, launch="+cmd|' /C calc'!A0")
    hostile.tier = "@SUM(1)"
    hostile.label = "-2+3"
    RecordWriter(runs / "x").append(hostile)
    RecordWriter(runs / "x").append(_rec("x", "\x1b]0;owned\x07evil\u202e", 1.0))
    out = tmp_path / "x.csv"
    assert export.main([str(runs / "x"), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert rows[0]["provider"] == '\'=HYPERLINK("http://x")' and rows[0]["launch"].startswith("'+cmd")
    assert rows[0]["tier"] == "'@SUM(1)" and rows[0]["label"] == "'-2+3"
    assert rows[0]["median_ms"] == "2.0" and rows[1]["provider"] == "\x1b]0;owned\x07evil\u202e"  # the file keeps data
    capsys.readouterr()
    assert export.main([str(runs / "x")]) == 0  # to a terminal (standard output): escapes, not control
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert "\\x1b]0;owned\\x07evil\\u202e" in shown


def test_an_export_never_overwrites_a_runs_own_files_and_makes_its_folder(results, tmp_path, capsys):
    for name in ("measurements.jsonl", "config.yaml", "run.json"):
        before = (results / "a" / "measurements.jsonl").read_bytes()
        assert export.main([str(results / "a"), "--out", str(results / "a" / name)]) == 2
        assert f"is a run's own {name}" in capsys.readouterr().err
        assert (results / "a" / "measurements.jsonl").read_bytes() == before
    assert export.main([str(results / "a"), "--out", str(results / "b" / "measurements.jsonl")]) == 2
    target = tmp_path / "exports" / "deeper" / "run1.csv"
    assert export.main([str(results / "a"), "--out", str(target)]) == 0 and target.is_file()
    (tmp_path / "a-file").write_text("")
    assert export.main([str(results / "a"), "--out", str(tmp_path / "a-file" / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "cannot write --out" in err and "Traceback" not in err
    assert export.main([str(results / "a"), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
