"""Per-series verdicts between two asv results: across sessions (a commit and its base), or paired A/B."""

from __future__ import annotations

import argparse
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .asvresults import BenchmarkResult, ResultFile
from .noise import NoiseModel, default_prior
from .stats import Noise, Settings, Verdict, cross_session, too_little

# Rows that carry no verdict, after the four verdicts, in report order.
OTHER_STATES = ("failed", "skipped", "new", "gone", "incomparable")

# Providers whose code lives in this repository: a commit can change them. Every other provider (vendor
# libraries, the compiler, flash-attn) is pinned by the environment, so its series are controls: their
# sessions are repeats of unchanged code, and one called faster or slower means the machine moved.
# Which those are is asked of the tier records (suite/tiers.py: a tier's own_code), never of a tier's name.


@functools.cache
def default_own_providers(plugins: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The asv names of the providers whose tier is own code: the built-in ones, installed plugins' and
    those of the `plugins` named."""
    from ..catalog import build

    return tuple(sorted({re.sub(r"\W", "_", name) for name in build(plugins).own_code_providers()}))


# asv names: <module>.<Class>.track_<provider>(<params>)
_KEY = re.compile(r"^(?P<family>.+)\.track_(?P<provider>\w+)(?P<params>\(.*\))?$")


@dataclass
class Row:
    key: str
    state: str  # one of stats.VERDICTS or OTHER_STATES: the cross-session (or A/B) verdict
    verdict: Verdict | None = None
    note: str = ""
    own: bool = True  # the project's own code, not a control
    confirmation: Verdict | None = None  # the paired A/B verdict that re-measured this row, if one did

    @property
    def final(self) -> str:
        """The verdict that counts: the A/B one where the row was re-measured."""
        return self.confirmation.verdict if self.confirmation is not None else self.state

    @property
    def confirmed(self) -> bool | None:
        """None: not re-measured; True: A/B called it slower too; False: A/B did not."""
        return None if self.confirmation is None else self.confirmation.verdict == "slower"

    @property
    def suspect(self) -> bool:
        """Looks slower: called slower, or an estimate past the floor that the noise leaves open."""
        v = self.verdict
        return self.state == "slower" or (
            self.state == "ambiguous" and v is not None and math.isfinite(v.ratio) and v.ratio > 1
        )


@dataclass
class Report:
    base: str  # commit or file label
    head: str
    machine: str
    settings: Settings
    method: str  # "across sessions" or "paired A/B"
    noise_source: str  # where the noise came from, for the reader
    rows: list[Row] = field(default_factory=list)
    own_providers: tuple[str, ...] = field(default_factory=default_own_providers)
    base_commit: str = ""
    head_commit: str = ""

    def count(self, state: str) -> int:
        return sum(1 for r in self.rows if r.final == state)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.final == "slower"]

    @property
    def moved_controls(self) -> list[Row]:
        """Control series (providers not built here) called faster or slower: the machine drifted."""
        return [r for r in self.rows if r.final in ("faster", "slower") and not r.own]


def split_key(key: str) -> tuple[str, str, str] | None:
    """(family, provider, params) of an asv benchmark name `module.Class.track_provider(params)`, else None."""
    m = _KEY.match(key)
    return (m["family"], m["provider"], m["params"] or "") if m else None


def is_own(key: str, own_providers: tuple[str, ...] | None = None) -> bool:
    parts = split_key(key)
    own = default_own_providers() if own_providers is None else own_providers
    return parts is None or parts[1] in own  # unknown names are never treated as controls


def own_test(own_providers: tuple[str, ...]) -> Callable[[str], bool]:
    return lambda key: is_own(key, own_providers)


def state_row(key: str, base: BenchmarkResult | None, head: BenchmarkResult | None, own: bool) -> Row | None:
    """The row of a pair that cannot get a verdict (new, gone, another version, failed, skipped), else None."""
    if base is None:
        return Row(key, "new", note="no result at the base", own=own)
    if head is None:
        return Row(key, "gone", note="no result at the head", own=own)
    if base.version != head.version:
        return Row(key, "incomparable", note="benchmark version changed (cases or timing settings differ)", own=own)
    for side, result in (("base", base), ("head", head)):
        if result.status != "ok":
            state = "failed" if result.status == "failed" else "skipped"
            return Row(key, state, note=f"{result.status} at the {side}", own=own)
    return None


def compare_row(
    key: str,
    base: BenchmarkResult | None,
    head: BenchmarkResult | None,
    noise: NoiseModel | None,
    settings: Settings,
    own: bool = True,
) -> Row:
    fixed = state_row(key, base, head, own)
    if fixed is not None:
        return fixed
    level = noise.lookup(key, head.version) if noise else _no_model_noise()
    if not base.samples or not head.samples:
        # Without samples only asv's medians exist: show them, call nothing.
        why = "no samples stored (run asv with --record-samples)"
        v = too_little(why, "session", 2, settings, base.value, head.value)
        return Row(key, v.verdict, v, v.reason, own)
    v = cross_session(base.samples, head.samples, level, settings)
    return Row(key, v.verdict, v, v.reason, own)


def _no_model_noise() -> Noise:
    prior = default_prior()
    return Noise(prior.sigma, 4.0, f"no noise model: prior {prior.source}")


_ORDER = {state: i for i, state in enumerate(("slower", "faster", "ambiguous", *OTHER_STATES, "unchanged"))}


def sort_rows(rows: list[Row]) -> None:
    rows.sort(key=lambda r: (_ORDER[r.final], r.key))


def bench_regex(text: str) -> str:
    """argparse type of --bench: a regular expression (asv's and ours), or a clear error."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression ({exc})") from None
    return text


def select(keys: set[str], bench: str | None) -> list[str]:
    pattern = re.compile(bench) if bench else None
    return sorted(k for k in keys if pattern is None or pattern.search(k))


def compare_results(
    base: ResultFile,
    head: ResultFile,
    noise: NoiseModel | None,
    settings: Settings,
    noise_source: str = "",
    bench: str | None = None,
    own_providers: tuple[str, ...] | None = None,
) -> Report:
    """Every benchmark of either file (matching `bench`, a regex), worst news first: the cross-session verdict."""
    own_providers = default_own_providers() if own_providers is None else own_providers
    report = Report(
        base.label,
        head.label,
        head.machine,
        settings,
        "across sessions",
        noise_source,
        own_providers=own_providers,
        base_commit=base.commit,
        head_commit=head.commit,
    )
    for key in select(set(base.results) | set(head.results), bench):
        own = is_own(key, own_providers)
        report.rows.append(compare_row(key, base.results.get(key), head.results.get(key), noise, settings, own))
    sort_rows(report.rows)
    return report
