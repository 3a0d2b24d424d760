"""Data shaping for the site: a device's view, the index matrix, the reasons list, chart points, hovers.

Nothing here writes HTML: pages/ turns these views into pages.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ... import units
from ...ceilings import Limits
from ...store.reading import timed
from ...store.records import Measurement
from ...store.verdicts import checked_correct, verdict
from ..presentation import Presentation, View
from .kernel_age import PROVIDER
from .runs import Device, Run

# Worst first: the status a matrix cell names when a tier has nothing timed.
STATUS_ORDER = ("error", "incorrect", "oom", "skipped")
# Okabe-Ito (color-blind safe), yellow last: it is the faintest on white.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
MARKERS = ("circle", "square", "diamond", "triangle", "down", "cross")
SHORT_UNITS = {"TFLOP/s": "TF/s"}


# -- per device --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Style:
    color: str
    marker: str
    index: int  # its number on the page: names its SVG marker


@dataclass
class DeviceView:
    device: Device
    runs: list[Run]
    records: list[Measurement]
    ceilings: Limits | None
    # (case_id, provider) of the records shown from an earlier run than their case's: standing in for a skip
    stand_ins: frozenset[tuple[str, str]] = frozenset()
    shown: Presentation = field(default_factory=Presentation)  # views, baselines, tiers of these runs

    @property
    def env(self) -> dict[str, Any]:
        return max(self.records, key=lambda r: r.time).env if self.records else {}

    @property
    def is_cpu(self) -> bool:
        return self.env.get("device_type") == "cpu"

    def families(self) -> OrderedDict[str, list[Measurement]]:
        out: OrderedDict[str, list[Measurement]] = OrderedDict()
        for r in self.records:
            out.setdefault(r.family, []).append(r)
        return out

    @property
    def older_kernels(self) -> dict[str, str]:
        """The run ids (a sweep's shards included) measured before the Triton kernels last changed: what changed."""
        return {m: run.kernels.words() for run in self.runs if run.kernels and run.kernels.changed for m in run.members}

    def provider_versions(self) -> dict[str, str]:
        return {r.provider: r.provider_version for r in self.records if r.provider_version}

    def view(self, family: str) -> View:
        return self.shown.view(family, [r for r in self.records if r.family == family])


def provider_styles(records: list[Measurement], shown: Presentation) -> dict[str, Style]:
    """One color and marker per provider of these records (a family page's): ordered by tier, then name."""
    names = sorted({(shown.tier_rank(r.tier), r.provider) for r in records})
    return styles_for([name for _, name in names])


def styles_for(names: list[str]) -> dict[str, Style]:
    """Colors cycle through the palette and shapes through the markers: pairs stay unique up to 24 names,
    so color is never the only cue."""
    return {name: Style(PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)], i) for i, name in enumerate(names)}


def metric_of(r: Measurement, view: View) -> float | None:
    value = getattr(r, view.metric, None)
    return value if isinstance(value, (int, float)) else None


# The passes in the order a page shows them, each chart group's passes side by side.
MODE_ORDER = ("fwd", "bwd", "fwd_bwd")


def group_key(r: Measurement, view: View, with_mode: bool = True) -> str:
    """The chart (and matrix block) a case belongs to: its op and the parameters that split charts (a name
    such as a dtype or a mode as it is, a number or a flag with its key)."""
    split = tuple(view.split) + (("mode",) if with_mode else ())
    parts = [r.op]
    for k in split:
        if k in r.case:
            v = r.case[k]
            parts.append(str(v) if isinstance(v, str) else f"{k}={v}")
    return " · ".join(parts)


