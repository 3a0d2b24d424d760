"""What fusion saved, read from records: launches per call and device-memory traffic against the minimum.

Torch-free, for the site and `summary`. A record's `launches` counts what one call launched (kernels on a
GPU, computing operators on a CPU: suite/measure/profiling.py) and `traffic_bytes` what it moved through device
memory (ncu's DRAM counters, with metrics=[traffic]); "traffic / minimum" sets that against the op's
least bytes (`min_bytes`: each input read once, each output written once), so 1.0× is a single pass.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from ..store.records import Measurement
from .presentation import Presentation

RATIO = "{:.1f}"  # traffic over the minimum bytes, to a tenth: 1.0 is a single pass over memory


def traffic_ratio(r: Measurement) -> float | None:
    """Measured bytes over the op's minimum bytes, where both are known."""
    if r.traffic_bytes is None or not r.min_bytes:
        return None
    return r.traffic_bytes / r.min_bytes


def launch_word(r: Measurement, n: int) -> str:
    """n kernels on a GPU (a launch is one there), n launches elsewhere."""
    if r.env.get("device_type") == "cuda":
        return f"{n} kernel{'' if n == 1 else 's'}"
    return f"{n} launch{'' if n == 1 else 'es'}"


def _span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return fmt.format(low) if fmt.format(low) == fmt.format(high) else f"{fmt.format(low)}–{fmt.format(high)}"


@dataclass
class LaunchRow:
    """One provider of one op · dtype · mode: its launches and traffic over the cases measured."""

    group: str
    provider: str
    tier: str
    launches: str  # "3", "3–4", or "" when not counted
    traffic: str  # "3.1×", "2.9–3.2×", or "" when not measured
    cases: int  # cases with a count
    reason: str  # why nothing was counted or measured, when nothing was


def _group(r: Measurement) -> str:
    return " · ".join([r.op, str(r.case.get("dtype", "")), r.mode])


def _never_counted(records: list[Measurement]) -> str:
    """Why records with neither a launch count nor a reason have none: their runs did not count launches."""
    runs = ", ".join(dict.fromkeys(r.run_id for r in records))
    return (
        f"not counted: the records of {'run' if ',' not in runs else 'runs'} {runs} hold no launch count and no "
        "reason, as records made before launches were counted do"
    )


def launch_rows(records: Iterable[Measurement], shown: Presentation) -> list[LaunchRow]:
    """Per op · dtype · mode and provider (in tier order), the launches and traffic its records carry."""
    groups: OrderedDict[tuple[str, str], list[Measurement]] = OrderedDict()
    for r in records:
        groups.setdefault((_group(r), r.provider), []).append(r)
    rows = []
    for (group, provider), recs in groups.items():
        if not any(r.launches is not None or r.rel_error is not None for r in recs):
            continue  # never ran here (a package not installed, say): the family's list of problems says why
        counts = [float(r.launches) for r in recs if r.launches is not None]
        ratios = [x for r in recs if (x := traffic_ratio(r)) is not None]
        unread = [r.launches_reason for r in recs if r.launches is None] if not counts else []
        if not counts and not any(unread):
            unread.append(_never_counted(recs))
        unread += [r.traffic_reason for r in recs if r.traffic_bytes is None] if not ratios else []
        rows.append(
            LaunchRow(
                group,
                provider,
                recs[0].tier,
                _span(counts, "{:.0f}") if counts else "",
                _span(ratios, RATIO) + "×" if ratios else "",
                len(counts),
                next((why for why in unread if why), ""),
            )
        )
    order = {g: i for i, g in enumerate(dict.fromkeys(group for group, _ in groups))}
    return sorted(rows, key=lambda row: (order[row.group], shown.tier_rank(row.tier), row.provider))


def _count(r: Measurement, minimum: str = "") -> str:
    ratio = traffic_ratio(r)
    traffic = f", {RATIO.format(ratio)}×{minimum}" if ratio is not None else ""
    return f"{launch_word(r, int(r.launches or 0))}{traffic}"


def fusion_line(records: Iterable[Measurement], shown: Presentation) -> str | None:
    """One line of what fusion saved in one op · dtype · mode: at its largest case where a provider launched
    fewer than the op's baseline (the provider its speedups are quoted against), the baseline named with its
    launches (and traffic against the minimum), then each provider that launched fewer; None where none did."""
    cases: OrderedDict[str, list[Measurement]] = OrderedDict()
    for r in records:
        if r.launches is not None:
            cases.setdefault(r.case_id, []).append(r)
    best = None
    for group in cases.values():
        base = shown.baseline(group, counts=lambda r: r.launches is not None)
        if base is None:
            continue
        fewer = [r for r in group if r.launches < base.launches]
        if fewer and (best is None or group[0].x > best[0].x):
            best = (base, sorted(fewer, key=lambda r: (r.launches, shown.tier_rank(r.tier), r.provider)))
    if best is None:
        return None
    base, fewer = best
    where = f"{base.op} {base.label} {base.case.get('dtype', '')} {base.mode}".replace("  ", " ")
    against = f"against the baseline {base.provider} ({_count(base, ' the minimum bytes')})"
    return f"{where}, {against}: " + "; ".join(f"{r.provider} {_count(r)}" for r in fewer)


def fusion_lines(records: Iterable[Measurement], shown: Presentation) -> list[str]:
    """fusion_line per op · dtype · mode of these records, where fusion saved launches."""
    groups: OrderedDict[str, list[Measurement]] = OrderedDict()
    for r in records:
        groups.setdefault(_group(r), []).append(r)
    return [line for recs in groups.values() if (line := fusion_line(recs, shown))]
