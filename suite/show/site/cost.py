"""A view's cost panel (presentation.CostPanel): per tier, the time of each case of one op over the time of the
case of another op at the same parameters (the GEMM epilogue over the plain product), each the fastest correct
provider of that tier. From records alone (no torch); which ops, and what to call them, the panel says."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...store.reading import fastest_per_tier
from ...store.records import Measurement
from ..panels import CostPanel

MODE_ORDER = {"fwd": 0, "bwd": 1, "fwd_bwd": 2}


@dataclass(frozen=True)
class Cost:
    case: Measurement  # the tier's fastest correct provider of the panel's op at this case
    over: Measurement  # and of the op it is set over, at the same parameters

    @property
    def ratio(self) -> float:
        return self.case.median_ms / self.over.median_ms

    def describe(self) -> str:
        case, over = self.case, self.over
        return f"{case.provider} {case.median_ms:.4g} ms over {over.provider} {over.median_ms:.4g} ms"


@dataclass
class CostRow:
    label: str  # the case's: shape and its own parameters
    dtype: str
    mode: str
    x: float
    costs: dict[str, Cost] = field(default_factory=dict)  # tier -> cost; absent where either was not timed


def cost_rows(records: list[Measurement], panel: CostPanel) -> list[CostRow]:
    """One row per case of the panel's op that has a case of the op it is set over at its parameters; []
    when there is none."""

    def key(r: Measurement) -> tuple:
        return tuple(r.case.get(k) for k in panel.same)

    over: dict[tuple, list[Measurement]] = {}
    cases: dict[str, list[Measurement]] = {}
    for r in records:
        if r.op == panel.over:
            over.setdefault(key(r), []).append(r)
        elif r.op == panel.op:
            cases.setdefault(r.case_id, []).append(r)
    rows = []
    for group in cases.values():
        first = group[0]
        if key(first) not in over:
            continue
        base = fastest_per_tier(over[key(first)])
        row = CostRow(first.label, str(first.case.get("dtype")), first.mode, first.x)
        for tier, r in fastest_per_tier(group).items():
            if tier in base:
                row.costs[tier] = Cost(r, base[tier])
        rows.append(row)
    return sorted(rows, key=lambda row: (row.dtype, MODE_ORDER.get(row.mode, 3), row.mode, row.x, row.label))
