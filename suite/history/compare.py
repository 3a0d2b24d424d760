"""Per-benchmark verdicts between two asv result files (a commit and its base), with the noise model."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .asvresults import BenchmarkResult, ResultFile
from .noise import NoiseModel
from .stats import Comparison, Settings, compare_samples

# Rows that carry no verdict, after the four verdicts, in report order.
OTHER_STATES = ("failed", "skipped", "new", "gone", "incomparable")


@dataclass
class Row:
    key: str
    state: str  # one of stats.VERDICTS or OTHER_STATES
    comparison: Comparison | None = None
    noise: float | None = None
    noise_origin: str = ""
    note: str = ""


@dataclass
class Report:
    base: ResultFile
    head: ResultFile
    settings: Settings
    noise_source: str  # where the noise model came from, for the reader
    rows: list[Row] = field(default_factory=list)

    def count(self, state: str) -> int:
        return sum(1 for r in self.rows if r.state == state)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.state == "slower"]


def _samples(result: BenchmarkResult) -> list[float]:
    return result.samples or []


def compare_row(key: str, base: BenchmarkResult | None, head: BenchmarkResult | None,
                noise: NoiseModel | None, settings: Settings) -> Row:
    if base is None:
        return Row(key, "new", note="no result at the base commit")
    if head is None:
        return Row(key, "gone", note="no result at the head commit")
    if base.version != head.version:
        return Row(key, "incomparable", note="benchmark version changed (cases or timing settings differ)")
    for side, result in (("base", base), ("head", head)):
        if result.status != "ok":
            return Row(key, "failed" if result.status == "failed" else "skipped",
                       note=f"{result.status} at the {side} commit")
    level, origin = noise.lookup(key) if noise else (0.0, "no noise model")
    before, after = _samples(base), _samples(head)
    if not before or not after:
        # Without samples only asv's medians exist: show them, call nothing.
        comparison = Comparison(base.value, head.value, head.value / base.value, float("nan"), float("nan"),
                                float("nan"), max(settings.floor, level), "ambiguous",
                                "no samples stored (run asv with --record-samples)")
    else:
        comparison = compare_samples(before, after, level, settings)
    return Row(key, comparison.verdict, comparison, level, origin, comparison.reason)


def compare_results(base: ResultFile, head: ResultFile, noise: NoiseModel | None, settings: Settings,
                    noise_source: str = "", bench: str | None = None) -> Report:
    """Every benchmark of either file (matching `bench`, a regex), worst news first."""
    pattern = re.compile(bench) if bench else None
    keys = sorted(set(base.results) | set(head.results))
    if pattern:
        keys = [k for k in keys if pattern.search(k)]
    report = Report(base, head, settings, noise_source)
    for key in keys:
        report.rows.append(compare_row(key, base.results.get(key), head.results.get(key), noise, settings))
    order = {state: i for i, state in enumerate(("slower", "faster", "ambiguous", *OTHER_STATES, "unchanged"))}
    report.rows.sort(key=lambda r: (order[r.state], r.key))
    return report
