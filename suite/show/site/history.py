"""asv's results read back as series over commits, with their steps found.

asv 0.6 (result api_version 2) keeps one JSON file per (machine, commit, environment) under
<results>/<machine>/, next to that machine's machine.json, and the benchmark definitions in
<results>/benchmarks.json. A result file holds `commit_hash`, `date` (commit time, ms since the epoch),
`result_columns` (names of the columns) and `results`: per benchmark a row in those columns, whose
`result` is one value per combination of the benchmark's parameters (their cartesian product, in
order); null means the benchmark failed there, NaN that it was skipped.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...history import asvresults

STEP_THRESHOLD = 0.05  # a change of the piecewise-constant fit smaller than this is noise, not a step
# What `tierbench compare` and `nightly` concluded about a series at a commit (results/compare/*.json), as the
# history pages name it. A step is not a verdict: only a paired A/B in one session confirms a regression.
VERDICT_TEXT = {
    "confirmed": "confirmed slower",
    "suspected": "suspected, not confirmed",
    "faster": "faster",
    "unchanged": "unchanged",
    "drift": "control moved: machine drift, never a failure",
    "steady": "control steady",
}


@dataclass(frozen=True)
class Commit:
    hash: str
    date: float  # ms since the epoch, as asv stores it

    @property
    def short(self) -> str:
        return self.hash[:8]


@dataclass
class Step:
    index: int  # position (in the series' own points) of the first point after the step
    before: float
    after: float

    @property
    def change(self) -> float:
        return self.after / self.before - 1 if self.before else math.inf


@dataclass
class Series:
    machine: str  # machine name, with the environment when a machine ran several
    params: dict[str, str]  # parameter name -> value as asv spells it (its repr)
    points: list[tuple[Commit, float]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)


@dataclass
class Benchmark:
    name: str
    kind: str  # asv's type: time, mem, peakmem, track
    unit: str
    param_names: list[str]
    series: list[Series] = field(default_factory=list)

    @property
    def lower_is_better(self) -> bool | None:
        unit = self.unit.lower()
        if self.kind in ("time", "mem", "peakmem") or unit in ("seconds", "bytes"):
            return True
        if "/s" in unit or "flop" in unit:  # a rate
            return False
        return None


def _load(path: Path) -> Any:
    # json.loads reads NaN and Infinity as asv writes them.
    return json.loads(path.read_text(encoding="utf-8"))


def _definitions(path: Path, fallback: dict[str, Any]) -> dict[str, Any]:
    """asv's benchmark definitions (benchmarks.json): name -> spec; the fallback where the file is missing,
    and where it is unreadable or not an object (with a warning naming it)."""
    if not path.is_file():
        return fallback
    try:
        data = _load(path)
    except (OSError, ValueError) as exc:
        warnings.warn(f"{path}: benchmark definitions not read ({exc}); names and units guessed", stacklevel=3)
        return fallback
    if not isinstance(data, dict):
        warnings.warn(f"{path}: benchmark definitions are not a JSON object; names and units guessed", stacklevel=3)
        return fallback
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def read_asv(asv_dir: Path) -> list[Benchmark]:
    """Every benchmark with at least one result, its series per (parameter combination, machine).

    A file that is not an asv result of this format is left out with a warning naming it; the others
    are read."""
    if not asv_dir.is_dir():
        return []
    definitions = _definitions(asv_dir / "benchmarks.json", {})
    raw: dict[tuple[str, tuple[str, ...], str], dict[Commit, float]] = {}
    meta: dict[str, Benchmark] = {}
    per_machine: dict[Path, dict] = {}  # a machine's own definitions (<machine>/benchmarks.json), where kept
    for path in sorted(asv_dir.glob("*/*.json")):
        if path.name in asvresults.NOT_RESULTS:
            continue
        try:
            data = asvresults.load(path)
        except asvresults.ResultsError as exc:
            warnings.warn(f"left out of the history: {exc}", stacklevel=2)
            continue
        if path.parent not in per_machine:
            per_machine[path.parent] = _definitions(path.parent / "benchmarks.json", definitions)
        defined = per_machine[path.parent]
        commit = Commit(str(data.commit), float(data.date or 0))
        for result in data.results.values():
            spec = defined.get(result.name) or {}
            # asv hides results measured by another version of the benchmark's code: so do we.
            if spec.get("version") and result.version and result.version != spec["version"]:
                continue
            if result.name not in meta:
                names = spec.get("param_names")
                if not (isinstance(names, list) and len(names) == len(result.params)):
                    names = [f"param{i + 1}" for i in range(len(result.params))]
                kind = spec.get("type") or result.name.rsplit(".", 1)[-1].split("_")[0]
                meta[result.name] = Benchmark(
                    result.name, str(kind), str(spec.get("unit") or ""), list(map(str, names))
                )
            if result.value is not None and math.isfinite(result.value):
                raw.setdefault((result.name, result.params, f"{data.machine}\0{data.env}"), {})[commit] = result.value
    envs_per_machine: dict[str, set[str]] = {}
    for _, _, key in raw:
        machine, env = key.split("\0")
        envs_per_machine.setdefault(machine, set()).add(env)
    for (name, combo, key), by_commit in sorted(raw.items(), key=lambda kv: (kv[0][0], kv[0][2])):
        machine, env = key.split("\0")
        label = f"{machine} · {env}" if len(envs_per_machine[machine]) > 1 else machine
        bench = meta[name]
        series = Series(
            label,
            dict(zip(bench.param_names, combo)),
            sorted(by_commit.items(), key=lambda cv: (cv[0].date, cv[0].hash)),
        )
        series.steps = find_steps([v for _, v in series.points])
        bench.series.append(series)
    return sorted(meta.values(), key=lambda b: b.name)


def find_steps(values: list[float], threshold: float = STEP_THRESHOLD) -> list[Step]:
    """Steps of a series: where its piecewise-constant fit moves by at least `threshold` (relative).

    The fit is asv's own (`asv.step_detect.detect_steps`, an L1 Potts model whose penalty is chosen from
    the data), so our steps are the ones asv's regression page reports. Without asv, `window_steps`.
    """
    if len(values) < 2:
        return []
    try:
        from asv.step_detect import detect_steps
    except ImportError:
        return window_steps(values, threshold=threshold)
    segments = detect_steps(values)
    steps = []
    for (_, _, before, *_), (left, _, after, *_) in itertools.pairwise(segments):
        if before and abs(after / before - 1) >= threshold:
            steps.append(Step(left, before, after))
    return steps


def window_steps(values: list[float], window: int = 3, threshold: float = STEP_THRESHOLD) -> list[Step]:
    """Simple step detection: the median of the `window` points before each position against the median
    of the `window` points from it on; a step is where they differ by at least `threshold` (relative),
    and by more than at the positions within `window` of it (which straddle the same step)."""
    n = len(values)
    w = max(1, min(window, n // 2))
    change = {}
    for i in range(w, n - w + 1):
        before, after = statistics.median(values[i - w : i]), statistics.median(values[i : i + w])
        if before:
            change[i] = (after / before - 1, before, after)

    def score(i: int) -> tuple[float, float]:
        # Windows near a step all straddle it; the jump between neighbours breaks the tie.
        return abs(change[i][0]), abs(values[i] - values[i - 1])

    steps = []
    for i, (c, before, after) in change.items():
        rivals = [j for j in range(i - w + 1, i + w) if j in change and j != i]
        if abs(c) >= threshold and all(score(i) > score(j) or (score(i) == score(j) and i < j) for j in rivals):
            steps.append(Step(i, before, after))
    return steps


@dataclass(frozen=True)
class SeriesVerdict:
    state: str  # a key of VERDICT_TEXT
    decided_by: str

    @property
    def text(self) -> str:
        how = f" ({self.decided_by})" if self.decided_by else ""
        return VERDICT_TEXT[self.state] + how


def read_verdicts(compare_dir: Path) -> dict[tuple[str, str], SeriesVerdict]:
    """(series, head commit) -> the verdict of the comparison reports in `compare_dir` (JSON, format 2); a file
    that is not one is left out with a warning, and so are states this page does not know."""
    out: dict[tuple[str, str], SeriesVerdict] = {}
    for path in sorted(compare_dir.glob("*.json")) if compare_dir.is_dir() else []:
        try:
            data = _load(path)
            if not isinstance(data, dict) or data.get("format") != 2:
                continue  # another file kept there (an A/B run's rounds are in ab/)
            head = str(data["head"])
            for row in data["series"]:
                state = row.get("verdict")
                if state in VERDICT_TEXT:
                    out[(str(row["benchmark"]), head)] = SeriesVerdict(state, str(row.get("decided_by") or ""))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            warnings.warn(f"{path}: comparison report not read ({exc})", stacklevel=2)
    return out


def series_key(benchmark: Benchmark, series: Series) -> str:
    """The asv name of one series of a benchmark, as the comparison reports spell it."""
    return asvresults.benchmark_key(benchmark.name, tuple(series.params.values()))


def asv_url(benchmark: Benchmark, series: Series | None = None) -> str:
    """The address of a benchmark's graph in asv's published site, relative to the site's root."""
    from urllib.parse import quote

    url = "history/index.html#" + quote(benchmark.name, safe="._-")
    if series is not None:
        query = [("machine", series.machine.split(" · ")[0])] + [(f"p-{k}", v) for k, v in series.params.items()]
        url += "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in query)
    return url
