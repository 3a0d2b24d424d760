"""The extra panels a family's view may ask its pages for, by kind, and how run.json keeps them.

Torch-free: a view declares them (suite/ops/*.py, a plugin's family), run.json carries them, and the site draws
each kind (suite/show/site/cost.py, trade.py, blocks.py) from records alone, naming no op.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class ModelPanel:
    """The model view of composite ops (a model's blocks): a page per model beside the family's page, and the
    blocks' sections in a run's report (suite/show/site/blocks.py)."""

    kind: ClassVar[str] = "model"

    def to_json(self) -> Any:
        return self.kind  # run.json has always named this panel by its kind alone


@dataclass(frozen=True)
class CostPanel:
    """A table on the family's page: per tier, the time of each case of `op` over the time of the case of `over`
    at the same `same` parameters, each the tier's fastest correct provider (the GEMM epilogue's cost over the
    plain product). `name` is its anchor on the page, `title` its heading, `note` the paragraph under it."""

    name: str
    title: str
    note: str
    op: str
    over: str
    same: tuple[str, ...]
    kind: ClassVar[str] = "cost"


@dataclass(frozen=True)
class TradePanel:
    """A trade stated in numbers (recomputation against memory): per pass, `reference` (a provider of `op`)
    beside `contenders`, their time, executed FLOPs and peak memory against the case parameter `x`, at one
    slice of the cases (the values of `slice` they share), and a sentence at the largest `x` both measured.

    The slice shown is the one with the most points comparing the two (then one with a backward), ties broken by
    `prefer`: per parameter, the value preferred, or "largest" for the largest number. `slice_label` names a slice:
    text with `{name}` fields over its values (replaced as they are: no format spec applies), each shown only where
    every value it names is present (a flag reads as its name or non-<name>). `contenders_name` names the contenders
    in words; `x_label` is the x axis's label and `x_symbol` the symbol of a sentence (S = 4096)."""

    name: str
    title: str
    note: str
    op: str
    reference: str
    contenders: tuple[str, ...]
    contenders_name: str
    x: str
    x_label: str
    x_symbol: str
    slice: tuple[str, ...]
    slice_label: tuple[str, ...]
    prefer: tuple[tuple[str, Any], ...] = ()
    kind: ClassVar[str] = "trade"


Panel = ModelPanel | CostPanel | TradePanel
PANEL_KINDS: dict[str, type] = {k.kind: k for k in (ModelPanel, CostPanel, TradePanel)}


def panel_json(panel: Panel) -> Any:
    """A panel as run.json keeps it: `model` by name, the others as an object naming their kind."""
    if isinstance(panel, ModelPanel):
        return panel.to_json()
    return {"kind": panel.kind, **{f.name: _listed(getattr(panel, f.name)) for f in fields(panel)}}


def _listed(value: Any) -> Any:
    return [_listed(v) for v in value] if isinstance(value, tuple) else value


def panel_from_json(data: Any) -> Panel | None:
    """A panel from run.json, or None for one this version cannot draw (an unknown kind, a damaged entry)."""
    if isinstance(data, str):
        return ModelPanel() if data == ModelPanel.kind else None
    kind = PANEL_KINDS.get(data.get("kind")) if isinstance(data, dict) else None
    if kind is None or kind is ModelPanel:
        return None
    values = {}
    for f in fields(kind):
        value = data.get(f.name, MISSING)
        if value is MISSING:
            if f.default is MISSING:
                return None
            continue
        if f.name == "prefer":
            if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
                return None
            value = tuple(
                (str(k), v if isinstance(v, (str, int, float, bool)) or v is None else str(v)) for k, v in value
            )
        elif isinstance(value, list):
            value = tuple(str(v) for v in value)
        elif not isinstance(value, str):
            return None
        values[f.name] = value
    return kind(**values)


def as_panel(panel: Panel | str) -> Panel:
    """A panel a view declares: an object, or `"model"` by name (as views have always named it)."""
    if isinstance(panel, str):
        found = panel_from_json(panel)
        if found is None:
            raise ValueError(
                f"no panel named {panel!r}; by name: {ModelPanel.kind} (others are objects: CostPanel, TradePanel)"
            )
        return found
    return panel
