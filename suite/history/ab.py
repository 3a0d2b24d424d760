"""Paired A/B: two commits measured in one session, alternating round by round on the same machine.

Each round runs asv once per commit (`asv run --python=same --set-commit-hash`, each commit from its own
offline build, as `nightly --existing-env` measures it), base first in even rounds and head first in odd
ones, so drift through the session hits both alike. A round is a whole asv run: its median spans every
repetition and turn of the harness, so it averages over the level shifts a GPU's timings show within a
session. The rounds are kept in results/compare/ab/<machine>-<base8>-<head8>.json; `compare_ab` turns
them into paired verdicts (stats.round_medians): an own series called slower is a confirmed regression.

Where the noise model names a normaliser for a class (noise.Normaliser: a control whose ratio to the class's
own series is steadier within a session than the series itself), each round's own median is divided by that
control's median in the same asv run before the rounds are compared; the control's series is measured anyway
(one process measures the whole class), so this costs nothing.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import asvresults, keys
from .asvtool import BUILD_ENV, AsvConfig, AsvError, build_commit, env_with_build, register_machine, run_asv
from .compare import Report, Row, ab_state, control_state, default_own_providers, is_own, select, sort_rows, state_row
from .inputs import write_text
from .noise import Normaliser
from .stats import Settings, Verdict, median, round_medians

AB_FORMAT = 1
DEFAULT_ROUNDS = 10  # the replay's choice: see docs/asv.md, Validation


@dataclass
class Measured:
    """One series in one asv run."""

    version: str | None
    value: float | None  # asv's median; None failed, NaN skipped
    samples: list[float] | None


@dataclass
class Round:
    order: list[str]  # ["base", "head"] or ["head", "base"]
    base: dict[str, Measured] = field(default_factory=dict)
    head: dict[str, Measured] = field(default_factory=dict)


@dataclass
class ABRun:
    machine: str
    base: str  # full commit hashes
    head: str
    rounds: list[Round] = field(default_factory=list)
    seconds: float = 0.0  # wall time of all rounds (builds excluded)
    bench: str | None = None
    format: int = AB_FORMAT
    planned: int = 0  # rounds asked for; more than len(rounds) where the run was cut short (0: not recorded)

    @property
    def series(self) -> int:
        return len({k for r in self.rounds for k in (*r.base, *r.head)})


def ab_file(config: AsvConfig, machine: str, base: str, head: str) -> Path:
    return config.root / "results" / "compare" / "ab" / f"{machine}-{base[:8]}-{head[:8]}.json"


def _measure_once(
    config: AsvConfig, machine: str, sha: str, build: Path, bench: str | None, tmp: Path
) -> dict[str, Measured]:
    dest = Path(tempfile.mkdtemp(prefix="round-", dir=tmp))
    variant = config.variant(dest / "config", results_dir=str(dest / "results"))
    env = env_with_build(build)
    env[BUILD_ENV] = str(build)
    args = ["run", "--python=same", "--set-commit-hash", sha, "--machine", machine, "--record-samples"]
    code = run_asv(args + (["--bench", bench] if bench else []), variant, env)
    if code not in (0, 2):  # 2: some benchmarks failed, the others are still results
        raise AsvError(f"asv run of {sha[:8]} for an A/B round failed (exit {code})")
    files = asvresults.result_files(dest / "results", machine)
    if not files:
        raise AsvError(f"asv run of {sha[:8]} for an A/B round stored no results in {dest / 'results' / machine}")
    out = {}
    for path in files:
        for key, r in asvresults.load(path).results.items():
            out[key] = Measured(r.version, r.value, r.samples)
    return out


def run_ab(
    config: AsvConfig, machine: str, base: str, head: str, rounds: int = DEFAULT_ROUNDS, bench: str | None = None
) -> ABRun:
    """Register the machine with asv, build both commits, then `rounds` rounds of one asv run each, order
    alternating; saved as JSON after every round, so a run cut short (a time limit, an interrupt) keeps the
    rounds it finished."""
    if rounds < 2:
        raise AsvError(f"--rounds={rounds}: an A/B run needs at least 2 rounds ({DEFAULT_ROUNDS} by default)")
    builds = {sha: build_commit(config.repo, sha, config.root / ".asv" / "builds" / sha[:12]) for sha in (base, head)}
    run = ABRun(machine, base, head, bench=bench, planned=rounds)
    path = ab_file(config, machine, base, head)
    with tempfile.TemporaryDirectory(prefix="tierbench-ab-") as tmp:
        register_machine(machine, config.variant(Path(tmp)))  # asv asks for the machine's record first
        start = time.monotonic()
        for i in range(rounds):
            order = ["base", "head"] if i % 2 == 0 else ["head", "base"]
            measured = Round(order)
            for side in order:
                sha = base if side == "base" else head
                print(f"tierbench compare --ab: round {i + 1}/{rounds}, {side} {sha[:8]}", flush=True)
                setattr(measured, side, _measure_once(config, machine, sha, builds[sha], bench, Path(tmp)))
            run.rounds.append(measured)
            run.seconds = time.monotonic() - start
            save(run, path)
    return run


def save(run: ABRun, path: Path) -> Path:
    # Through a temporary file (write_text): an interrupt while writing leaves the last complete round's file.
    write_text(path, json.dumps(asdict(run), indent=1) + "\n", "the A/B run")
    return path


def load(path: Path) -> ABRun:
    try:
        data = json.loads(path.read_text())
        if data.get("format") != AB_FORMAT:
            raise ValueError(f"format {data.get('format')!r} is not {AB_FORMAT}")
        rounds = [
            Round(
                r["order"],
                {k: Measured(**m) for k, m in r["base"].items()},
                {k: Measured(**m) for k, m in r["head"].items()},
            )
            for r in data.pop("rounds")
        ]
        return ABRun(rounds=rounds, **data)
    except FileNotFoundError:
        raise asvresults.ResultsError(f"no A/B run {path}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise asvresults.ResultsError(f"{path} is not an A/B run ({exc})") from None


def _as_result(key: str, m: Measured | None) -> asvresults.BenchmarkResult | None:
    return None if m is None else asvresults.BenchmarkResult(key, key, (), m.version, m.value, m.samples)


def _round_medians(run: ABRun, key: str) -> tuple[list[float], list[float]] | None:
    """(base, head) medians per round of a series, or None where a round lacks its samples."""
    base, head = [], []
    for r in run.rounds:
        b, h = r.base.get(key), r.head.get(key)
        if not (b and b.samples and h and h.samples):
            return None
        base.append(median(b.samples))
        head.append(median(h.samples))
    return base, head


def paired_verdict(
    run: ABRun, key: str, settings: Settings, normaliser: Normaliser | None = None
) -> tuple[Verdict, str]:
    """The paired verdict of one series over the rounds, divided round by round by the normaliser's series of
    the same case where one is given and measured in every round; and what it was divided by."""
    base, head = _round_medians(run, key) or ([], [])
    parts = keys.parse(key)
    if normaliser is not None and parts is not None and base:
        control = _round_medians(run, parts.with_provider(normaliser.control))
        if control is not None:
            base = [b / c for b, c in zip(base, control[0])]
            head = [h / c for h, c in zip(head, control[1])]
            return round_medians(base, head, settings), normaliser.source
    return round_medians(base, head, settings), ""


def compare_ab(
    run: ABRun,
    settings: Settings,
    bench: str | None = None,
    own_providers: tuple[str, ...] | None = None,
    normalisers: dict[str, Normaliser] | None = None,
) -> Report:
    """Per series, the paired verdict over the rounds (a series failed or skipped in any round gets none): an
    own series called slower is confirmed; a control that moved is drift between the two builds' runs."""
    per_series = run.seconds / run.series if run.series else 0.0
    cut = f" of {run.planned} planned, cut short" if run.planned > len(run.rounds) else ""
    report = Report(
        run.base[:8],
        run.head[:8],
        run.machine,
        settings,
        "paired A/B",
        f"measured by the rounds themselves ({len(run.rounds)} rounds{cut}, {run.seconds:.0f} s, {per_series:.1f} s "
        "per series)",
        own_providers=default_own_providers() if own_providers is None else own_providers,
        base_commit=run.base,
        head_commit=run.head,
    )
    keys_ = {k for r in run.rounds for k in (*r.base, *r.head)}
    for key in select(keys_, bench):
        own = is_own(key, own_providers)
        row = None
        for r in run.rounds:
            row = state_row(key, _as_result(key, r.base.get(key)), _as_result(key, r.head.get(key)), own)
            if row is not None:
                break
        if row is None:
            normaliser = (normalisers or {}).get(keys.class_of(key)) if own else None
            v, divided = paired_verdict(run, key, settings, normaliser)
            if own:
                row = Row(key, ab_state(v), ab=v, note=v.reason, own=True, normalised_by=divided)
            else:
                state = control_state(v)
                why = "a control moved between the two builds' runs: the harness or the machine differed"
                row = Row(key, state, ab=v, note=why if state == "drift" else v.reason, own=False)
        report.rows.append(row)
    sort_rows(report.rows)
    return report
