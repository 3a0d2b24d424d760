"""Views over a run's records shared by the terminal table and the HTML reports: grouping and ranking."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .providers import BASELINES
from .records import Measurement


@dataclass(frozen=True)
class Ranked:
    record: Measurement
    speedup: float | None  # baseline median / this median


def by_case(records: list[Measurement]) -> OrderedDict[str, list[Measurement]]:
    """Records grouped by case, in first-seen order; a later record of the same provider replaces it."""
    groups: OrderedDict[str, dict[str, Measurement]] = OrderedDict()
    for r in records:
        groups.setdefault(r.case_id, {})[r.provider] = r
    return OrderedDict((k, list(v.values())) for k, v in groups.items())


def baseline(records: list[Measurement]) -> Measurement | None:
    """The vendor provider a case's speedups are quoted against: the first of its op's preferences that ran."""
    ok = {r.provider: r for r in records if r.status == "ok" and r.tier == "vendor"}
    for name in BASELINES.get(records[0].op, ()) if records else ():
        if name in ok:
            return ok[name]
    return None


def rank(records: list[Measurement]) -> tuple[list[Ranked], list[Measurement]]:
    """Timed providers fastest first with their speedup over the baseline; then everything not ranked."""
    base = baseline(records)
    timed = sorted((r for r in records if r.status == "ok" and r.median_ms), key=lambda r: r.median_ms)
    ranked = [Ranked(r, base.median_ms / r.median_ms if base else None) for r in timed]
    rest = [r for r in records if not (r.status == "ok" and r.median_ms)]
    return ranked, rest
