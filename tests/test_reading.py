"""suite/store/reading.py: one rule for which folders a name means, and what views ask of records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tierbench.suite.store import reading, runmeta
from tierbench.suite.store.records import CONFIG_FILE, RECORDS_FILE, Measurement


def _record(
    provider: str, tier: str = "vendor", status: str = "ok", median_ms: float | None = 1.0, **kw
) -> Measurement:
    base = dict(run_id="r", op="matmul", family="matmul", case={"dtype": "fp32"}, case_id="matmul/x", label="x", x=1.0)
    return Measurement(**base, provider=provider, tier=tier, status=status, median_ms=median_ms, **kw)


def _run(root: Path, name: str, sweep: str | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / RECORDS_FILE).write_text(_record("eager").to_json() + "\n")
    (folder / CONFIG_FILE).write_text("suite: smoke\n")
    runmeta.write(folder, runmeta.RunMeta(name, sweep=sweep))
    return folder


def test_timed_is_correct_with_a_median_and_nothing_else():
    assert reading.timed(_record("a"))
    assert not reading.timed(_record("a", median_ms=None)) and not reading.timed(_record("a", median_ms=0.0))
    assert not reading.timed(_record("a", status="skipped")) and not reading.timed(None)


def test_fastest_per_tier_takes_each_tiers_quickest_timed_record():
    records = [
        _record("eager", median_ms=2.0),
        _record("cublaslt", median_ms=1.5),
        _record("compile", tier="compiler", median_ms=1.0),
        _record("wrong", tier="compiler", status="incorrect", median_ms=0.1),
    ]
    best = reading.fastest_per_tier(records)
    assert {tier: r.provider for tier, r in best.items()} == {"vendor": "cublaslt", "compiler": "compile"}
    assert reading.fastest(records).provider == "compile" and reading.fastest([records[-1]]) is None


def test_the_baseline_is_the_first_preferred_provider_that_counts():
    eager, lt = _record("eager", median_ms=None, status="skipped"), _record("cublaslt", median_ms=1.5)
    mine = _record("mine", tier="mine", median_ms=1.0)
    # Named by run.json: the first of them that was timed, none where none was.
    assert reading.baseline([eager, lt, mine], ("eager", "mine")).provider == "mine"
    assert reading.baseline([eager, lt], ("eager",)) is None
    # Not named: the default first, then the vendor tier's providers by name.
    assert reading.baseline([eager, lt, mine], None).provider == "cublaslt"
    assert reading.DEFAULT_BASELINE[0] == "eager"
    # What counts is the caller's: a launch count for what fusion saved.
    counted = _record("eager", median_ms=None, status="skipped", launches=3)
    assert reading.baseline([counted, lt], None, counts=lambda r: r.launches is not None) is counted


def test_a_name_is_a_path_with_a_separator_else_an_id_under_the_results_folder(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    run = _run(root, "r1")
    shards = [_run(root, f"s-{i}", sweep="sw") for i in range(2)]
    (root / ".sweeps" / "sw").mkdir(parents=True)
    (root / ".sweeps" / "sw" / "sweep.json").write_text(json.dumps({"sweep": "sw"}))
    assert reading.find_runs("r1", root) == [run] and reading.find_runs(str(run), root) == [run]
    assert reading.find_runs("sw", root) == shards  # a sweep: its shards' runs, as one run
    assert reading.find_runs("s-0", root) == [shards[0]]  # a shard's run id: that run
    monkeypatch.chdir(root)
    assert reading.find_run("r1", tmp_path / "elsewhere") is None  # a bare name is never a folder of the cwd
    assert reading.find_run("./r1", tmp_path / "elsewhere") == Path("./r1")
    for bad in ("nothing", ".sweeps", ""):
        assert reading.find_runs(bad, root) == []


def test_resume_names_a_run_by_path_or_id_and_a_sweep_by_its_id_or_a_shards(tmp_path):
    root = tmp_path / "runs"
    run = _run(root, "r1")
    _run(root, "s-0", sweep="sw")
    (root / ".sweeps" / "sw").mkdir(parents=True)
    (root / ".sweeps" / "sw" / "sweep.json").write_text("{}")
    by_path = reading.resume_target(str(run), "elsewhere")
    assert (by_path.results, by_path.name, by_path.sweep, by_path.config) == (root, "r1", False, run / CONFIG_FILE)
    by_id = reading.resume_target("r1", root)
    assert (by_id.results, by_id.name, by_id.sweep) == (root, "r1", False)
    for name in ("sw", "s-0"):
        target = reading.resume_target(name, root)
        assert target.sweep and target.name == "sw" and target.config == root / ".sweeps" / "sw" / CONFIG_FILE
    # A name that can be no run id points at no config, so no file outside the results folder is read.
    assert reading.resume_target("..", root).config is None and reading.resume_target(".x", root).config is None


def test_every_json_lines_file_drops_a_damaged_line_with_a_warning(tmp_path):
    (tmp_path / "launches.jsonl").write_text('{"case_id": "a", "provider": "p", "launches": 2}\n{"case_id": "b", "pro')
    with pytest.warns(UserWarning, match=r"launches\.jsonl: dropped a truncated last line"):
        found = reading.read_launches(tmp_path)
    assert list(found) == [("a", "p")]
    (tmp_path / RECORDS_FILE).write_text(_record("a").to_json() + "\nnot json\n" + _record("b").to_json() + "\n")
    with pytest.warns(UserWarning, match=r"measurements\.jsonl: dropped a damaged line 2"):
        assert [r.provider for r in reading.read_records(tmp_path)] == ["a", "b"]
