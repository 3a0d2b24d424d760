"""`tierbench summary RUN`: a run as Markdown tables, one per op family and mode (for docs and PR comments).

RUN is a run folder, a run id, or a sweep id: a sweep's shard runs are summarised as one run.

Per case: the best timed provider of each tier (the family's metric: TFLOP/s for compute-bound families,
GB/s for norms), its ratio to the baseline provider, the winner's fraction of the device's ceiling, what
each provider's call launched and, where measured, its device-memory traffic over the op's minimum bytes.
A family measured in more than one pass also gets its passes side by side: per shape, the fastest timed
provider of each pass and the backward's time over the forward's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

from . import runmeta, sweep
from .fusion import RATIO, fusion_lines, traffic_ratio
from .presentation import Presentation
from .records import Measurement, read_records
from .summary import by_case
from .text import plain, warnings_as_lines
from .units import sig


def _best_per_tier(group: list[Measurement]) -> dict[str, Measurement]:
    best: dict[str, Measurement] = {}
    for r in group:
        if r.status == "ok" and r.median_ms and (r.tier not in best or r.median_ms < best[r.tier].median_ms):
            best[r.tier] = r
    return best


def _cell(text: str) -> str:
    """Record text inside a Markdown table: no control characters, no cell breaks, no markup."""
    return plain(text).replace("|", "\\|").replace("<", "&lt;").replace("`", "\\`")


def tables(
    records: list[Measurement], shown: Presentation, families: list[str] | None = None
) -> OrderedDict[tuple[str, str], dict[str, Any]]:
    """Per (family, mode): its unit, tiers and one row per case, as `render` and `--json` show them."""
    out: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
    tiers = shown.tier_names(records)
    for _, group in by_case(records).items():
        first = group[0]
        if families and first.family not in families:
            continue
        view = shown.view(first.family, [r for r in records if r.family == first.family])
        key = (first.family, first.mode)
        table = out.setdefault(
            key, {"family": first.family, "mode": first.mode, "unit": view.unit, "tiers": tiers, "rows": []}
        )
        best = _best_per_tier(group)
        base = shown.baseline(group)
        winner = min(best.values(), key=lambda r: r.median_ms) if best else None
        cells = {}
        for tier in tiers:
            r = best.get(tier)
            value = getattr(r, view.metric, None) if r else None
            cells[tier] = {"provider": r.provider, "value": value, "median_ms": r.median_ms} if value else None
        not_timed = [
            {"provider": r.provider, "status": r.status, "reason": r.reason}
            for r in group
            if r.status not in ("ok", "skipped")
            # a skip that was checked first (timings not comparable here) is no news; nor is a missing package
            or (r.status == "skipped" and "installed" not in r.reason and r.rel_error is None)
        ]
        profiled = sorted(group, key=lambda r: (shown.tier_rank(r.tier), r.provider))
        table["rows"].append(
            {
                "op": first.op,
                "shape": first.label,
                "dtype": str(first.case.get("dtype", "")),
                "case_id": first.case_id,
                "tiers": cells,
                "winner": winner.provider if winner else None,
                "baseline": base.provider if base else None,
                "best_vs_baseline": base.median_ms / winner.median_ms if base and winner else None,
                "best_sol": winner.sol if winner else None,
                "launches": {r.provider: r.launches for r in profiled if r.launches is not None},
                "traffic_over_min": {r.provider: x for r in profiled if (x := traffic_ratio(r)) is not None},
                "not_timed": not_timed,
            }
        )
    return out


def render(records: list[Measurement], shown: Presentation, families: list[str] | None = None) -> str:
    sections = []
    for (family, mode), table in tables(records, shown, families).items():
        head = " | ".join(f"{_cell(t)} ({table['unit']})" for t in table["tiers"])
        lines = [
            f"| op | shape | dtype | {head} | best vs baseline | best SOL | launches | traffic / min | not timed |",
            "|" + " --- |" * (len(table["tiers"]) + 8),
        ]
        for row in table["rows"]:
            cells = [
                f"{sig(c['value'])} ({_cell(c['provider'])})" if (c := row["tiers"][t]) else "" for t in table["tiers"]
            ]
            ratio = f"{row['best_vs_baseline']:.2f}x {_cell(row['winner'])}" if row["best_vs_baseline"] else ""
            sol = f"{sig(100 * row['best_sol'])}%" if row["best_sol"] is not None else ""
            launches = ", ".join(f"{_cell(p)} {n}" for p, n in row["launches"].items())
            traffic = ", ".join(f"{_cell(p)} {RATIO.format(x)}x" for p, x in row["traffic_over_min"].items())
            failed = ", ".join(f"{_cell(n['provider'])}: {n['status']}" for n in row["not_timed"])
            lines.append(
                f"| {_cell(row['op'])} | {_cell(row['shape'])} | {_cell(row['dtype'])} | "
                + " | ".join(cells)
                + f" | {ratio} | {sol} | {launches} | {traffic} | {failed} |"
            )
        recs = [r for r in records if r.family == family and r.mode == mode]
        saved = "".join(f"\n\nWhat fusion saved: {_cell(line)}" for line in fusion_lines(recs, shown))
        sections.append(f"### {family} ({mode})\n\n" + "\n".join(lines) + saved)
    sections += _passes_side_by_side(records, families)
    return "\n\n".join(sections) + "\n"


MODES = ("fwd", "bwd", "fwd_bwd")


def _passes_side_by_side(records: list[Measurement], families: list[str] | None) -> list[str]:
    """Per family measured in several passes: one row per shape, the fastest timed provider of each pass."""
    best: OrderedDict[str, OrderedDict[tuple, dict[str, Measurement]]] = OrderedDict()
    for group in by_case(records).values():
        first = group[0]
        if families and first.family not in families:
            continue
        shape = (first.op, first.label, tuple(sorted((k, str(v)) for k, v in first.case.items() if k != "mode")))
        timed = [r for r in group if r.status == "ok" and r.median_ms]
        if timed:
            fastest = min(timed, key=lambda r: r.median_ms)
            best.setdefault(first.family, OrderedDict()).setdefault(shape, {})[first.mode] = fastest
    out = []
    for family, shapes in best.items():
        modes = [m for m in MODES if any(m in per for per in shapes.values())]
        if len(modes) < 2:
            continue
        rows = [
            "| op | shape | dtype | " + " | ".join(f"{m} (ms)" for m in modes) + " | bwd / fwd |",
            "|" + " --- |" * (len(modes) + 4),
        ]
        for (op, label, params), per in shapes.items():
            cells = [f"{per[m].median_ms:.4g} ({_cell(per[m].provider)})" if m in per else "" for m in modes]
            ratio = f"{per['bwd'].median_ms / per['fwd'].median_ms:.2f}x" if "bwd" in per and "fwd" in per else ""
            dtype = dict(params).get("dtype", "")
            rows.append(f"| {_cell(op)} | {_cell(label)} | {_cell(dtype)} | " + " | ".join(cells) + f" | {ratio} |")
        out.append(f"### {family}: passes side by side (fastest timed provider)\n\n" + "\n".join(rows))
    return out


def as_json(records: list[Measurement], shown: Presentation, families: list[str] | None = None) -> str:
    return json.dumps(list(tables(records, shown, families).values()), indent=1, allow_nan=False, default=str) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tierbench summary", description=__doc__.splitlines()[0])
    parser.add_argument("run", help="run folder (results/runs/<id>), run id, or sweep id (its shards as one run)")
    parser.add_argument("--runs", type=Path, default=Path("results/runs"), help="where run ids are looked up")
    parser.add_argument("--family", action="append", help="only these families")
    parser.add_argument("--json", action="store_true", help="the same tables as JSON (one object per table)")
    args = parser.parse_args(argv)
    folders = sweep.resolve_runs(args.run, args.runs)
    with warnings_as_lines("tierbench summary"):
        records = [r for folder in folders for r in read_records(folder)]
    if not records:
        print(
            f"tierbench summary: {plain(args.run)} holds no records (is it a run folder, run id or sweep id?)",
            file=sys.stderr,
        )
        return 2
    families = list(dict.fromkeys(r.family for r in records))
    unknown = [f for f in args.family or [] if f not in families]
    if unknown:
        print(
            plain(
                f"tierbench summary: --family {', '.join(unknown)}: the run has no such family; its families: "
                + ", ".join(families)
            ),
            file=sys.stderr,
        )
        return 2
    records.sort(key=lambda r: r.time)
    shown = Presentation.of([runmeta.read(folder) for folder in folders])
    print((as_json if args.json else render)(records, shown, args.family), end="")
    return 0
