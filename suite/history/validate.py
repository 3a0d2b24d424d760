"""Replays committed history through the exact decision code: false alarms and power per change size.

    tierbench compare --validate [--machine M] [--rounds 8]

- **across sessions**: every pair of sessions of one series whose code did not change (controls within a
  benchmark version and environment; the project's own series within one code state). The noise model is
  learned again for each pair from everything but those two sessions of that series (held out), then
  `stats.cross_session` judges the pair as it is, and with the head's samples made 1, 2, 3, 5, 10% slower.
- **within a session**: every sample set cut into paired pseudo-rounds, judged by `stats.paired_rounds`
  (the A/B rule), under three splits: `random` (samples dealt at random to A and B within each round),
  `alternating` (contiguous blocks, A and B taking turns, ABBA, as the A/B command alternates) and
  `halves` (the first half of the session against the second: no alternation, drift counts fully).

A false alarm is a `slower` or `faster` verdict on unchanged code; power is the share of `slower` verdicts
at an injected slowdown.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .asvresults import ResultFile
from .noise import (
    MIN_SESSION_GAP_S,
    Observation,
    fit_series,
    group_series,
    model_from_fits,
    newest_versions,
    observations,
)
from .stats import Settings, cross_session, median, paired_rounds, round_medians, session_medians

CHANGES = (0.01, 0.02, 0.03, 0.05, 10 / 100)
SPLITS = ("random", "alternating", "halves")
SEPARATIONS = ((0.0, MIN_SESSION_GAP_S, "under 30 min apart"), (7200.0, math.inf, "2 h or more apart"))
SEED = 20


@dataclass
class Tally:
    """Comparisons of unchanged code (false alarms) and of injected slowdowns (slower calls), per size."""

    comparisons: int = 0
    false_alarms: int = 0
    calls: dict[float, int] = field(default_factory=lambda: {c: 0 for c in CHANGES})
    tries: dict[float, int] = field(default_factory=lambda: {c: 0 for c in CHANGES})

    def false_alarm_rate(self) -> float:
        return self.false_alarms / self.comparisons if self.comparisons else math.nan

    def power(self, change: float) -> float:
        return self.calls[change] / self.tries[change] if self.tries[change] else math.nan


@dataclass
class Validation:
    machine: str
    settings: Settings
    rounds: int
    cross: Tally = field(default_factory=Tally)
    held_out: Tally = field(default_factory=Tally)  # the same pairs, the model learned without them
    by_separation: dict[str, Tally] = field(default_factory=dict)
    per_series: dict[str, Tally] = field(default_factory=dict)
    series_sigma: dict[str, float] = field(default_factory=dict)
    within: dict[str, Tally] = field(default_factory=dict)
    sample_sets: int = 0
    skipped_sets: int = 0


def _is_alarm(verdict: str) -> bool:
    return verdict in ("slower", "faster")


def _samples_by_source(files: list[ResultFile]) -> dict[tuple[str, str], list[float]]:
    return {(str(f.path), key): r.samples for f in files for key, r in f.results.items() if r.samples}


def cross_session_replay(
    files: list[ResultFile],
    machine: str,
    is_own: Callable[[str], bool],
    code_id: Callable[[str], str] | None,
    settings: Settings,
    result: Validation,
    min_gap_s: float = MIN_SESSION_GAP_S,
    hold_out: bool = False,
) -> None:
    obs = observations(files, is_own, code_id)
    samples = _samples_by_source(files)
    by_series = group_series(obs)
    fits = {kv: fit_series(members, min_gap_s) for kv, members in by_series.items()}
    newest = newest_versions(by_series)
    full = model_from_fits(fits, newest, machine, min_gap_s)
    for (key, version), members in sorted(by_series.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        by_group: dict[str, list[Observation]] = {}
        for o in members:
            by_group.setdefault(o.group, []).append(o)
        for group in sorted(by_group):
            for a, b in itertools.combinations(by_group[group], 2):
                if hold_out:  # the model as it would be without these two sessions of this series
                    fitted = dict(fits)
                    fitted[(key, version)] = fit_series([o for o in members if o is not a and o is not b], min_gap_s)
                    noise = model_from_fits(fitted, newest, machine, min_gap_s).lookup(key, version)
                else:  # the model `compare` uses: every session of the machine, these two included
                    noise = full.lookup(key, version)
                before, after = samples[(a.source, key)], samples[(b.source, key)]
                if hold_out:
                    _judge([result.held_out], noise, before, after, settings)
                    continue
                result.series_sigma.setdefault(key, noise.sigma)
                tallies = [result.cross, result.per_series.setdefault(key, Tally())]
                gap = abs(b.started_s - a.started_s)
                for low, high, label in SEPARATIONS:
                    if low <= gap < high:
                        tallies.append(result.by_separation.setdefault(label, Tally()))
                _judge(tallies, noise, before, after, settings)


def _judge(tallies: list[Tally], noise, before: Sequence[float], after: Sequence[float], settings: Settings) -> None:
    alarm = _is_alarm(cross_session(before, after, noise, settings).verdict)
    for tally in tallies:
        tally.comparisons += 1
        tally.false_alarms += alarm
    # Slowing every sample by a factor slows the median by it: the same rule on scaled medians.
    med_b, med_a = median(before), median(after)
    for change in CHANGES:
        for x, y in ((med_b, med_a), (med_a, med_b)):
            called = session_medians(x, y * (1 + change), noise, settings).verdict == "slower"
            for tally in tallies:
                tally.tries[change] += 1
                tally.calls[change] += called


def split_rounds(
    samples: Sequence[float], rounds: int, kind: str, rng: np.random.Generator
) -> tuple[list[list[float]], list[list[float]]]:
    """(A rounds, B rounds) of one time-ordered sample set, cut into `rounds` paired pseudo-rounds."""
    values = np.asarray(samples, dtype=float)
    if kind == "halves":
        blocks = np.array_split(values, 2 * rounds)
        return [b.tolist() for b in blocks[:rounds]], [b.tolist() for b in blocks[rounds:]]
    pairs = np.array_split(values, rounds)
    a_rounds, b_rounds = [], []
    for i, block in enumerate(pairs):
        if kind == "random":
            block = rng.permutation(block)
            first, second = block[: len(block) // 2], block[len(block) // 2 :]
        elif kind == "alternating":
            first, second = block[: len(block) // 2], block[len(block) // 2 :]
            if i % 2:
                first, second = second, first
        else:
            raise ValueError(f"unknown split {kind!r}; valid choices: {', '.join(SPLITS)}")
        a_rounds.append(first.tolist())
        b_rounds.append(second.tolist())
    return a_rounds, b_rounds


def within_session_replay(files: list[ResultFile], settings: Settings, result: Validation) -> None:
    rng = np.random.default_rng(SEED)
    need = 4 * result.rounds  # two samples per side and round at least
    for f in files:
        for _, r in sorted(f.results.items()):
            if not r.samples:
                continue
            if len(r.samples) < need:
                result.skipped_sets += 1
                continue
            result.sample_sets += 1
            for kind in SPLITS:
                a_rounds, b_rounds = split_rounds(r.samples, result.rounds, kind, rng)
                tally = result.within.setdefault(kind, Tally())
                tally.comparisons += 1
                tally.false_alarms += _is_alarm(paired_rounds(a_rounds, b_rounds, settings).verdict)
                a_medians, b_medians = [median(x) for x in a_rounds], [median(x) for x in b_rounds]
                for change in CHANGES:
                    slowed = [m * (1 + change) for m in b_medians]
                    tally.tries[change] += 1
                    tally.calls[change] += round_medians(a_medians, slowed, settings).verdict == "slower"


def validate(
    files: list[ResultFile],
    machine: str,
    is_own: Callable[[str], bool],
    code_id: Callable[[str], str] | None = None,
    settings: Settings | None = None,
    rounds: int = 8,
    min_gap_s: float = MIN_SESSION_GAP_S,
) -> Validation:
    settings = settings or Settings()
    files = [f for f in files if f.machine == machine]
    result = Validation(machine, settings, rounds)
    cross_session_replay(files, machine, is_own, code_id, settings, result, min_gap_s)
    cross_session_replay(files, machine, is_own, code_id, settings, result, min_gap_s, hold_out=True)
    within_session_replay(files, settings, result)
    return result


def _pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{100 * value:.1f}%"


def _row(label: str, tally: Tally, count: str) -> str:
    cells = [label, count, _pct(tally.false_alarm_rate()), *(_pct(tally.power(c)) for c in CHANGES)]
    return "| " + " | ".join(cells) + " |"


def table(v: Validation) -> str:
    """The validation as a Markdown table (the one in docs/asv.md)."""
    head = ["comparison", "n", "false alarms", *(f"power at {c:.0%}" for c in CHANGES)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.append(_row("across sessions, all pairs", v.cross, f"{v.cross.comparisons} pairs"))
    for _, _, label in SEPARATIONS:
        if label in v.by_separation:
            tally = v.by_separation[label]
            lines.append(_row(f"across sessions, {label}", tally, f"{tally.comparisons} pairs"))
    held = v.held_out
    lines.append(_row("across sessions, the pair held out of the model", held, f"{held.comparisons} pairs"))
    for kind in SPLITS:
        if kind in v.within:
            tally = v.within[kind]
            name = f"within a session, {kind} split ({v.rounds} rounds)"
            lines.append(_row(name, tally, f"{tally.comparisons} sets"))
    return "\n".join(lines) + "\n"


def series_table(v: Validation) -> str:
    """Per series across sessions: its learned noise and what that lets the verdict see."""
    head = ["series", "pairs", "noise sd (model)", "false alarms", "power at 5%", "power at 10%"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, tally in sorted(v.per_series.items(), key=lambda kv: -kv[1].comparisons):
        cells = [
            f"`{key}`",
            str(tally.comparisons),
            _pct(v.series_sigma[key]),
            _pct(tally.false_alarm_rate()),
            _pct(tally.power(0.05)),
            _pct(tally.power(0.10)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary(v: Validation) -> str:
    s = v.settings
    return (
        f"Replay of {v.machine}: floor {s.floor:.0%}, α {s.alpha:g}; {v.cross.comparisons} cross-session pairs "
        f"of unchanged code (noise model learned from every stored session, as `compare` learns it; held out: "
        f"learned without the pair), {v.sample_sets} sample sets split within their session "
        f"({v.skipped_sets} with fewer than {4 * v.rounds} samples left out).\n"
    )


def ab_replay(
    base_rounds: dict[str, list[list[float]]], head_rounds: dict[str, list[list[float]]], settings: Settings
) -> Tally:
    """A stored A/B run of one commit against itself (an A/A paired run): false alarms as it is, power with
    the head's rounds made 1-10% slower, per series through `stats.round_medians`."""
    tally = Tally()
    for key in sorted(set(base_rounds) & set(head_rounds)):
        pairs = [(b, h) for b, h in zip(base_rounds[key], head_rounds[key]) if len(b) and len(h)]
        base = [median(b) for b, _ in pairs]
        head = [median(h) for _, h in pairs]
        tally.comparisons += 1
        tally.false_alarms += _is_alarm(round_medians(base, head, settings).verdict)
        for change in CHANGES:
            tally.tries[change] += 1
            tally.calls[change] += round_medians(base, [m * (1 + change) for m in head], settings).verdict == "slower"
    return tally


def ab_table(tally: Tally, label: str) -> str:
    head = ["comparison", "n", "false alarms", *(f"power at {c:.0%}" for c in CHANGES)]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        _row(label, tally, f"{tally.comparisons} series"),
    ]
    return "\n".join(lines) + "\n"
