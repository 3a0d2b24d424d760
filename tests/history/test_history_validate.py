"""The shipped validation: the committed H200 history replayed through the exact decision code.

The table it prints is the one in docs/asv.md (checked here), and the goals it meets are asserted: on fixed,
committed samples the replay is deterministic, so a change to the verdict rules that raises false alarms
fails here.
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
def replay():
    config = find_config(str(REPO / "asv.conf.json"))
    if MACHINE not in asvresults.machines(config.results_dir):
        pytest.skip(f"no committed history of {MACHINE}")
    files = compare_command.history_files(config, MACHINE)
    return validate.validate(files, MACHINE, own_test(("triton",)), compare_command.code_ids(config))


def test_false_alarms_across_sessions_stay_under_one_percent(replay):
    assert replay.cross.comparisons > 300
    assert replay.cross.false_alarm_rate() <= 0.01


def test_paired_random_split_reaches_the_within_session_goals(replay):
    random = replay.within["random"]
    assert random.false_alarm_rate() == 0.0
    assert random.power(0.05) >= 0.90 and random.power(0.03) >= 0.50


def test_power_grows_with_the_change(replay):
    for tally in (replay.cross, *replay.within.values()):
        powers = [tally.power(c) for c in validate.CHANGES]
        assert powers == sorted(powers)


def test_the_table_in_the_docs_is_the_replay(replay):
    docs = (REPO / "docs" / "asv.md").read_text()
    assert validate.table(replay) in docs, validate.table(replay)


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