def by_group(records: list[Measurement], view: View) -> OrderedDict[str, list[Measurement]]:
    """Records per chart group, in first-seen order, the passes of one group next to each other."""
    out: OrderedDict[str, list[Measurement]] = OrderedDict()
    first_seen: dict[str, int] = {}
    place: dict[str, tuple[int, int]] = {}
    for r in records:
        key = group_key(r, view)
        if key not in out:
            family = first_seen.setdefault(group_key(r, view, with_mode=False), len(first_seen))
            mode = MODE_ORDER.index(r.mode) if r.mode in MODE_ORDER else len(MODE_ORDER)
            place[key] = (family, mode)
        out.setdefault(key, []).append(r)
    return OrderedDict(sorted(out.items(), key=lambda kv: place[kv[0]]))


def checked_not_timed(r: Measurement) -> bool:
    """Checked and correct, but not timed here (its tier's timings mean nothing on this device: Triton's
    CPU interpreter): a skip that carries its check's errors."""
    return r.status == "skipped" and r.rel_error is not None


def status_rank(status: str) -> int:
    """Worst first (STATUS_ORDER), anything else after."""
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


# -- the index matrix --------------------------------------------------------------------------------


@dataclass
class Cell:
    tier: str
    best: Measurement | None = None  # the fastest correct provider of this tier
    problems: list[Measurement] = field(default_factory=list)  # this tier's records not timed
    relative: float | None = None  # winner's median / this median: 1 for the winner, below 1 otherwise

    def status(self) -> str:
        """The status to name when nothing of this tier was timed: the worst one."""
        present = {r.status for r in self.problems}
        return next((s for s in STATUS_ORDER if s in present), "absent")


@dataclass
class Row:
    case_id: str
    label: str
    x: float
    cells: dict[str, Cell]
    winner: str | None = None  # tier
    runner_up: str | None = None
    margin: float | None = None  # runner-up tier's best median / winner's median
    # Providers correct under today's bounds that were never timed because an older bound judged them
    # incorrect (suite/store/verdicts.py): while there are any, the fastest timed provider is no winner.
    untimed: list[Measurement] = field(default_factory=list)

    @property
    def decided(self) -> bool:
        return self.winner is not None and not self.untimed


def matrix(records: list[Measurement], view: View, tiers: list[str]) -> OrderedDict[str, list[Row]]:
    """Per chart group, one row per case (by x): per tier its fastest correct provider, and who wins."""
    out: OrderedDict[str, list[Row]] = OrderedDict()
    for key, recs in by_group(records, view).items():
        cases: OrderedDict[str, list[Measurement]] = OrderedDict()
        for r in recs:
            cases.setdefault(r.case_id, []).append(r)
        rows = []
        for case_id, group in cases.items():
            cells = {t: Cell(t) for t in tiers}
            for r in group:
                cell = cells.setdefault(r.tier, Cell(r.tier))
                if timed(r):
                    if cell.best is None or r.median_ms < cell.best.median_ms:
                        cell.best = r
                else:
                    cell.problems.append(r)
            row = Row(case_id, group[0].label, group[0].x, cells)
            row.untimed = [r for r in group if r.verdict_note and checked_correct(r)]
            ranked = sorted((c for c in cells.values() if c.best), key=lambda c: c.best.median_ms)
            if ranked:
                row.winner = ranked[0].tier
                for c in ranked:
                    c.relative = ranked[0].best.median_ms / c.best.median_ms
                if len(ranked) > 1:
                    row.runner_up = ranked[1].tier
                    row.margin = ranked[1].best.median_ms / ranked[0].best.median_ms
            rows.append(row)
        out[key] = sorted(rows, key=lambda r: (r.x, r.label))
    return out


@dataclass
class Problem:
    """Records of one provider sharing a status and a reason (up to its numbers: sizes, counts, errors):
    listed once, readable, with the cases they hit."""

    number: int
    status: str
    provider: str
    tier: str
    reason: str  # the first record's reason, as recorded
    cases: list[str]
    headline: str = ""  # what the reason says, in a sentence or so
    details: list[str] = field(default_factory=list)  # the whole reason a part per line, where it says more
    case_notes: dict[str, str] = field(default_factory=dict)  # a case's own headline, where the cases differ
    note: str = ""  # what the details leave out or stand for
    word: str = ""  # the outcome in words ("correct, not timed" for a skip that passed its check)


