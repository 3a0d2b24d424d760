"""The GEMM epilogue's cost: per tier, the time of gelu(a @ b + bias) over the time of the plain a @ b at the
same shape, dtype and pass, each the fastest correct provider of that tier. From records alone (no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..reading import fastest_per_tier
from ..records import Measurement

EPILOGUE_OP = "matmul_bias_gelu"
PLAIN_OP = "matmul"
# The case parameters an epilogue case shares with its plain matmul.
SAME = ("m", "n", "k", "dtype", "mode")
MODE_ORDER = {"fwd": 0, "bwd": 1, "fwd_bwd": 2}


@dataclass(frozen=True)
class Cost:
    epilogue: Measurement  # the tier's fastest correct provider of the epilogue case
    plain: Measurement  # and of the plain matmul at the same shape

    @property
    def ratio(self) -> float:
        return self.epilogue.median_ms / self.plain.median_ms

    def describe(self) -> str:
        return (
            f"{self.epilogue.provider} {self.epilogue.median_ms:.4g} ms over "
            f"{self.plain.provider} {self.plain.median_ms:.4g} ms"
        )


@dataclass
class CostRow:
    label: str  # the epilogue case's: shape and GELU form
    dtype: str
    mode: str
    x: float
    costs: dict[str, Cost] = field(default_factory=dict)  # tier -> cost; absent where either was not timed


def _key(r: Measurement) -> tuple:
    return tuple(r.case.get(k) for k in SAME)


def epilogue_costs(records: list[Measurement]) -> list[CostRow]:
    """One row per epilogue case that has a plain matmul at its shape; [] when there is none."""
    plain: dict[tuple, list[Measurement]] = {}
    cases: dict[str, list[Measurement]] = {}
    for r in records:
        if r.op == PLAIN_OP:
            plain.setdefault(_key(r), []).append(r)
        elif r.op == EPILOGUE_OP:
            cases.setdefault(r.case_id, []).append(r)
    rows = []
    for group in cases.values():
        first = group[0]
        if _key(first) not in plain:
            continue
        base = fastest_per_tier(plain[_key(first)])
        row = CostRow(first.label, str(first.case.get("dtype")), first.mode, first.x)
        for tier, r in fastest_per_tier(group).items():
            if tier in base:
                row.costs[tier] = Cost(r, base[tier])
        rows.append(row)
    return sorted(rows, key=lambda row: (row.dtype, MODE_ORDER.get(row.mode, 3), row.mode, row.x, row.label))
