"""Per-benchmark verdicts between two asv result files (a commit and its base), with the noise model."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .asvresults import BenchmarkResult, ResultFile
from .noise import NoiseModel
from .stats import Comparison, Settings, compare_samples, threshold

# Rows that carry no verdict, after the four verdicts, in report order.
OTHER_STATES = ("failed", "skipped", "new", "gone", "incomparable")

# Providers whose code lives in this repository: a commit can change them. Every other provider (vendor
# libraries, the compiler, flash-attn) is pinned by the environment, so between two runs in the same
# environment its series are controls: when one of them moves, the machine moved (clocks, power state,
# another session), and the project's own series in the same case get at least that much threshold.
OWN_PROVIDERS = ("triton",)

# asv names: <module>.<Class>.track_<provider>(<params>)
_KEY = re.compile(r"^(?P<family>.+)\.track_(?P<provider>\w+)(?P<params>\(.*\))?$")


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
    own_providers: tuple[str, ...] = OWN_PROVIDERS  # the rest are controls for machine drift

    def count(self, state: str) -> int:
        return sum(1 for r in self.rows if r.state == state)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.state == "slower"]

    @property
    def moved_controls(self) -> list[Row]:
        """Control series (providers not built here) called faster or slower: the machine drifted."""
        return [r for r in self.rows if r.state in ("faster", "slower") and not is_own(r.key, self.own_providers)]


def split_key(key: str) -> tuple[str, str, str] | None:
    """(family, provider, params) of an asv benchmark name `module.Class.track_provider(params)`, else None."""
    m = _KEY.match(key)
    return (m["family"], m["provider"], m["params"] or "") if m else None


def is_own(key: str, own_providers: tuple[str, ...] = OWN_PROVIDERS) -> bool:
    parts = split_key(key)
    return parts is None or parts[1] in own_providers  # unknown names are never treated as controls


def surely_moved(c: Comparison) -> float:
    """How far the ratio's interval lies beyond 1, as a relative change (0 when it contains 1)."""
    if not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
        return 0.0
    if c.ci_low > 1:
        return c.ci_low - 1
    if c.ci_high < 1:
        return 1 / c.ci_high - 1
    return 0.0


def _samples(result: BenchmarkResult) -> list[float]:
    return result.samples or []


def compare_row(
    key: str,
    base: BenchmarkResult | None,
    head: BenchmarkResult | None,
    noise: NoiseModel | None,
    settings: Settings,
    drift: tuple[float, str] = (0.0, ""),  # (how far a control of this case surely moved, that control)
) -> Row:
    if base is None:
        return Row(key, "new", note="no result at the base commit")
    if head is None:
        return Row(key, "gone", note="no result at the head commit")
    if base.version != head.version:
        return Row(key, "incomparable", note="benchmark version changed (cases or timing settings differ)")
    for side, result in (("base", base), ("head", head)):
        if result.status != "ok":
            return Row(
                key, "failed" if result.status == "failed" else "skipped", note=f"{result.status} at the {side} commit"
            )
    level, origin = noise.lookup(key) if noise else (0.0, "no noise model")
    before, after = _samples(base), _samples(head)
    if not before or not after:
        # Without samples only asv's medians exist: show them, call nothing.
        comparison = Comparison(
            base.value,
            head.value,
            head.value / base.value,
            float("nan"),
            float("nan"),
            float("nan"),
            max(settings.floor, level),
            "ambiguous",
            "no samples stored (run asv with --record-samples)",
        )
        return Row(key, comparison.verdict, comparison, level, origin, comparison.reason)
    moved, control = drift
    comparison = compare_samples(before, after, level, settings, moved)
    note = comparison.reason
    if moved > threshold(settings, level):
        note += f"; threshold raised to the drift of the control {control}"
    return Row(key, comparison.verdict, comparison, level, origin, note)


def _drift_by_case(moved_controls: list[Row]) -> dict[tuple[str, str], tuple[float, str]]:
    """Per (family, params): the largest sure move among the control series that moved."""
    drift: dict[tuple[str, str], tuple[float, str]] = {}
    for row in moved_controls:
        family, provider, params = split_key(row.key)  # controls always have a parsed name (see is_own)
        moved = surely_moved(row.comparison)
        if moved > drift.get((family, params), (0.0, ""))[0]:
            drift[(family, params)] = (moved, f"{provider} x{row.comparison.ratio:.3f}")
    return drift


def compare_results(
    base: ResultFile,
    head: ResultFile,
    noise: NoiseModel | None,
    settings: Settings,
    noise_source: str = "",
    bench: str | None = None,
    own_providers: tuple[str, ...] = OWN_PROVIDERS,
) -> Report:
    """Every benchmark of either file (matching `bench`, a regex), worst news first.

    The project's own series (`own_providers`) are judged against at least the drift of the control
    series of the same case: a control that moved beyond its threshold sets how much change the machine
    alone can account for."""
    pattern = re.compile(bench) if bench else None
    keys = sorted(set(base.results) | set(head.results))
    if pattern:
        keys = [k for k in keys if pattern.search(k)]
    report = Report(base, head, settings, noise_source, own_providers=own_providers)
    # Controls first: how far they moved sets the threshold of the project's own series of each case.
    own = [k for k in keys if is_own(k, own_providers)]
    for key in (k for k in keys if not is_own(k, own_providers)):
        report.rows.append(compare_row(key, base.results.get(key), head.results.get(key), noise, settings))
    drift = _drift_by_case(report.moved_controls)
    for key in own:
        parts = split_key(key)
        moved = drift.get((parts[0], parts[2]), (0.0, "")) if parts else (0.0, "")
        report.rows.append(compare_row(key, base.results.get(key), head.results.get(key), noise, settings, moved))
    order = {state: i for i, state in enumerate(("slower", "faster", "ambiguous", *OTHER_STATES, "unchanged"))}
    report.rows.sort(key=lambda r: (order[r.state], r.key))
    return report
