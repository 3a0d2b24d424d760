"""Runs and data shaping: which runs a device's view merges, matrix winners and margins, reasons, ceilings."""

from __future__ import annotations

import json

import pytest
from sitefakes import CATALOG_META, record, write_run

from tierbench.suite.show.presentation import Presentation
from tierbench.suite.store.records import Measurement
from tierbench.suite.store.runmeta import RunMeta

# isort: split
from tierbench.suite.show.site import build, model
from tierbench.suite.show.site import runs as site_runs


def _runs(tree, *specs):
    for run_id, suite, recs in specs:
        write_run(tree["runs"], run_id, recs, suite)
    return site_runs.load_runs(tree["runs"])


def test_latest_run_per_device_and_suite_merged_newest_record_wins(tree):
    cpu = {"device_type": "cpu", "device_name": "x86_64", "threads": 2}
    found = _runs(
        tree,
        ("a-old", "smoke", [record(run_id="a-old", median_ms=5.0, time=10.0)]),
        ("b-new", "smoke", [record(run_id="b-new", median_ms=2.0, time=20.0)]),
        (
            "c-mm",
            "matmul",
            [
                record(run_id="c-mm", case_id="matmul/m=512", median_ms=3.0, time=15.0),
                record(run_id="c-mm", median_ms=1.0, time=15.0),
            ],
        ),
        ("d-cpu", "smoke", [record(run_id="d-cpu", env=cpu, time=30.0)]),
    )
    views = site_runs.latest_per_device(found)
    assert [d.name for d in views] == ["CPU x86_64 ×2 threads", "NVIDIA H100 80GB HBM3"]
    gpu = views[site_runs.Device("nvidia-h100-80gb-hbm3", "NVIDIA H100 80GB HBM3")]
    assert sorted(r.run_id for r in gpu) == ["b-new", "c-mm"]  # a-old is replaced by b-new (same suite)
    merged = {(r.case_id, r.provider): r for r in site_runs.merge(gpu)}
    # (matmul/m=256, eager) is in both: b-new's record is newer than c-mm's.
    assert merged[("matmul/m=256", "eager")].run_id == "b-new"
    assert merged[("matmul/m=512", "eager")].run_id == "c-mm"


def test_each_case_shows_its_newest_complete_run_whatever_the_suites(tree):
    """A run of a suite measured cases a later run of another suite did not: every case keeps its newest
    complete run, and a later run that was killed hides nothing it did not finish."""

    def case(name: str, run_id: str, time: float, **kw) -> Measurement:
        params = {"m": 64, "dtype": name, "mode": "fwd"}
        return record(run_id=run_id, case=params, case_id=f"matmul/dtype={name}", label=name, time=time, **kw)

    write_run(tree["runs"], "all", [case("a", "all", 1.0), case("b", "all", 1.0)], "all")
    write_run(tree["runs"], "a-again", [case("a", "a-again", 2.0, median_ms=0.5)], "matmul")
    write_run(tree["runs"], "c-only", [case("c", "c-only", 3.0)], "matmul")
    write_run(tree["runs"], "killed", [case("a", "killed", 4.0), case("d", "killed", 4.0)], "matmul", complete=False)
    (view,) = build.device_views(site_runs.load_runs(tree["runs"]), False, {})
    by_case = {r.label: r.run_id for r in view.records}
    assert by_case == {"a": "a-again", "b": "all", "c": "c-only", "d": "killed"}
    assert sorted(r.run_id for r in view.runs) == ["a-again", "all", "c-only", "killed"] and not view.stand_ins


def test_a_newer_skip_does_not_erase_an_earlier_measurement_but_a_failure_does(tree):
    gone = dict(status="skipped", reason="package not installed: quack", median_ms=None)
    earlier = _runs(
        tree,
        (
            "old",
            "norm",
            [
                record(run_id="old", provider="quack", tier="cuda", time=1.0),
                record(run_id="old", provider="fused", tier="cuda", time=1.0),
            ],
        ),
    )
    newest = _runs(
        tree,
        (
            "new",
            "norm",
            [
                record(run_id="new", provider="quack", tier="cuda", time=2.0, **gone),
                record(
                    run_id="new",
                    provider="fused",
                    tier="cuda",
                    time=2.0,
                    status="incorrect",
                    reason="max error 0.3",
                    median_ms=None,
                ),
                record(run_id="new", provider="absent", tier="cuda", time=2.0, **gone),
            ],
        ),
    )
    newest = [r for r in newest if r.run_id == "new"]
    earlier = [r for r in earlier if r.run_id == "old"]
    merged = {r.provider: r for r in site_runs.merge(newest, earlier)}
    assert merged["quack"].run_id == "old" and merged["quack"].status == "ok"  # measured before, skipped now
    assert merged["fused"].status == "incorrect"  # news: a failure is never hidden by an old measurement
    assert merged["absent"].status == "skipped"  # never measured anywhere
    assert {r.provider: r.status for r in site_runs.merge(newest)}["quack"] == "skipped"  # no earlier runs given


