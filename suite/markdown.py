"""`tierbench summary RUN`: a run as Markdown tables, one per op family and mode (for docs and PR comments).

RUN is a run folder, a run id, or a sweep id: a sweep's shard runs are summarised as one run.

Per case: the best timed provider of each tier (the family's metric: TFLOP/s for compute-bound families,
GB/s for norms), its ratio to the baseline provider, the winner's fraction of the device's ceiling, what
each provider's call launched and, where measured, its device-memory traffic over the op's minimum bytes.
"""

from __future__ import annotations

import argparse
import sys
from collections import OrderedDict
from pathlib import Path

from . import runmeta, sweep
from .fusion import RATIO, fusion_lines, traffic_ratio
from .presentation import Presentation
from .records import Measurement, read_records
from .summary import by_case
from .text import plain, warnings_as_lines


def _best_per_tier(group: list[Measurement]) -> dict[str, Measurement]:
    best: dict[str, Measurement] = {}
    for r in group:
        if r.status == "ok" and r.median_ms and (r.tier not in best or r.median_ms < best[r.tier].median_ms):
            best[r.tier] = r
    return best


def _cell(text: str) -> str:
    """Record text inside a Markdown table: no control characters, no cell breaks, no markup."""
    return plain(text).replace("|", "\\|").replace("<", "&lt;").replace("`", "\\`")


def render(records: list[Measurement], shown: Presentation, families: list[str] | None = None) -> str:
    tables: OrderedDict[tuple[str, str], list[str]] = OrderedDict()
    tiers = shown.tier_names(records)
    for _, group in by_case(records).items():
        first = group[0]
        if families and first.family not in families:
            continue
        view = shown.view(first.family, [r for r in records if r.family == first.family])
        key = (first.family, first.mode)
        if key not in tables:
            head = " | ".join(f"{_cell(t)} ({view.unit})" for t in tiers)
            tables[key] = [
                f"| op | shape | dtype | {head} | best vs baseline | best SOL | launches | traffic / min | not timed |",
                "|" + " --- |" * (len(tiers) + 8),
            ]
        best = _best_per_tier(group)
        base = shown.baseline(group)
        cells = []
        for tier in tiers:
            r = best.get(tier)
            value = getattr(r, view.metric, None) if r else None
            cells.append(f"{value:.3g} ({_cell(r.provider)})" if value else "")
        winner = min(best.values(), key=lambda r: r.median_ms) if best else None
        ratio = f"{base.median_ms / winner.median_ms:.2f}x {_cell(winner.provider)}" if base and winner else ""
        sol = f"{100 * winner.sol:.3g}%" if winner and winner.sol is not None else ""
        failed = ", ".join(
            f"{_cell(r.provider)}: {r.status}"
            for r in group
            if r.status not in ("ok", "skipped")
            # a skip that was checked first (timings not comparable here) is no news; nor is a missing package
            or (r.status == "skipped" and "installed" not in r.reason and r.rel_error is None)
        )
        profiled = sorted(group, key=lambda r: (shown.tier_rank(r.tier), r.provider))
        launches = ", ".join(f"{_cell(r.provider)} {r.launches}" for r in profiled if r.launches is not None)
        traffic = ", ".join(
            f"{_cell(r.provider)} {RATIO.format(x)}x" for r in profiled if (x := traffic_ratio(r)) is not None
        )
        tables[key].append(
            f"| {_cell(first.op)} | {_cell(first.label)} | {_cell(str(first.case.get('dtype', '')))} | "
            + " | ".join(cells)
            + f" | {ratio} | {sol} | {launches} | {traffic} | {failed} |"
        )
    sections = []
    for (family, mode), rows in tables.items():
        recs = [r for r in records if r.family == family and r.mode == mode]
        saved = "".join(f"\n\nWhat fusion saved: {_cell(line)}" for line in fusion_lines(recs, shown))
        sections.append(f"### {family} ({mode})\n\n" + "\n".join(rows) + saved)
    return "\n\n".join(sections) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tierbench summary", description=__doc__.splitlines()[0])
    parser.add_argument("run", help="run folder (results/runs/<id>), run id, or sweep id (its shards as one run)")
    parser.add_argument("--runs", type=Path, default=Path("results/runs"), help="where run ids are looked up")
    parser.add_argument("--family", action="append", help="only these families")
    args = parser.parse_args(argv)
    folders = sweep.resolve_runs(args.run, args.runs)
    with warnings_as_lines("tierbench summary"):
        records = [r for folder in folders for r in read_records(folder)]
    if not records:
        print(
            f"tierbench summary: {args.run} holds no records (is it a run folder, run id or sweep id?)", file=sys.stderr
        )
        return 2
    records.sort(key=lambda r: r.time)
    print(render(records, Presentation.of([runmeta.read(folder) for folder in folders]), args.family), end="")
    return 0