# A PyTorch warning's pointer into its C++ sources: no help to a reader, and repeated in every part.
_SOURCE_NOTE = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
HEADLINE_CHARS = 200


def reason_parts(reason: str) -> list[str]:
    """A reason as the parts it joins with '; ' (a backend's several warnings), PyTorch's source pointers left
    out; a part ending in ':' runs on into the next (it introduces it)."""
    parts: list[str] = []
    for part in _SOURCE_NOTE.sub("", reason).split("; "):
        part = part.strip()
        if not part:
            continue
        if parts and parts[-1].endswith(":"):
            parts[-1] += " " + part
        else:
            parts.append(part)
    return parts or [reason.strip()]


def headline(reason: str) -> str:
    """The whole reason where it is short (HEADLINE_CHARS at most), else its first sentence past its first
    40 characters, cut to HEADLINE_CHARS."""
    parts = reason_parts(reason)
    if len("; ".join(parts)) <= HEADLINE_CHARS:
        return "; ".join(parts)
    first = parts[0]
    end = next((m.end() for m in re.finditer(r"[.!?](\s|$)", first) if m.end() > 40), len(first))
    text = first[:end].strip()
    if len(text) > HEADLINE_CHARS:
        text = text[:HEADLINE_CHARS].rsplit(" ", 1)[0] + " …"
    return text


def problems(
    records: list[Measurement], view: View, shown: Presentation
) -> tuple[list[Problem], dict[tuple[str, str], int]]:
    """Every record not timed, grouped by (provider, status, reason with its numbers masked), worst status
    first; and the footnote number of each (case_id, provider). A reason that differs between cases only in
    its numbers (a tensor's sizes, how many elements were off) is shown once."""
    groups: OrderedDict[tuple[str, str, str], list[Measurement]] = OrderedDict()
    for r in records:
        if not timed(r):
            groups.setdefault((r.provider, r.status, _NUMBER.sub("#", r.reason or "")), []).append(r)
    order = sorted(
        groups.items(),
        key=lambda kv: (
            STATUS_ORDER.index(kv[0][1]) if kv[0][1] in STATUS_ORDER else -1,
            shown.tier_rank(kv[1][0].tier),
            kv[0][0],
        ),
    )
    out, numbers = [], {}
    for i, ((provider, status, _), recs) in enumerate(order, 1):
        reason = recs[0].reason or "(no reason recorded)"
        labels = list(dict.fromkeys(f"{r.label} ({group_key(r, view)})" for r in recs))
        heads = {f"{r.label} ({group_key(r, view)})": headline(r.reason or reason) for r in recs}
        parts = reason_parts(reason)
        top = headline(reason)
        notes = []
        if len({r.reason for r in recs}) > 1:
            notes.append("the first case's message: the numbers in it differ by case")
        if _SOURCE_NOTE.search(reason):
            notes.append("PyTorch's “Triggered internally at …” source pointers left out")
        out.append(
            Problem(
                i,
                status,
                provider,
                recs[0].tier,
                reason,
                labels,
                top,
                parts if "; ".join(parts) != top else [],
                heads if len(set(heads.values())) > 1 else {},
                "; ".join(notes),
                verdict(recs[0]),
            )
        )
        for r in recs:
            numbers[r.key] = i
    return out, numbers


# -- chart data --------------------------------------------------------------------------------------


@dataclass
class Point:
    x: float
    y: float
    hover: Any  # what the page's hover table knows it by: a text, or a record's key
    lo: float | None = None  # spread of the samples, in y units
    hi: float | None = None
    line: str | None = None  # the source a connected line joins it with (its run): one line per source


