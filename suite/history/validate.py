"""Replays committed history through the exact decision code, on data each figure's method did not learn from.

    tierbench compare --validate [--machine M] [--rounds 10]

- **Across sessions, leave-session-out** (the nomination): every pair of runs of one series in two different
  sessions of the machine, with its code unchanged (a control within one benchmark version and environment,
  an own series within one code identity). For each pair the noise model is learned again without every run
  of both sessions (A/A runs included), then `stats.session_medians` judges the pair in both orders: as it
  is (a `suspected` call on unchanged code is a suspect an A/B must clear), and with the head's samples made
  1, 2, 3, 5 and 10% slower (nomination power). Every series counts, controls included, as the stand-in for
  a series under test: the controls are the history's runs of unchanged code.
- **Within a session, one run cut into rounds** (the A/B rule on pseudo-rounds): every run's time-ordered
  samples cut into paired rounds, split `random` (samples dealt at random to A and B within each round),
  `alternating` (contiguous blocks taking turns, ABBA, as the A/B command alternates) or `halves` (the first
  half against the second: no alternation); judged both ways by `stats.round_medians`. A confirmation here is
  a `slower` verdict; the A/B rule learns nothing from history, so nothing is held out.
- **Within a session, real runs as rounds**: an A/B round is a whole asv run, whose median moves more between
  runs than between cuts of one run. Runs of unchanged code in one session (A/A runs, commits that left a
  series' code alone) give real run-to-run deviations; each simulated A/B draws its rounds from its family's
  deviations (the A/B rule learns nothing from them), and, for a class whose own series the noise model
  normalises, from the own series' deviations divided by their control, that control chosen by a model
  learned without the session the deviations come from.
- **End to end**: a slowdown fails a run only if it is nominated and then confirmed, in independent sessions:
  per cross-session comparison, its nomination times its family's real-run A/B rate.

A suspect or a confirmation on unchanged code is a false alarm; power is the share of calls at an injected
slowdown. Intervals are Wilson's 95% intervals of a proportion: the comparisons share sessions, so they are
narrower than the data warrant.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import keys
from .asvresults import ResultFile
from .noise import (
    MIN_SESSION_GAP_S,
    CodeId,
    Observation,
    fit_model,
    learn_normalisers,
    observations,
    sessions,
)
from .stats import Settings, median, round_medians, session_medians

CHANGES = (0.01, 0.02, 0.03, 0.05, 0.10)
SPLITS = ("random", "alternating", "halves")
SEPARATIONS = ((0.0, 7200.0, "under 2 h apart"), (7200.0, math.inf, "2 h or more apart"))
SEED = 20
SIMULATED = 2000  # simulated A/B runs per family from real run-to-run deviations
Z95 = 1.959963984540054


@dataclass
class Tally:
    """Comparisons of unchanged code (alarms: suspects, or confirmations) and of injected slowdowns, per size."""

    comparisons: float = 0
    alarms: float = 0
    calls: dict[float, float] = field(default_factory=lambda: {c: 0.0 for c in CHANGES})
    tries: dict[float, float] = field(default_factory=lambda: {c: 0.0 for c in CHANGES})

    def rate(self) -> float:
        return self.alarms / self.comparisons if self.comparisons else math.nan

    def power(self, change: float) -> float:
        return self.calls[change] / self.tries[change] if self.tries[change] else math.nan

    def add(self, alarm: bool | float, called: dict[float, bool | float]) -> None:
        self.comparisons += 1
        self.alarms += float(alarm)
        for change, hit in called.items():
            self.tries[change] += 1
            self.calls[change] += float(hit)


def merge(tallies) -> Tally:
    out = Tally()
    for t in tallies:
        out.comparisons += t.comparisons
        out.alarms += t.alarms
        for c in CHANGES:
            out.calls[c] += t.calls[c]
            out.tries[c] += t.tries[c]
    return out


def wilson(successes: float, n: float) -> tuple[float, float]:
    """Wilson's 95% interval of a proportion."""
    if not n:
        return math.nan, math.nan
    if successes <= 0:
        return 0.0, Z95**2 / (n + Z95**2)
    p = successes / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Validation:
    machine: str
    settings: Settings
    rounds: int
    files: int = 0
    sessions: int = 0
    cross: Tally = field(default_factory=Tally)
    cross_own: Tally = field(default_factory=Tally)
    drift: Tally = field(default_factory=Tally)  # controls called drift (two-sided) on their own runs
    by_separation: dict[str, Tally] = field(default_factory=dict)
    per_series: dict[str, Tally] = field(default_factory=dict)
    first_session: dict[str, Tally] = field(default_factory=dict)  # per series: pairs with its first session
    later_sessions: dict[str, Tally] = field(default_factory=dict)  # ... and the others
    within: dict[str, Tally] = field(default_factory=dict)
    sample_sets: int = 0
    skipped_sets: int = 0
    real: dict[str, Tally] = field(default_factory=dict)  # per family (and "<class> normalised")
    real_counts: dict[str, tuple[int, int, float]] = field(default_factory=dict)  # deviations, sessions, sd
    end_to_end: Tally = field(default_factory=Tally)
    run_seconds: dict[str, list[float]] = field(default_factory=dict)  # per set of classes: one asv run's wall times


