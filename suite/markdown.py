"""`tierbench summary RUN`: a run as Markdown tables, one per op family (for docs and PR comments).

Per case: the best timed provider of each tier (TFLOP/s for compute-bound families, GB/s for norms),
its ratio to the vendor baseline, and the winner's fraction of the device's ceiling.
"""

from __future__ import annotations

import argparse
import sys
from collections import OrderedDict
from pathlib import Path

from .providers import TIERS
from .records import Measurement, read_records
from .summary import baseline, by_case

_METRIC = {"matmul": ("tflops", "TFLOP/s"), "attention": ("tflops", "TFLOP/s"), "norm": ("gbps", "GB/s")}


def _best_per_tier(group: list[Measurement]) -> dict[str, Measurement]:
    best: dict[str, Measurement] = {}
    for r in group:
        if r.status == "ok" and r.median_ms and (r.tier not in best or r.median_ms < best[r.tier].median_ms):
            best[r.tier] = r
    return best


def render(records: list[Measurement], families: list[str] | None = None) -> str:
    tables: OrderedDict[str, list[str]] = OrderedDict()
    for _, group in by_case(records).items():
        first = group[0]
        if families and first.family not in families:
            continue
        metric, unit = _METRIC.get(first.family, ("tflops", "TFLOP/s"))
        if first.family not in tables:
            head = " | ".join(f"{t} ({unit})" for t in TIERS)
            tables[first.family] = [
                f"| op | shape | dtype | {head} | best vs vendor | best SOL | not timed |",
                "|" + " --- |" * (len(TIERS) + 6),
            ]
        best = _best_per_tier(group)
        base = baseline(group)
        cells = []
        for tier in TIERS:
            r = best.get(tier)
            cells.append(f"{getattr(r, metric):.0f} ({r.provider})" if r and getattr(r, metric) else "")
        winner = min(best.values(), key=lambda r: r.median_ms) if best else None
        ratio = f"{base.median_ms / winner.median_ms:.2f}x {winner.provider}" if base and winner else ""
        sol = f"{100 * winner.sol:.0f}%" if winner and winner.sol is not None else ""
        failed = ", ".join(
            f"{r.provider}: {r.status}"
            for r in group
            if r.status not in ("ok", "skipped")
            or (r.status == "skipped" and "installed" not in r.reason and r.tier != "triton")
        )
        tables[first.family].append(
            f"| {first.op} | {first.label} | {first.case.get('dtype', '')} | "
            + " | ".join(cells)
            + f" | {ratio} | {sol} | {failed} |"
        )
    return "\n\n".join(f"### {family}\n\n" + "\n".join(rows) for family, rows in tables.items()) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tierbench summary", description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="run folder (results/runs/<id>)")
    parser.add_argument("--family", action="append", choices=list(_METRIC), help="only these families")
    args = parser.parse_args(argv)
    records = read_records(args.run) if args.run.is_dir() else []
    if not records:
        print(f"tierbench summary: {args.run} holds no records (is it a run folder?)", file=sys.stderr)
        return 2
    print(render(records, args.family), end="")
    return 0
