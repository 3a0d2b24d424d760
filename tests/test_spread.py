"""`tierbench spread`: the A/A summary of two runs."""

from __future__ import annotations

import pytest
from cli_runner import tierbench_cli

from tierbench.suite.scale import spread
from tierbench.suite.store.records import Measurement, RecordWriter


def _rec(provider: str, median: float, status: str = "ok") -> Measurement:
    return Measurement(
        run_id="r",
        op="matmul",
        family="matmul",
        case={"dtype": "bf16"},
        case_id="matmul/x",
        label="x",
        x=1.0,
        provider=provider,
        tier="vendor",
        status=status,
        median_ms=median,
    )


def test_spread_of_two_runs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, medians in ((a, (1.00, 0.010, 2.0)), (b, (1.02, 0.012, None))):
        folder.mkdir()
        writer = RecordWriter(folder)
        writer.append(_rec("p1", medians[0]))
        writer.append(_rec("p2", medians[1]))
        writer.append(_rec("p3", medians[2] or 0.0, status="ok" if medians[2] else "error"))
    result = tierbench_cli("spread", str(a), str(b), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "all pairs:            n=2" in result.stdout
    assert "kernels >= 50 us:    n=1 median 1.98%" in result.stdout
    assert "p2" in result.stdout.splitlines()[3]  # the widest first: 18% on the 10 us kernel
    assert "(bf16, fwd) p2" in result.stdout  # each row names its dtype and pass


def test_spread_rejects_a_missing_run(tmp_path):
    result = tierbench_cli("spread", str(tmp_path / "nope"), str(tmp_path), cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "is not a run folder" in result.stderr


def test_spread_takes_run_ids_too(tmp_path, capsys):
    for name, median in (("a", 1.0), ("b", 1.1)):
        (tmp_path / name).mkdir()
        RecordWriter(tmp_path / name).append(_rec("p1", median))
    assert spread.main(["a", str(tmp_path / "b"), "--runs", str(tmp_path)]) == 0
    assert "n=1" in capsys.readouterr().out
    assert spread.main(["a", "nope", "--runs", str(tmp_path)]) == 2
    assert "is not a run folder, run id or sweep id" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--min-us", "nan"], ["--min-us", "-1"], ["--top", "-3"]])
def test_spread_refuses_bounds_that_mean_nothing(tmp_path, capsys, flags):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        RecordWriter(tmp_path / name).append(_rec("p1", 1.0))
    assert spread.main([str(tmp_path / "a"), str(tmp_path / "b"), *flags]) == 2
    assert "must be 0 or more" in capsys.readouterr().err


def test_a_median_no_run_measures_is_no_headline(tmp_path, capsys):
    """NaN is not JSON but Python's reader takes it: read as the null a writer writes, it pairs with
    nothing, and a 1e308 ms median is the widest spread, not a NaN one."""
    for name, medians in (("a", (1.0, 1.0, 1.0)), ("b", (1.0, 1e308, 1.0))):
        (tmp_path / name).mkdir()
        writer = RecordWriter(tmp_path / name)
        for provider, median in zip(("p1", "p2", "p3"), medians):
            writer.append(_rec(provider, median))
    path = tmp_path / "b" / "measurements.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace('"median_ms":1.0', '"median_ms":NaN')
    path.write_text("\n".join(lines) + "\n")
    assert spread.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "all pairs:            n=2 " in out and "max 200.00%" in out and "nan" not in out.lower()