# -- across sessions ------------------------------------------------------------------------------------------


def _samples(files: list[ResultFile]) -> dict[tuple[str, str], list[float]]:
    return {(str(f.path), key): r.samples for f in files for key, r in f.results.items() if r.samples}


def null_pairs(obs: list[Observation]) -> list[tuple[Observation, Observation]]:
    """Pairs of runs of one series, version and code group in two different sessions (earlier first)."""
    groups: dict[tuple[str, str | None, str], list[Observation]] = {}
    for o in obs:
        groups.setdefault((o.key, o.version, o.group), []).append(o)
    pairs = []
    for members in groups.values():
        members = sorted(members, key=lambda o: (o.started_s, o.source))
        for a, b in itertools.combinations(members, 2):
            if a.session != b.session:
                pairs.append((a, b))
    return sorted(pairs, key=lambda ab: (ab[0].key, ab[0].started_s, ab[1].started_s))


def cross_session_replay(obs: list[Observation], samples, settings: Settings, machine: str, result: Validation) -> None:
    models = {}
    first = {}
    for o in obs:
        key = (o.key, o.version, o.group)
        first[key] = min(first.get(key, o.session), o.session)
    for a, b in null_pairs(obs):
        held = (a.session, b.session)
        if held not in models:
            models[held] = fit_model([o for o in obs if o.session not in held], machine)
        noise = models[held].lookup(a.key, a.version)
        med_a, med_b = median(samples[(a.source, a.key)]), median(samples[(b.source, b.key)])
        tallies = [result.cross, result.per_series.setdefault(a.key, Tally())]
        if a.own:
            tallies.append(result.cross_own)
        gap = abs(b.started_s - a.started_s)
        tallies += [
            result.by_separation.setdefault(label, Tally()) for low, high, label in SEPARATIONS if low <= gap < high
        ]
        with_first = first[(a.key, a.version, a.group)] in held
        tallies.append((result.first_session if with_first else result.later_sessions).setdefault(a.key, Tally()))
        for base, head in ((med_a, med_b), (med_b, med_a)):
            alarm = session_medians(base, head, noise, settings).verdict == "suspected"
            called = {c: session_medians(base, head * (1 + c), noise, settings).verdict == "suspected" for c in CHANGES}
            for tally in tallies:
                tally.add(alarm, called)
            if not a.own:
                drifted = session_medians(base, head, noise, settings, control=True).verdict in ("slower", "faster")
                result.drift.add(drifted, {})


# -- within a session: one run cut into rounds -----------------------------------------------------------------


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


def _ab_calls(base: list[float], head: list[float], settings: Settings) -> tuple[bool, dict[float, bool]]:
    """Whether the A/B rule confirms (calls slower) on these round medians, and with the head made slower."""
    alarm = round_medians(base, head, settings).verdict == "slower"
    called = {c: round_medians(base, [h * (1 + c) for h in head], settings).verdict == "slower" for c in CHANGES}
    return alarm, called


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
                a, b = [median(x) for x in a_rounds], [median(x) for x in b_rounds]
                tally = result.within.setdefault(kind, Tally())
                for base, head in ((a, b), (b, a)):
                    tally.add(*_ab_calls(base, head, settings))


# -- within a session: real runs as rounds ---------------------------------------------------------------------


def deviations(obs: list[Observation], value: Callable[[Observation], float | None]) -> dict[int, list[float]]:
    """Per session, each run's deviation from its (series, version, group, session) mean, scaled by
    sqrt(n / (n - 1)) so that its spread is one run's."""
    cells: dict[tuple[str, str | None, str, int], list[float]] = {}
    for o in obs:
        v = value(o)
        if v is not None:
            cells.setdefault((o.key, o.version, o.group, o.session), []).append(v)
    out: dict[int, list[float]] = {}
    for (_, _, _, session), values in cells.items():
        n = len(values)
        if n < 2:
            continue
        mean = sum(values) / n
        out.setdefault(session, []).extend((v - mean) * math.sqrt(n / (n - 1)) for v in values)
    return out


