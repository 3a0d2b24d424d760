"""Per-series verdicts between two asv results: nominated across sessions, confirmed by a paired A/B.

Each row ends in one state, and says how it was decided:
- the project's own series: `confirmed` (a paired A/B in one session called it slower: the only state that
  fails a run), `suspected` (slower across sessions, and not yet re-measured, or an A/B that could not tell),
  `unchanged`, `faster`;
- controls (providers this project does not build, pinned by the environment): `drift` (moved beyond their
  noise: the machine, or the harness, changed) or `steady`; never a failure;
- no verdict: `failed`, `skipped`, `new`, `gone`, `incomparable` (another benchmark version), `unjudged` (no
  samples, or too few).
"""

from __future__ import annotations

import argparse
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from . import keys
from .asvresults import BenchmarkResult, ResultFile
from .noise import NoiseModel, default_prior
from .stats import Noise, Settings, Verdict, cross_session, too_little

OWN_STATES = ("confirmed", "suspected", "faster", "unchanged")
CONTROL_STATES = ("drift", "steady")
# Rows that carry no verdict, in report order.
OTHER_STATES = ("failed", "skipped", "new", "gone", "incomparable", "unjudged")
STATES = OWN_STATES + CONTROL_STATES + OTHER_STATES

# Providers whose code lives in this repository: a commit can change them. Every other provider (vendor
# libraries, the compiler, flash-attn) is pinned by the environment, so its series are controls: their
# sessions are repeats of unchanged code, and one that moved means the machine moved.
# Which those are is asked of the tier records (suite/tiers.py: a tier's own_code), never of a tier's name.


