"""How records are shown: each family's view, each op's baseline, each tier's order and color.

Read from the runs' run.json files (suite/runmeta.py), which the runs wrote from their catalog; torch-free,
so the site, the tables and `summary` never load an op or a tier. A run without run.json (made before it
existed) gets views guessed from its records: the metric of the ceiling that binds most of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import tiers as tier_records
from .reading import baseline, timed
from .records import Measurement
from .runmeta import RunMeta


@dataclass(frozen=True)
class View:
    """How a family is shown: the record field charted, its unit, the x axis, the params that split charts,
    the families whose points join its roofline (attention's prefill and decode share one), and the extra
    panels its pages draw, by kind (`model`: the model view of composite ops, suite/site/blocks.py)."""

    metric: str
    unit: str
    x: str
    split: tuple[str, ...] = ("dtype",)
    roofline_with: tuple[str, ...] = ()
    panels: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric, "unit": self.unit, "x": self.x, "split": list(self.split)}
        if self.roofline_with:
            out["roofline_with"] = list(self.roofline_with)
        if self.panels:
            out["panels"] = list(self.panels)
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
            tuple(str(p) for p in panels),
        )


METRIC_UNITS = {"tflops": "TFLOP/s", "gbps": "GB/s"}


def guessed_view(records: Iterable[Measurement]) -> View:
    bounds = [r.bound for r in records if r.bound]
    metric = "gbps" if bounds and bounds.count("memory") > len(bounds) / 2 else "tflops"
    return View(metric, METRIC_UNITS[metric], "size")


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
                    out.views[family] = View.from_json(view)
                except (KeyError, TypeError, ValueError):
                    continue
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
        return self.views.get(family) or guessed_view(records)

    def baseline(self, records: list[Measurement], counts: Callable[[Measurement], bool] = timed) -> Measurement | None:
        """The record of one case its others are set against: the first of its op's preferences (run.json's
        baselines; without one, suite/reading.py's default) whose record `counts` (was timed, by default)."""
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