def simulate_ab(pool: list[float], settings: Settings, rounds: int, rng: np.random.Generator) -> Tally:
    """A/B runs whose rounds' log deviations are drawn from `pool` (real runs), through `round_medians`."""
    tally = Tally()
    values = np.asarray(pool)
    for _ in range(SIMULATED):
        base = np.exp(rng.choice(values, rounds)).tolist()
        head = np.exp(rng.choice(values, rounds)).tolist()
        tally.add(*_ab_calls(base, head, settings))
    return tally


def real_run_replay(obs: list[Observation], settings: Settings, result: Validation) -> None:
    rng = np.random.default_rng(SEED)
    families: dict[str, list[Observation]] = {}
    for o in obs:
        families.setdefault(keys.family_of(o.key), []).append(o)
    for family, members in sorted(families.items()):
        by_session = deviations(members, lambda o: o.log_median)
        pool = [d for ds in by_session.values() for d in ds]
        if len(pool) < 4:
            continue
        result.real[family] = simulate_ab(pool, settings, result.rounds, rng)
        result.real_counts[family] = (len(pool), len(by_session), float(np.std(pool)))
    # Own series divided by their class's normaliser, chosen without the session whose deviations are drawn.
    by_run: dict[str, dict[str, Observation]] = {}
    for o in obs:
        by_run.setdefault(o.source, {})[o.key] = o
    pools: dict[str, list[float]] = {}
    sessions_used: dict[str, set[int]] = {}
    for session in sorted({o.session for o in obs}):
        normalisers = learn_normalisers([o for o in obs if o.session != session])
        here = [o for o in obs if o.session == session and o.own]

        def divided(o: Observation, normalisers=normalisers) -> float | None:
            parts = keys.parse(o.key)
            chosen = normalisers.get(parts.cls) if parts else None
            control = by_run[o.source].get(parts.with_provider(chosen.control)) if chosen else None
            return None if control is None else o.log_median - control.log_median

        for cls in {keys.class_of(o.key) for o in here}:
            got = deviations([o for o in here if keys.class_of(o.key) == cls], divided).get(session, [])
            if got:
                pools.setdefault(cls, []).extend(got)
                sessions_used.setdefault(cls, set()).add(session)
    for cls, pool in sorted(pools.items()):
        if len(pool) < 4:
            continue
        raw = deviations([o for o in obs if o.own and keys.class_of(o.key) == cls], lambda o: o.log_median)
        raw_pool = [d for ds in raw.values() for d in ds]
        name = f"{cls} own series"
        result.real[name] = simulate_ab(raw_pool, settings, result.rounds, rng)
        result.real_counts[name] = (len(raw_pool), len(raw), float(np.std(raw_pool)))
        name = f"{cls} own series, normalised"
        result.real[name] = simulate_ab(pool, settings, result.rounds, rng)
        result.real_counts[name] = (len(pool), len(sessions_used[cls]), float(np.std(pool)))


def end_to_end(obs: list[Observation], samples, settings: Settings, machine: str, result: Validation) -> None:
    """Per cross-session comparison: nominated (leave-session-out) times its family's real-run A/B rate."""
    models = {}
    for a, b in null_pairs(obs):
        family = keys.family_of(a.key)
        ab = result.real.get(family)
        if ab is None:
            continue
        held = (a.session, b.session)
        if held not in models:
            models[held] = fit_model([o for o in obs if o.session not in held], machine)
        noise = models[held].lookup(a.key, a.version)
        med_a, med_b = median(samples[(a.source, a.key)]), median(samples[(b.source, b.key)])
        for base, head in ((med_a, med_b), (med_b, med_a)):
            alarm = (session_medians(base, head, noise, settings).verdict == "suspected") * ab.rate()
            called = {
                c: (session_medians(base, head * (1 + c), noise, settings).verdict == "suspected") * ab.power(c)
                for c in CHANGES
            }
            result.end_to_end.add(alarm, called)


# -- the A/B's cost ------------------------------------------------------------------------------------------