def test_named_runs_let_an_older_one_stand_in_for_a_newer_skip(tree):
    """`tierbench report --run new --run old`: quack, skipped in `new`, shows old's measurement, marked."""
    gone = dict(status="skipped", reason="package not installed: quack", median_ms=None)
    quack = dict(provider="quack", tier="cuda")
    found = _runs(
        tree,
        ("old", "norm", [record(run_id="old", time=1.0, **quack), record(run_id="old", time=1.0)]),
        ("new", "norm", [record(run_id="new", time=2.0, **quack, **gone), record(run_id="new", time=2.0)]),
    )
    (view,) = build.device_views(site_runs.select_runs(found, ["new", "old"], tree["runs"]), True, {})
    by_provider = {r.provider: r for r in view.records}
    assert by_provider["quack"].run_id == "old" and by_provider["quack"].status == "ok"
    assert by_provider["eager"].run_id == "new"  # measured in both: the newer stands
    assert view.stand_ins == {("matmul/m=256", "quack")} and sorted(r.run_id for r in view.runs) == ["new", "old"]
    (alone,) = build.device_views(site_runs.select_runs(found, ["new"], tree["runs"]), True, {})
    assert {r.provider: r.status for r in alone.records}["quack"] == "skipped"  # old not named: nothing to show


def test_select_runs_names_valid_choices(tree):
    found = _runs(tree, ("r1", "smoke", [record()]))
    assert site_runs.select_runs(found, ["r1"], tree["runs"])[0].run_id == "r1"
    with pytest.raises(site_runs.SelectionError, match=r"unknown run 'nope'.*runs under .*: r1"):
        site_runs.select_runs(found, ["nope"], tree["runs"])
    with pytest.raises(site_runs.SelectionError, match="no runs with records under"):
        site_runs.select_runs([], None, tree["runs"])


def test_matrix_names_fastest_correct_provider_per_tier_and_margin():
    case = dict(case_id="matmul/m=1", label="1^3", x=1.0)
    recs = [
        record(provider="eager", tier="vendor", median_ms=2.0, **case),
        record(provider="cublaslt", tier="vendor", median_ms=1.6, **case),
        record(provider="compile", tier="compiler", median_ms=1.0, **case),
        record(provider="triton", tier="triton", status="incorrect", reason="max error 0.3", median_ms=None, **case),
        record(provider="triton-tma", tier="triton", median_ms=0.8, **case),
        record(provider="cutlass", tier="cuda", status="skipped", reason="no nvcc", median_ms=None, **case),
    ]
    shown = Presentation.of([RunMeta("r", **CATALOG_META)])
    view = shown.view("matmul")
    tiers = shown.tier_names(recs)
    assert tiers == ["vendor", "compiler", "triton", "cuda"]
    (rows,) = model.matrix(recs, view, tiers).values()
    row = rows[0]
    assert row.winner == "triton" and row.cells["triton"].best.provider == "triton-tma"
    assert row.runner_up == "compiler" and row.margin == pytest.approx(1.25)
    assert row.cells["vendor"].best.provider == "cublaslt"
    assert row.cells["vendor"].relative == pytest.approx(0.5)
    assert row.cells["cuda"].best is None and row.cells["cuda"].status() == "skipped"
    problems, numbers = model.problems(recs, view, shown)
    assert [(p.status, p.provider, p.reason) for p in problems] == [
        ("incorrect", "triton", "max error 0.3"),
        ("skipped", "cutlass", "no nvcc"),
    ]
    assert numbers[("matmul/m=1", "cutlass")] == 2


def test_find_ceilings_matches_gpu_name_and_cpu_spelling(tree):
    assert site_runs.find_ceilings(tree["ceilings"], {"device_name": "NVIDIA H100 80GB HBM3"}).copy_gbps == 2900.0
    (tree["ceilings"] / "cpu-x86-64-x2-threads.json").write_text(
        json.dumps({"device_name": "cpu x86_64 x2 threads", "copy_gbps": 30.0, "matmul_tflops": {"fp32": 0.2}})
    )
    cpu = {"device_type": "cpu", "device_name": "x86_64", "threads": 2}
    assert site_runs.find_ceilings(tree["ceilings"], cpu).copy_gbps == 30.0
    assert site_runs.find_ceilings(tree["ceilings"], {"device_name": "other"}) is None


def test_styles_give_every_provider_a_distinct_color_and_marker_pair():
    styles = model.styles_for([f"p{i}" for i in range(12)])
    assert len({(s.color, s.marker) for s in styles.values()}) == 12


def test_chart_groups_put_the_passes_of_one_group_side_by_side():
    from tierbench.suite.show.presentation import View

    view = View("tflops", "TFLOP/s", "sequence length", ("dtype", "head_dim"))

    def att(head_dim: int, mode: str) -> Measurement:
        case = {"dtype": "bf16", "head_dim": head_dim, "seq": 512, "mode": mode}
        return record(op="attention", family="attention", case=case, case_id=f"a/{head_dim}/{mode}")

    order = [att(64, "fwd"), att(128, "fwd"), att(64, "bwd"), att(128, "fwd_bwd"), att(128, "bwd")]
    assert list(model.by_group(order, view)) == [
        "attention · bf16 · head_dim=64 · fwd",
        "attention · bf16 · head_dim=64 · bwd",
        "attention · bf16 · head_dim=128 · fwd",
        "attention · bf16 · head_dim=128 · bwd",
        "attention · bf16 · head_dim=128 · fwd_bwd",
    ]
