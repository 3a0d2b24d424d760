"""Paired A/B verdicts on stored rounds: what confirms a regression, what a control's move means, and the
normaliser that takes a run's machine factor out of an own series."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from tierbench.suite.history import ab, compare, compare_command, noise
from tierbench.suite.history.stats import Settings, Verdict

OWN = "matmul.Matmul.track_mine('c')"
CONTROL = "matmul.Matmul.track_vendor('c')"
OWN_PROVIDERS = ("mine",)


def _samples(level: float, rng: np.random.Generator) -> list[float]:
    return (level * np.exp(rng.normal(0, 0.002, 30))).tolist()


def ab_run(own_factor: float, control_factor: float = 1.0, run_noise: float = 0.04, rounds: int = 8) -> ab.ABRun:
    """Rounds of two asv runs each; every run has a machine factor (sd `run_noise`) that hits both series it
    measures alike."""
    rng = np.random.default_rng(7)
    run = ab.ABRun("m", "a" * 40, "b" * 40, seconds=100.0)
    for i in range(rounds):
        r = ab.Round(["base", "head"] if i % 2 == 0 else ["head", "base"])
        for side, own, ctrl in (("base", 1.0, 1.0), ("head", own_factor, control_factor)):
            machine = math.exp(rng.normal(0, run_noise))
            measured = {
                OWN: ab.Measured("v", 1.0, _samples(1e-3 * own * machine, rng)),
                CONTROL: ab.Measured("v", 1.0, _samples(2e-3 * ctrl * machine, rng)),
            }
            setattr(r, side, measured)
        run.rounds.append(r)
    return run


NORMALISER = noise.Normaliser("vendor", raw_sd=0.03, sd=0.003, df=9, series=1)


def _row(report: compare.Report, key: str) -> compare.Row:
    return next(r for r in report.rows if r.key == key)


def test_a_normaliser_takes_the_runs_machine_factor_out():
    run = ab_run(own_factor=1.04)
    plain = ab.compare_ab(run, Settings(), own_providers=OWN_PROVIDERS)
    assert _row(plain, OWN).state != "confirmed"  # 4% under run-to-run factors of 4%: the rounds cannot tell
    divided = ab.compare_ab(run, Settings(), own_providers=OWN_PROVIDERS, normalisers={"matmul.Matmul": NORMALISER})
    row = _row(divided, OWN)
    assert row.state == "confirmed" and row.ab.ratio == pytest.approx(1.04, abs=0.01)
    assert "divided by vendor" in row.normalised_by and "divided by vendor" in row.decided_by
    assert divided.regressions == [row]


def test_no_slowdown_is_not_confirmed_with_or_without_the_normaliser():
    run = ab_run(own_factor=1.0)
    for normalisers in (None, {"matmul.Matmul": NORMALISER}):
        report = ab.compare_ab(run, Settings(), own_providers=OWN_PROVIDERS, normalisers=normalisers)
        assert not report.regressions


def test_a_control_that_moved_in_an_ab_is_drift_and_never_a_regression():
    report = ab.compare_ab(ab_run(1.0, control_factor=1.3, run_noise=0.002), Settings(), own_providers=OWN_PROVIDERS)
    assert _row(report, CONTROL).state == "drift" and not _row(report, CONTROL).own
    assert not report.regressions and "harness or the machine" in _row(report, CONTROL).note


def _cross_report(state: str) -> compare.Report:
    v = Verdict(state, 1.0, 1.1, 1.1, 1.05, 1.15, 0.01, 0.02, "floor", "session", 2, "x", 0.9)
    report = compare.Report("a", "b", "m", Settings(), "across sessions", "n", own_providers=OWN_PROVIDERS)
    report.rows = [compare.Row(OWN, state, cross=v, own=True), compare.Row(CONTROL, "steady", own=False)]
    return report


def test_an_ab_decides_a_suspect_either_way():
    confirmed = _cross_report("suspected")
    ab_report = ab.compare_ab(
        ab_run(1.04), Settings(), own_providers=OWN_PROVIDERS, normalisers={"matmul.Matmul": NORMALISER}
    )
    compare.attach_confirmations(confirmed, ab_report)
    row = _row(confirmed, OWN)
    assert row.state == "confirmed" and row.confirmed is True and row.cross.verdict == "suspected"
    assert confirmed.regressions == [row]

    cleared = _cross_report("suspected")
    compare.attach_confirmations(
        cleared, ab.compare_ab(ab_run(1.0, run_noise=0.002), Settings(), own_providers=OWN_PROVIDERS)
    )
    row = _row(cleared, OWN)
    assert row.state == "unchanged" and row.confirmed is False and row.decided_by.startswith("paired A/B")
    assert not cleared.regressions


def test_the_ab_measures_the_suspects_and_their_normalisers_only():
    report = _cross_report("suspected")
    regex = compare_command.suspects_regex(report, {"matmul.Matmul": NORMALISER})
    assert regex == r"^(matmul\.Matmul\.track_mine\('c'\)|matmul\.Matmul\.track_vendor\('c'\))$"
    assert re.search(regex, OWN) and re.search(regex, CONTROL)  # asv matches `name(params)`
    assert not re.search(regex, "matmul.Matmul.track_mine('other')")
    assert compare_command.suspects_regex(_cross_report("unchanged"), {}) is None


def test_an_ab_cut_short_keeps_its_rounds_and_says_so(tmp_path):
    run = ab_run(own_factor=1.0, rounds=4)
    run.planned = 10
    path = ab.save(run, tmp_path / "ab" / "m-aaaaaaaa-bbbbbbbb.json")
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # written through a temporary file
    again = ab.load(path)
    assert len(again.rounds) == 4 and again.planned == 10
    report = ab.compare_ab(again, Settings(), own_providers=OWN_PROVIDERS)
    assert "4 rounds of 10 planned, cut short" in report.noise_source
    assert _row(report, OWN).ab.n == 4
    whole = ab_run(own_factor=1.0, rounds=4)
    whole.planned = 4
    assert "cut short" not in ab.compare_ab(whole, Settings(), own_providers=OWN_PROVIDERS).noise_source


def test_a_stored_ab_run_is_judged_again(project, capsys, tmp_path):
    run = ab_run(own_factor=1.10, run_noise=0.005, rounds=4)
    run.planned = 10
    path = ab.save(run, project / "results" / "compare" / "ab" / "m-aaaaaaaa-bbbbbbbb.json")
    out = tmp_path / "verdicts.json"
    args = ["--config", str(project / "asv.conf.json"), "--ab-run", str(path), "--noise", "none"]
    code = compare_command.main(args + ["--own", "mine", "--json", str(out), "--md", str(tmp_path / "r.md")])
    data = json.loads(out.read_text())
    assert code == 1  # the own series, 10% slower in every round: confirmed
    (own,) = [s for s in data["series"] if s["benchmark"] == OWN]
    assert own["verdict"] == "confirmed" and own["ab"]["n"] == 4
    assert "4 rounds of 10 planned, cut short" in data["noise"]
    assert compare_command.main(args + ["--ab", "--own", "mine"]) == 2
    assert "takes no BASE/HEAD" in capsys.readouterr().err


def test_a_stored_aa_run_replays_through_the_ab_rule(project, capsys):
    run = ab_run(own_factor=1.0, run_noise=0.002, rounds=10)
    run.head = run.base
    path = ab.save(run, project / "results" / "compare" / "ab" / "m-aaaaaaaa-aaaaaaaa.json")
    code = compare_command.main(["--config", str(project / "asv.conf.json"), "--validate", "--ab-run", str(path)])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "paired A/A run of aaaaaaaa" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert code == 0 and "false confirmations" in out
    assert cells[1] == "2 series" and cells[2].startswith("0.0%") and cells[-1] == "100.0%"  # 10% always seen
    other = ab_run(own_factor=1.0)
    ab.save(other, path)
    assert compare_command.main(["--config", str(project / "asv.conf.json"), "--validate", "--ab-run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not A/A" in err and "add --same-code" in err


def test_an_unchanged_copy_replays_as_aa_when_told_it_runs_the_same_code(project, capsys):
    # experiments/gpu_history.py's unchanged copy is another commit running the same code: --same-code says so.
    run = ab_run(own_factor=1.0, run_noise=0.002, rounds=10)
    path = ab.save(run, project / "results" / "compare" / "ab" / "m-aaaaaaaa-bbbbbbbb.json")
    args = ["--config", str(project / "asv.conf.json"), "--validate", "--ab-run", str(path)]
    assert compare_command.main(args) == 2
    assert "add --same-code" in capsys.readouterr().err
    assert compare_command.main(args + ["--same-code"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "(the same code)" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "2 series" and cells[2].startswith("0.0%") and cells[-1] == "100.0%"
    # Without --validate --ab-run the flag means nothing: a clear error, not silence.
    assert compare_command.main(["--config", str(project / "asv.conf.json"), "--same-code", "--validate"]) == 2
    assert "--same-code goes with --validate --ab-run" in capsys.readouterr().err
