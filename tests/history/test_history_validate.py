"""The shipped validation: the committed H200 history replayed through the exact decision code, each figure on
data its method did not learn from.

The tables it prints are the ones in docs/asv.md (checked here), and the goals it meets are asserted: on fixed,
committed samples the replay is deterministic, so a change to the verdict rules that raises false alarms or
loses power fails here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tierbench.suite.history import asvresults, compare_command, validate
from tierbench.suite.history.asvtool import find_config
from tierbench.suite.history.compare import own_test

REPO = Path(__file__).resolve().parents[2]
MACHINE = "h200-vm"


@pytest.fixture(scope="module")
def history():
    config = find_config(str(REPO / "asv.conf.json"))
    if MACHINE not in asvresults.machines(config.results_dir):
        pytest.skip(f"no committed history of {MACHINE}")
    return config, compare_command.history_files(config, MACHINE)


@pytest.fixture(scope="module")
def replay(history):
    config, files = history
    return validate.validate(files, MACHINE, own_test(("triton",)), compare_command.code_ids(config))


def test_suspects_across_sessions_stay_under_ten_percent(replay):
    assert replay.cross.comparisons > 500
    assert replay.cross.rate() <= 0.10


def test_the_confirmation_reaches_the_goals_on_time_ordered_splits(replay):
    alternating = replay.within["alternating"]
    assert alternating.rate() <= 0.01
    assert alternating.power(0.10) >= 0.95 and alternating.power(0.05) >= 0.90 and alternating.power(0.03) >= 0.50


def test_real_runs_as_rounds_confirm_nothing_unchanged_and_most_of_5_percent(replay):
    assert {"attention", "matmul", "norm"} <= set(replay.real)
    for name, tally in replay.real.items():
        assert tally.rate() <= 0.01, name
        assert tally.power(0.05) >= 0.90, name


def test_end_to_end_confirmed_regressions_on_unchanged_code_stay_under_one_percent(replay):
    assert replay.end_to_end.comparisons == replay.cross.comparisons
    assert replay.end_to_end.rate() <= 0.01


def test_power_grows_with_the_change(replay):
    for tally in (replay.cross, replay.end_to_end, *replay.within.values(), *replay.real.values()):
        powers = [tally.power(c) for c in validate.CHANGES]
        assert powers == sorted(powers)


def test_each_pair_is_judged_by_a_model_that_never_saw_either_session(history, monkeypatch):
    config, files = history
    seen = []
    real_fit = validate.fit_model

    def spying_fit(obs, machine, files=0):
        seen.append({o.session for o in obs})
        return real_fit(obs, machine, files)

    monkeypatch.setattr(validate, "fit_model", spying_fit)
    session_of = validate.sessions(files)
    obs = validate.observations(files, own_test(("triton",)), compare_command.code_ids(config), session_of)
    result = validate.Validation(MACHINE, validate.Settings(), 10)
    validate.cross_session_replay(obs, validate._samples(files), validate.Settings(), MACHINE, result)
    pairs = validate.null_pairs(obs)
    assert len(seen) == len({(a.session, b.session) for a, b in pairs}) > 20  # one model per pair of sessions
    every = {o.session for o in obs}
    assert all(every - {a.session, b.session} in seen for a, b in pairs)


def test_the_tables_in_the_docs_are_the_replay(replay):
    docs = (REPO / "docs" / "asv.md").read_text()
    assert validate.table(replay) in docs, validate.table(replay)
    assert validate.series_table(replay) in docs, validate.series_table(replay)


def test_splits():
    rng = np.random.default_rng(0)
    values = [float(i + 1) for i in range(16)]
    a, b = validate.split_rounds(values, 4, "halves", rng)
    assert a[0] == [1.0, 2.0] and b[0] == [9.0, 10.0]
    a, b = validate.split_rounds(values, 4, "alternating", rng)
    assert (a[0], b[0], a[1], b[1]) == ([1.0, 2.0], [3.0, 4.0], [7.0, 8.0], [5.0, 6.0])
    a, b = validate.split_rounds(values, 4, "random", rng)
    assert sorted(a[0] + b[0]) == [1.0, 2.0, 3.0, 4.0] and len(a[0]) == 2
    with pytest.raises(ValueError, match="valid choices"):
        validate.split_rounds(values, 4, "odd", rng)


def test_wilson_interval():
    lo, hi = validate.wilson(0, 100)
    assert lo == 0.0 and 0.03 < hi < 0.04
    lo, hi = validate.wilson(50, 100)
    assert lo == pytest.approx(0.404, abs=0.001) and hi == pytest.approx(0.596, abs=0.001)