@functools.cache
def default_own_providers(plugins: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The asv names of the providers whose tier is own code: the built-in ones, installed plugins' and
    those of the `plugins` named."""
    from ..catalog import build

    return tuple(sorted({keys.asv_name(name) for name in build(plugins).own_code_providers()}))


@dataclass
class Row:
    key: str
    state: str  # one of STATES: the verdict that counts
    cross: Verdict | None = None  # the cross-session verdict (a nomination, or a control's drift)
    ab: Verdict | None = None  # the paired A/B verdict, where one measured this row
    note: str = ""
    own: bool = True  # the project's own code, not a control
    normalised_by: str = ""  # the A/B judged own / this control (noise.Normaliser.source)

    @property
    def verdict(self) -> Verdict | None:
        """The verdict behind the state: the A/B's where there was one."""
        return self.ab or self.cross

    @property
    def decided_by(self) -> str:
        if self.state in OTHER_STATES:
            return ""
        if self.ab is not None:
            rounds = f"paired A/B, {self.ab.n} rounds in one session"
            return rounds + (f", {self.normalised_by}" if self.normalised_by else "")
        return "across sessions"

    @property
    def confirmed(self) -> bool | None:
        """None: not re-measured; True: an A/B called it slower; False: an A/B did not."""
        return None if self.ab is None or not self.own else self.ab.verdict == "slower"

    @property
    def suspect(self) -> bool:
        """An own series nominated across sessions (what an A/B confirmation re-measures)."""
        return self.own and self.cross is not None and self.cross.verdict == "suspected"


def own_state(cross: Verdict) -> str:
    """The state of an own series from its cross-session nomination."""
    return {"suspected": "suspected", "faster": "faster", "unchanged": "unchanged"}.get(cross.verdict, "unjudged")


def control_state(v: Verdict) -> str:
    """A control's state from a two-sided verdict (across sessions, or an A/B's)."""
    if v.verdict in ("slower", "faster"):
        return "drift"
    return "unjudged" if v.verdict == "ambiguous" and not math.isfinite(v.ci_low) else "steady"


def ab_state(v: Verdict) -> str:
    """An own series' state from its paired A/B: slower is the one confirmation."""
    return {"slower": "confirmed", "faster": "faster", "unchanged": "unchanged"}.get(v.verdict, "suspected")


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
    confirmation: str = ""  # what re-measured the suspects (rounds, seconds), or why nothing did
    what: str = ""  # what was compared, in words, where the two sides are not two commits (runs, providers)

    def count(self, state: str) -> int:
        return sum(1 for r in self.rows if r.state == state)

    @property
    def regressions(self) -> list[Row]:
        """Confirmed regressions: own series that a paired A/B called slower. The exit status follows these."""
        return [r for r in self.rows if r.state == "confirmed" and r.own]

    @property
    def suspects(self) -> list[Row]:
        return [r for r in self.rows if r.state == "suspected"]

    @property
    def drifted(self) -> list[Row]:
        """Control series that moved: the machine (or the harness) differed."""
        return [r for r in self.rows if r.state == "drift" and not r.own]

    def drift_size(self) -> float | None:
        """The median ratio of the control series that got a verdict (1.0: the machine held still)."""
        ratios = sorted(
            r.verdict.ratio for r in self.rows if not r.own and r.verdict and math.isfinite(r.verdict.ratio)
        )
        ratios = [x for x in ratios if x > 0]
        if not ratios:
            return None
        mid = len(ratios) // 2
        return ratios[mid] if len(ratios) % 2 else math.sqrt(ratios[mid - 1] * ratios[mid])


def is_own(key: str, own_providers: tuple[str, ...] | None = None) -> bool:
    parts = keys.parse(key)
    own = default_own_providers() if own_providers is None else own_providers
    return parts is None or parts.provider in own  # unknown names are never treated as controls


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
        return Row(key, "unjudged", too_little(why, "session", 2, settings, base.value, head.value), note=why, own=own)
    v = cross_session(base.samples, head.samples, level, settings, control=not own)
    if v.verdict == "ambiguous" and not math.isfinite(v.ci_low):
        return Row(key, "unjudged", v, note=v.reason, own=own)
    state = own_state(v) if own else control_state(v)
    note = v.reason if own else _drift_note(v, state)
    return Row(key, state, v, note=note, own=own)


def _drift_note(v: Verdict, state: str) -> str:
    if state == "drift":
        return f"control moved {v.ratio - 1:+.1%} beyond its noise (p={v.p_value:.2g}): machine drift, never a failure"
    return f"control within its noise ({v.ratio - 1:+.1%})"


def _no_model_noise() -> Noise:
    prior = default_prior()
    return Noise(prior.sigma, 4.0, f"no noise model: prior {prior.source}")


_ORDER = {state: i for i, state in enumerate(("confirmed", "suspected", "drift", "faster", *OTHER_STATES))}


def sort_rows(rows: list[Row]) -> None:
    rows.sort(key=lambda r: (_ORDER.get(r.state, len(_ORDER)), not r.own, r.key))


def bench_regex(text: str) -> str:
    """argparse type of --bench: a regular expression (asv's and ours), or a clear error."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression ({exc})") from None
    return text


def select(keys_: set[str], bench: str | None) -> list[str]:
    pattern = re.compile(bench) if bench else None
    return sorted(k for k in keys_ if pattern is None or pattern.search(k))


def compare_results(
    base: ResultFile,
    head: ResultFile,
    noise: NoiseModel | None,
    settings: Settings,
    noise_source: str = "",
    bench: str | None = None,
    own_providers: tuple[str, ...] | None = None,
) -> Report:
    """Every benchmark of either file (matching `bench`, a regex), worst news first: own series nominated across
    sessions, controls judged for drift. Nothing here is confirmed: `confirm` re-measures the suspects."""
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


def attach_confirmations(report: Report, confirmation: Report) -> None:
    """Give each suspect row of `report` the paired A/B verdict that re-measured it; the A/B's state counts."""
    by_key = {r.key: r for r in confirmation.rows}
    for row in report.rows:
        again = by_key.get(row.key)
        if again is None or not row.suspect:
            continue
        if again.ab is None:
            row.note += f"; the A/B gave no verdict ({again.state}: {again.note})"
            continue
        row.ab, row.normalised_by = again.ab, again.normalised_by
        row.state = ab_state(again.ab)
        row.note = again.ab.reason
    sort_rows(report.rows)
