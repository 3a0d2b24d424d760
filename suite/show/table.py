"""The terminal table printed at the end of a run: per case, providers ranked, speedup, speed of light; a
median whose samples spread too wide to trust is marked."""

from __future__ import annotations

import textwrap

from ..ceilings import ABOVE
from ..store.records import Measurement
from ..store.runmeta import RunMeta
from ..store.verdicts import verdict
from ..text import plain
from ..units import quantity
from .presentation import Presentation
from .summary import by_case, rank


def _rate(r: Measurement) -> str:
    if r.bound == "compute" and r.tflops is not None:
        return f"{quantity(r.tflops, 'TFLOP/s', 4):>15}"
    if r.gbps is not None:
        return f"{quantity(r.gbps, 'GB/s', 4):>15}"
    return ""


def _unranked(r: Measurement, width: int) -> list[str]:
    """A provider not ranked, its outcome and its whole reason: wrapped under it, never cut."""
    word = verdict(r)
    head = plain(f"   -  {r.provider:<22} {r.tier:<9} {word}")
    if not r.reason:
        return [head]
    reason = plain(r.reason.removeprefix(f"{word}: "))
    return [head, *textwrap.wrap(reason, width=max(40, width), initial_indent=" " * 9, subsequent_indent=" " * 9)]


def _sol(sol: float | None) -> str:
    """' 97.3% SOL', or that the figure is above its ceiling (a median in doubt: never a percentage past 100)."""
    if sol is None:
        return ""
    return f"SOL {ABOVE}" if sol > 1.0 else f"{100 * sol:5.1f}% SOL"


def render(records: list[Measurement], meta: RunMeta | None = None, width: int = 110) -> str:
    shown = Presentation.of([meta])
    lines: list[str] = []
    for _, group in by_case(records).items():
        first = group[0]
        lines.append(plain(f"{first.op}  {first.label}  {first.case.get('dtype', '')}  {first.mode}"))
        ranked, rest = rank(group, shown)
        for place, item in enumerate(ranked, 1):
            r = item.record
            speedup = f"{item.speedup:5.2f}x" if item.speedup else "    - "
            sol = _sol(r.sol)
            if r.warning:
                sol += "  ! wide spread"
            lines.append(
                plain(
                    f"  {place:>2}. {r.provider:<22} {r.tier:<9} {r.median_ms:10.4f} ms  {speedup}  {_rate(r)}  {sol}"
                )
            )
        for r in rest:
            lines.extend(_unranked(r, width))
    return "\n".join(lines)