def fmt(value: float | None, digits: int = 3) -> str:
    """`digits` significant digits, never an exponent; '–' for nothing."""
    if value is None:
        return "–"
    return units.sig(value, digits)


def fmt_rate(value: float, unit: str, digits: int = 3) -> str:
    """A rate in the prefix that reads best, short units: '1.83 TB/s', '812 TF/s', '621 MF/s'."""
    return units.quantity(value, unit, digits).replace("FLOP/s", "F/s")


def _short(v: float | None) -> float | int | None:
    """4 significant digits: enough to read, and short in the page's JSON."""
    if v is None or not math.isfinite(v):
        return None
    v = float(f"{v:.4g}")
    return int(v) if v.is_integer() and abs(v) < 1e15 else v


class RecordHovers:
    """A page's hover table of timed records: numbers per record, names and cases stored once.

    The page's script spells a row out (see site.js); a chart point refers to its record's row, so a
    record drawn in four charts is stored once. Rows: [provider, case, value, median ms, p10, p90,
    speedup, baseline, rel. error, SOL, bound, MiB, FLOP/B, TFLOP/s], names as indexes into P, C, B.
    """

    def __init__(
        self,
        unit: str,
        stand_ins: frozenset[tuple[str, str]] = frozenset(),
        name_runs: bool = False,
        older_kernels: Collection[str] = (),
    ) -> None:
        self.unit = unit
        self.stand_ins = stand_ins
        self.name_runs = name_runs  # a page merging several runs names each point's (its lines are per run)
        self.older_kernels = older_kernels  # runs measured before the Triton kernels changed: their points say so
        self.providers: dict[str, int] = {}
        self.cases: dict[str, int] = {}
        self.bases: dict[str, int] = {}
        self.bounds: dict[str, int] = {}
        self.units: dict[str, int] = {}
        self.rows: list[list[Any]] = []
        self.by_key: dict[tuple[str, str], int] = {}

    @staticmethod
    def _id(table: dict[str, int], name: str) -> int:
        return table.setdefault(name, len(table))

    def add_record(self, r: Measurement, view: View, base: Measurement | None) -> None:
        q = r.quantiles_ms or {}
        tf = r.flops / (r.median_ms * 1e-3) / 1e12 if r.flops else None
        origin = f"; measured in run {r.run_id}" if r.key in self.stand_ins else ""
        if self.name_runs and not origin:
            origin = f"; run {r.run_id}"
        if r.provider == PROVIDER and r.run_id in self.older_kernels:
            origin += "; Triton kernels changed since"
        row = [
            self._id(self.providers, f"{r.provider} ({r.tier}{origin})"),
            self._id(self.cases, f"{r.label} · {group_key(r, view)}"),
            _short(metric_of(r, view)),
            _short(r.median_ms),
            _short(q.get("p10")),
            _short(q.get("p90")),
            _short(base.median_ms / r.median_ms) if base else None,
            self._id(self.bases, base.provider) if base else None,
            _short(r.rel_error),
            _short(r.sol),
            self._id(self.bounds, r.bound or "binding"),
            _short(r.peak_mem_bytes / 2**20) if r.peak_mem_bytes else None,
            _short(r.flops / r.min_bytes) if r.flops and r.min_bytes else None,
            _short(tf),
            # a page of several families (a run's report) names each row's unit
            self._id(self.units, view.unit) if view.unit != self.unit else None,
        ]
        while row and row[-1] is None:
            row.pop()
        self.by_key[r.key] = len(self.rows)
        self.rows.append(row)

    def add(self, key: Any) -> int:
        return self.by_key[key]

    def payload(self) -> dict[str, Any]:
        return {
            "u": SHORT_UNITS.get(self.unit, self.unit),
            "P": list(self.providers),
            "C": list(self.cases),
            "B": list(self.bases),
            "D": list(self.bounds),
            **({"U": [SHORT_UNITS.get(u, u) for u in self.units]} if self.units else {}),
            "R": self.rows,
        }


