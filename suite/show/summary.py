"""Views over a run's records shared by the terminal table, `summary` and the site: grouping and ranking."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..store.reading import timed
from ..store.records import Measurement
from .presentation import Presentation


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


def rank(records: list[Measurement], shown: Presentation) -> tuple[list[Ranked], list[Measurement]]:
    """Timed providers fastest first with their speedup over the baseline; then everything not ranked."""
    base = shown.baseline(records)
    ranked = [
        Ranked(r, base.median_ms / r.median_ms if base else None)
        for r in sorted(filter(timed, records), key=lambda r: r.median_ms)
    ]
    rest = [r for r in records if not timed(r)]
    return ranked, rest