def run_seconds(files: list[ResultFile], session_of: dict[str, int]) -> dict[str, list[float]]:
    """Per set of history classes measured together, the wall times of one asv run: from a run's start to the
    next one's, where both measured the same series of one commit back to back in one session (A/A runs, as an
    A/B's rounds are)."""
    from .noise import file_start

    runs = sorted(((t, f) for f in files if (t := file_start(f)) is not None), key=lambda tf: tf[0])
    per_set: dict[str, list[float]] = {}
    for (t0, f0), (t1, f1) in itertools.pairwise(runs):
        same_session = session_of.get(str(f0.path)) == session_of.get(str(f1.path))
        if f0.commit != f1.commit or not same_session or set(f0.results) != set(f1.results):
            continue
        classes = sorted({keys.class_of(k) for k in f0.results})
        per_set.setdefault(" + ".join(classes), []).append(t1 - t0)
    return dict(sorted(per_set.items()))


# -- the whole replay ------------------------------------------------------------------------------------------


def validate(
    files: list[ResultFile],
    machine: str,
    is_own: Callable[[str], bool],
    code_id: CodeId | None = None,
    settings: Settings | None = None,
    rounds: int = 10,
    min_gap_s: float = MIN_SESSION_GAP_S,
) -> Validation:
    settings = settings or Settings()
    files = [f for f in files if f.machine == machine]
    session_of = sessions(files, min_gap_s)
    obs = observations(files, is_own, code_id, session_of)
    samples = _samples(files)
    result = Validation(machine, settings, rounds, files=len(files), sessions=len(set(session_of.values())))
    cross_session_replay(obs, samples, settings, machine, result)
    within_session_replay(files, settings, result)
    real_run_replay(obs, settings, result)
    end_to_end(obs, samples, settings, machine, result)
    result.run_seconds = run_seconds(files, session_of)
    return result


# -- reports -------------------------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{100 * value:.1f}%"


def _with_interval(successes: float, n: float) -> str:
    if not n:
        return "n/a"
    lo, hi = wilson(successes, n)
    return f"{100 * successes / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def _row(label: str, count: str, tally: Tally, interval: bool = True) -> str:
    alarm = _with_interval(tally.alarms, tally.comparisons) if interval else _pct(tally.rate())
    cells = [label, count, alarm, *(_pct(tally.power(c)) for c in CHANGES)]
    return "| " + " | ".join(cells) + " |"


def _head(alarm: str) -> list[str]:
    head = ["comparison", "n", alarm, *(f"power at {c:.0%}" for c in CHANGES)]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]


def table(v: Validation) -> str:
    """The validation as Markdown tables (the ones in docs/asv.md): nomination, confirmation, end to end."""
    n = lambda t, unit: f"{int(t.comparisons)} {unit}"  # noqa: E731
    lines = ["Nomination across sessions (leave-session-out: the model learned without both sessions)", ""]
    lines += _head("suspects [95% CI]")
    lines.append(_row("every series, all pairs", n(v.cross, "comparisons"), v.cross))
    for _, _, label in SEPARATIONS:
        if label in v.by_separation:
            lines.append(
                _row(f"every series, {label}", n(v.by_separation[label], "comparisons"), v.by_separation[label])
            )
    for label, tallies in (("holding the series' first session", v.first_session), ("without it", v.later_sessions)):
        merged = merge(tallies.values())
        lines.append(_row(f"every series, pairs {label}", n(merged, "comparisons"), merged))
    lines.append(_row("own series only", n(v.cross_own, "comparisons"), v.cross_own))
    lines += ["", f"Confirmation within a session (the A/B rule, {v.rounds} rounds; it learns nothing)", ""]
    lines += _head("false confirmations [95% CI]")
    for kind in SPLITS:
        if kind in v.within:
            lines.append(_row(f"one run cut into rounds, {kind}", n(v.within[kind], "comparisons"), v.within[kind]))
    for name, tally in v.real.items():
        runs, sessions_, sd = v.real_counts[name]
        label = f"real runs as rounds: {name} ({runs} runs in {sessions_} sessions, sd {sd:.2%})"
        lines.append(_row(label, f"{int(tally.comparisons)} simulated", tally))
    lines += ["", "End to end: nominated across sessions, then confirmed by a real-run A/B", ""]
    lines += _head("confirmed on unchanged code")
    lines.append(_row("every series, all pairs", n(v.end_to_end, "comparisons"), v.end_to_end, interval=False))
    return "\n".join(lines) + "\n"