def describe(
    records: list[Measurement],
    view: View,
    shown: Presentation,
    stand_ins: frozenset[tuple[str, str]] = frozenset(),
    table: RecordHovers | None = None,
) -> RecordHovers:
    """The hover rows of every timed record of a family page (added to `table` where a page shows several
    families); `stand_ins` (records of an earlier run standing in for newer skips) name their run."""
    table = table if table is not None else RecordHovers(view.unit, stand_ins)
    cases: OrderedDict[str, list[Measurement]] = OrderedDict()
    for r in records:
        cases.setdefault(r.case_id, []).append(r)
    for group in cases.values():
        base = shown.baseline(group)
        for r in group:
            if timed(r) and r.key not in table.by_key:  # a family drawn twice on a page (a shared roofline)
                table.add_record(r, view, base)
    return table


def throughput_points(recs: list[Measurement], view: View) -> OrderedDict[str, list[Point]]:
    """Achieved TFLOP/s or GB/s per provider, with the p10–p90 spread of the times as an error bar."""
    out: OrderedDict[str, list[Point]] = OrderedDict()
    for r in recs:
        value = metric_of(r, view)
        if not timed(r) or not value:
            continue
        q = r.quantiles_ms or {}
        # Throughput is work / time: the slow tail of times is the low end of throughput.
        lo = value * r.median_ms / q["p90"] if q.get("p90") else None
        hi = value * r.median_ms / q["p10"] if q.get("p10") else None
        out.setdefault(r.provider, []).append(Point(r.x, value, r.key, lo, hi, r.run_id))
    return out


def speedup_points(recs: list[Measurement], shown: Presentation) -> tuple[OrderedDict[str, list[Point]], str | None]:
    """Speedup of each provider over the case's baseline (baseline median / median)."""
    cases: OrderedDict[str, list[Measurement]] = OrderedDict()
    for r in recs:
        cases.setdefault(r.case_id, []).append(r)
    out: OrderedDict[str, list[Point]] = OrderedDict()
    names = set()
    for group in cases.values():
        base = shown.baseline(group)
        if base is None:
            continue
        names.add(base.provider)
        for r in group:
            if timed(r):
                out.setdefault(r.provider, []).append(Point(r.x, base.median_ms / r.median_ms, r.key, line=r.run_id))
    return out, ", ".join(sorted(names)) or None


def memory_points(recs: list[Measurement]) -> OrderedDict[str, list[Point]]:
    """Peak device memory of each timed provider's checked pass, in MiB (0: it allocated nothing more)."""
    out: OrderedDict[str, list[Point]] = OrderedDict()
    for r in recs:
        if timed(r) and r.peak_mem_bytes is not None:
            out.setdefault(r.provider, []).append(Point(r.x, r.peak_mem_bytes / 2**20, r.key, line=r.run_id))
    return out


def why_no_memory(recs: list[Measurement]) -> str:
    """Why a group's memory chart has no point: what its records say about memory."""
    if any(r.peak_mem_bytes is not None for r in recs):
        return "recorded only for providers not timed here (their peak MiB is in the table)"
    if recs and all(r.env.get("device_type") == "cpu" for r in recs):
        return "not measured on a CPU (it is the CUDA allocator's peak over the checked pass)"
    return "none recorded"


def roofline_points(recs: list[Measurement]) -> OrderedDict[str, list[Point]]:
    """Arithmetic intensity (flops / min_bytes) against achieved TFLOP/s, per provider."""
    out: OrderedDict[str, list[Point]] = OrderedDict()
    for r in recs:
        if timed(r) and r.flops and r.min_bytes:
            tflops = r.flops / (r.median_ms * 1e-3) / 1e12
            out.setdefault(r.provider, []).append(Point(r.flops / r.min_bytes, tflops, r.key))
    return out
