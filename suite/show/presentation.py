"""How records are shown: each family's view, each op's baseline, each tier's order and color.

Read from the runs' run.json files (suite/store/runmeta.py), which the runs wrote from their catalog; torch-free,
so the site, the tables and `summary` never load an op or a tier. A run without run.json (made before it
existed) gets views guessed from its records: the metric of the ceiling that binds most of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import tiers as tier_records
from ..store.reading import baseline, timed
from ..store.records import Measurement
from ..store.runmeta import RunMeta
from .panels import Panel, as_panel, panel_from_json, panel_json
from .panels_format1 import FORMAT_1_PANELS


@dataclass(frozen=True)
class View:
    """How a family is shown: the record field charted, its unit, the x axis, the params that split charts,
    the families whose points join its roofline (attention's prefill and decode share one), and the extra
    panels its pages draw (`ModelPanel` or "model": the model view of composite ops; `CostPanel`: a case's
    time over another op's at the same shape, per tier; `TradePanel`: one provider against others in
    numbers), carried in run.json so that the site draws them from records alone."""

    metric: str
    unit: str
    x: str
    split: tuple[str, ...] = ("dtype",)
    roofline_with: tuple[str, ...] = ()
    panels: tuple[Panel, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "panels", tuple(as_panel(p) for p in self.panels))

    def has(self, kind: type) -> list[Any]:
        """The panels of one kind this view draws, in the order it declares them."""
        return [p for p in self.panels if isinstance(p, kind)]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric, "unit": self.unit, "x": self.x, "split": list(self.split)}
        if self.roofline_with:
            out["roofline_with"] = list(self.roofline_with)
        if self.panels:
            out["panels"] = [panel_json(p) for p in self.panels]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> View:
        split = data.get("split") or ("dtype",)
        joined = data.get("roofline_with") or ()
        if not isinstance(joined, (list, tuple)):
            joined = ()
        panels = data.get("panels") or ()
        if not isinstance(panels, (list, tuple)):
            panels = ()
        return cls(
            str(data["metric"]),
            str(data["unit"]),
            str(data["x"]),
            tuple(str(s) for s in split),
            tuple(str(f) for f in joined),
            tuple(p for p in map(panel_from_json, panels) if p is not None),
        )


METRIC_UNITS = {"tflops": "TFLOP/s", "gbps": "GB/s"}


def with_format_1_panels(family: str, view: View) -> View:
    """A view of a run.json older than format 2 (or guessed, where there is none), with the panels its pages
    drew then."""
    old = tuple(p for p in FORMAT_1_PANELS.get(family, ()) if p not in view.panels)
    return dataclasses.replace(view, panels=view.panels + old) if old else view


def guessed_view(records: Iterable[Measurement], family: str = "") -> View:
    bounds = [r.bound for r in records if r.bound]
    metric = "gbps" if bounds and bounds.count("memory") > len(bounds) / 2 else "tflops"
    return with_format_1_panels(family, View(metric, METRIC_UNITS[metric], "size"))


@dataclass
class Presentation:
    views: dict[str, View] = field(default_factory=dict)
    baselines: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tiers: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Composite cases' parts (run.json's compositions): case id -> {"op", "label", "params", "parts"}.
    compositions: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, metas: Iterable[RunMeta | None]) -> Presentation:
        """The union of several runs' metas, later ones winning (pass them oldest first)."""
        out = cls()
        for meta in metas:
            if meta is None:
                continue
            for family, view in meta.views.items():
                try:
                    found = View.from_json(view)
                except (KeyError, TypeError, ValueError):
                    continue
                out.views[family] = with_format_1_panels(family, found) if meta.format < 2 else found
            for op, names in meta.baselines.items():
                if isinstance(names, list):
                    out.baselines[op] = tuple(str(n) for n in names)
            for name, tier in meta.tiers.items():
                if isinstance(tier, dict):
                    out.tiers[name] = tier
            for case_id, composition in meta.compositions.items():
                if isinstance(composition, dict) and isinstance(composition.get("parts"), list):
                    out.compositions[case_id] = composition
        return out

    def view(self, family: str, records: Iterable[Measurement] = ()) -> View:
        return self.views.get(family) or guessed_view(records, family)

    def baseline(self, records: list[Measurement], counts: Callable[[Measurement], bool] = timed) -> Measurement | None:
        """The record of one case its others are set against: the first of its op's preferences (run.json's
        baselines; without one, suite/store/reading.py's default) whose record `counts` (was timed, by default)."""
        if not records:
            return None
        return baseline(records, self.baselines.get(records[0].op), counts)

    def tier_rank(self, name: str) -> tuple[int, str]:
        tier = self.tiers.get(name)
        if tier is not None and isinstance(tier.get("order"), int):
            return (tier["order"], name)
        return tier_records.rank(name)

    def tier_color(self, name: str) -> str:
        tier = self.tiers.get(name)
        color = tier.get("color") if tier else None
        if tier_records.is_color(color):  # a run.json's color that is anything else is not written anywhere
            return color
        return tier_records.color(name)

    def own_code(self, record: Measurement) -> bool:
        """Whether a record's tier is own code: the record says so, else its run's tier table, else the
        built-in tier of that name."""
        if record.own_code is not None:
            return record.own_code
        tier = self.tiers.get(record.tier)
        if tier is not None:
            return bool(tier.get("own_code"))
        known = tier_records.BUILTIN.get(record.tier)
        return bool(known and known.own_code)

    def tier_names(self, records: Iterable[Measurement]) -> list[str]:
        return sorted({r.tier for r in records}, key=self.tier_rank)