def series_table(v: Validation) -> str:
    """Per series across sessions: its suspects, split by whether the pair holds the series' first session."""
    head = ["series", "comparisons", "suspects", "with its first session", "without it", "power at 5%", "at 10%"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, tally in sorted(v.per_series.items(), key=lambda kv: (-kv[1].comparisons, kv[0])):
        first, later = v.first_session.get(key, Tally()), v.later_sessions.get(key, Tally())
        cells = [
            f"`{key}`",
            str(int(tally.comparisons)),
            _pct(tally.rate()),
            f"{_pct(first.rate())} of {int(first.comparisons)}",
            f"{_pct(later.rate())} of {int(later.comparisons)}",
            _pct(tally.power(0.05)),
            _pct(tally.power(0.10)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def cost_lines(v: Validation) -> str:
    lines = []
    for classes, seconds in v.run_seconds.items():
        mid = float(np.median(seconds))
        lines.append(
            f"- {classes}: one asv run {min(seconds):.0f}-{max(seconds):.0f} s (median {mid:.0f} s of "
            f"{len(seconds)}), so an A/B of {v.rounds} rounds ({2 * v.rounds} runs) about {2 * v.rounds * mid:.0f} s"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def summary(v: Validation) -> str:
    s = v.settings
    return (
        f"Replay of {v.machine}: {v.files} runs in {v.sessions} sessions; floor {s.floor:.0%}, suspects at one-sided "
        f"p < {s.suspect_alpha:g}, A/B at α {s.alpha:g} (two-sided); {v.sample_sets} runs cut into {v.rounds} "
        f"rounds ({v.skipped_sets} with fewer than {4 * v.rounds} samples left out). Controls called drift on "
        f"their own unchanged runs: {_pct(v.drift.rate())} of {int(v.drift.comparisons)} (never a failure).\n"
    )


def report(v: Validation) -> str:
    """Everything `compare --validate` prints."""
    return "\n".join(
        [
            summary(v),
            table(v),
            "Per series, across sessions:\n",
            series_table(v),
            "The A/B's cost on this machine (wall time of one asv run of the classes measured together):\n",
            cost_lines(v),
        ]
    )


def as_json(v: Validation) -> dict:
    def tally(t: Tally) -> dict:
        return {
            "comparisons": t.comparisons,
            "alarms": t.alarms,
            "rate": None if not t.comparisons else t.rate(),
            "interval": list(wilson(t.alarms, t.comparisons)) if t.comparisons else None,
            "power": {f"{c:g}": (None if not t.tries[c] else t.power(c)) for c in CHANGES},
        }

    return {
        "machine": v.machine,
        "files": v.files,
        "sessions": v.sessions,
        "settings": {"floor": v.settings.floor, "alpha": v.settings.alpha, "suspect_alpha": v.settings.suspect_alpha},
        "rounds": v.rounds,
        "nomination": {
            "every series": tally(v.cross),
            "own series": tally(v.cross_own),
            **{label: tally(t) for label, t in v.by_separation.items()},
        },
        "confirmation": {
            **{f"one run, {k}": tally(t) for k, t in v.within.items()},
            **{f"real runs, {k}": tally(t) for k, t in v.real.items()},
        },
        "end_to_end": tally(v.end_to_end),
        "control_drift": tally(v.drift),
        "per_series": {k: tally(t) for k, t in v.per_series.items()},
        "run_seconds": v.run_seconds,
        "table": table(v),
    }


# -- a stored A/A paired run ---------------------------------------------------------------------------------


def ab_replay(run, settings: Settings, is_own: Callable[[str], bool] | None = None) -> Tally:
    """A stored A/B run of one commit against itself (an A/A paired run): confirmations as it is, power with the
    head's rounds made 1-10% slower, per series through `stats.round_medians`."""
    tally = Tally()
    series = sorted({k for r in run.rounds for k in r.base if r.base[k].samples})
    for key in series:
        pairs = [
            (median(r.base[key].samples), median(r.head[key].samples))
            for r in run.rounds
            if r.base.get(key) and r.base[key].samples and r.head.get(key) and r.head[key].samples
        ]
        if len(pairs) != len(run.rounds):
            continue
        tally.add(*_ab_calls([b for b, _ in pairs], [h for _, h in pairs], settings))
    return tally


def ab_table(tally: Tally, label: str) -> str:
    lines = _head("false confirmations [95% CI]")
    lines.append(_row(label, f"{int(tally.comparisons)} series", tally))
    return "\n".join(lines) + "\n"
