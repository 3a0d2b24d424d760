"""`tierbench summary RUN`: a run as Markdown tables, one per op family and mode (for docs and PR comments).

RUN is a run folder, a run id, or a sweep id: a sweep's shard runs are summarised as one run.

Per case: the best timed provider of each tier (the family's metric: TFLOP/s for compute-bound families,
GB/s for norms), its ratio to the baseline provider, the winner's fraction of the device's ceiling, what
each provider's call launched and, where measured, its device-memory traffic over the op's minimum bytes.
A family measured in more than one pass also gets its passes side by side: per shape, the fastest timed
provider of each pass and the backward's time over the forward's. A model's blocks get the model view
(suite/show/blocks.py): per model and phase each op's share of the block, its fastest tier and what moving only it
buys end to end, the moves ranked, and per strategy the measured block against the sum of its parts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..ceilings import sol_text
from ..store import runmeta
from ..store.reading import RUNS_ROOT, fastest, fastest_per_tier, find_runs, read_runs, timed
from ..store.records import Measurement
from ..store.verdicts import checked_correct, verdict
from ..text import plain, warnings_as_lines
from ..units import sig
from . import blocks
from .fusion import RATIO, fusion_lines, traffic_ratio
from .presentation import Presentation
from .summary import by_case


def _not_timed_cell(entries: list[dict[str, Any]]) -> str:
    """Every provider of the case not timed, grouped by outcome: "skipped: a, b; correct, not timed: c"."""
    by_verdict: dict[str, list[str]] = {}
    for n in entries:
        mark = "*" if n.get("verdict_note") else ""
        by_verdict.setdefault(n["verdict"], []).append(_cell(n["provider"]) + mark)
    return "; ".join(f"{word}: {', '.join(names)}" for word, names in by_verdict.items())


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
        best = fastest_per_tier(group)
        base = shown.baseline(group)
        quickest = fastest(best.values())
        # Correct under today's bounds but never timed (an older bound called them incorrect): no winner yet.
        untimed = sorted(r.provider for r in group if r.verdict_note and checked_correct(r))
        winner = None if untimed else quickest
        cells = {}
        for tier in tiers:
            r = best.get(tier)
            value = getattr(r, view.metric, None) if r else None
            cells[tier] = {"provider": r.provider, "value": value, "median_ms": r.median_ms} if value else None
        not_timed = [
            {"provider": r.provider, "status": r.status, "verdict": verdict(r), "reason": r.reason}
            | ({"verdict_note": r.verdict_note} if r.verdict_note else {})
            for r in group
            if not timed(r)
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
                "fastest_timed": quickest.provider if quickest else None,
                "untimed_correct": untimed,
                "baseline": base.provider if base else None,
                "best_vs_baseline": base.median_ms / quickest.median_ms if base and quickest else None,
                "best_sol": quickest.sol if quickest else None,
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
            ratio = f"{row['best_vs_baseline']:.2f}x {_cell(row['fastest_timed'])}" if row["best_vs_baseline"] else ""
            if row["untimed_correct"]:
                ratio += f" (fastest timed, no winner: {len(row['untimed_correct'])} correct, not timed*)"
            sol = sol_text(row["best_sol"])
            launches = ", ".join(f"{_cell(p)} {n}" for p, n in row["launches"].items())
            traffic = ", ".join(f"{_cell(p)} {RATIO.format(x)}x" for p, x in row["traffic_over_min"].items())
            failed = _not_timed_cell(row["not_timed"])
            lines.append(
                f"| {_cell(row['op'])} | {_cell(row['shape'])} | {_cell(row['dtype'])} | "
                + " | ".join(cells)
                + f" | {ratio} | {sol} | {launches} | {traffic} | {failed} |"
            )
        recs = [r for r in records if r.family == family and r.mode == mode]
        saved = "".join(f"\n\nWhat fusion saved: {_cell(line)}" for line in fusion_lines(recs, shown))
        rejudged = "".join(
            f"\n\n\\* {_cell(r.provider)}, {_cell(r.label)}: {_cell(r.verdict_note)}" for r in recs if r.verdict_note
        )
        sections.append(f"### {family} ({mode})\n\n" + "\n".join(lines) + saved + rejudged)
    sections += _passes_side_by_side(records, families)
    if not families or "model" in families:
        sections += [_model_view(view) for view in blocks.views(records, shown)]
    return "\n\n".join(sections) + "\n"


def _ms(value: float | None) -> str:
    return sig(value) if value is not None else ""


def _model_view(view: blocks.BlockView) -> str:
    """One block's view as Markdown: its parts, its strategies, the ranked moves."""
    lines = [
        f"### model view: {_cell(view.model)}, {_cell(view.phase)} ({_cell(view.label)}, {_cell(view.dtype)}, "
        f"{_cell(view.mode)})",
        "",
        "| part | op | eager (ms) | share | fastest | fastest (ms) | moving only it buys | wrong or failed |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in view.parts:
        fastest = f"{_cell(p.fastest.provider)} ({_cell(p.fastest.tier)})" if p.fastest else ""
        buys = f"{100 * p.gain:.1f}% ({p.speedup:.3f}x)" if p.gain and p.speedup else ("0%" if p.gain == 0 else "")
        failed = ", ".join(f"{_cell(r.provider)}: {r.status}" for r in p.failed)
        share = f"{100 * p.share:.1f}%" if p.share is not None else ""
        lines.append(
            f"| {_cell(p.name)} | {_cell(p.op)} | {_ms(p.eager_ms)} | {share} | {fastest} | "
            f"{_ms(p.fastest.median_ms if p.fastest else None)} | {buys} | {failed} |"
        )
    lines += [
        "",
        "| strategy | block (ms) | sum of its parts (ms) | block / parts | peak memory (MiB) | status |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in view.strategies.values():
        status = row.record.status if row.record is not None else "not measured"
        if row.record is not None and row.record.status != "ok":
            status += f": {_cell(row.record.reason)}"
        if row.missing:
            status += f" (parts without a time: {', '.join(_cell(m) for m in row.missing)})"
        mem = sig(row.peak_mem_bytes / 2**20) if row.peak_mem_bytes is not None else ""
        ratio = f"{row.ratio:.2f}" if row.ratio is not None else ""
        lines.append(f"| {row.name} | {_ms(row.measured_ms)} | {_ms(row.parts_ms)} | {ratio} | {mem} | {status} |")
    mix = view.strategies["best-mix"].record
    if mix is not None and mix.composed:
        lines += ["", "Best mix: " + ", ".join(f"{_cell(k)} {_cell(v)}" for k, v in mix.composed.items())]
    if view.moves:
        start = "measured eager block" if view.base_measured else "sum of the eager parts"
        lines += ["", f"Moves, ranked (from the {start}, {sig(view.base_ms)} ms):"]
        lines += [
            f"{i}. {_cell(m.part.name)} to {_cell(m.part.fastest.provider)} ({_cell(m.part.fastest.tier)}): "
            f"saves {sig(m.part.saving_ms)} ms, block then {sig(m.predicted_ms)} ms"
            for i, m in enumerate(view.moves, 1)
        ]
    if sentence := view.compile_vs_mix():
        lines += ["", sentence[0].upper() + sentence[1:] + "."]
    return "\n".join(lines)


def model_views_json(records: list[Measurement], shown: Presentation) -> list[dict[str, Any]]:
    """The model view as `--json` gives it: one object per block."""
    out = []
    for view in blocks.views(records, shown):
        out.append(
            {
                "view": "model",
                "family": "model",
                "model": view.model,
                "phase": view.phase,
                "case_id": view.case_id,
                "label": view.label,
                "dtype": view.dtype,
                "mode": view.mode,
                "parts": [
                    {
                        "part": p.name,
                        "op": p.op,
                        "case_id": p.case_id,
                        "eager_ms": p.eager_ms,
                        "share": p.share,
                        "fastest": p.fastest.provider if p.fastest else None,
                        "fastest_tier": p.fastest.tier if p.fastest else None,
                        "fastest_ms": p.fastest.median_ms if p.fastest else None,
                        "end_to_end_gain": p.gain,
                        "end_to_end_speedup": p.speedup,
                        "failed": {r.provider: r.status for r in p.failed},
                    }
                    for p in view.parts
                ],
                "strategies": {
                    row.name: {
                        "block_ms": row.measured_ms,
                        "parts_ms": row.parts_ms,
                        "block_over_parts": row.ratio,
                        "peak_mem_bytes": row.peak_mem_bytes,
                        "status": row.record.status if row.record is not None else None,
                        "composed": row.record.composed if row.record is not None else {},
                    }
                    for row in view.strategies.values()
                },
                "moves": [
                    {"part": m.part.name, "to": m.part.fastest.provider, "block_ms": m.predicted_ms} for m in view.moves
                ],
                "compile_vs_mix": view.compile_vs_mix(),
            }
        )
    return out


MODES = ("fwd", "bwd", "fwd_bwd")


def _passes_side_by_side(records: list[Measurement], families: list[str] | None) -> list[str]:
    """Per family measured in several passes: one row per shape, the fastest timed provider of each pass."""
    best: OrderedDict[str, OrderedDict[tuple, dict[str, Measurement]]] = OrderedDict()
    for group in by_case(records).values():
        first = group[0]
        if families and first.family not in families:
            continue
        shape = (first.op, first.label, tuple(sorted((k, str(v)) for k, v in first.case.items() if k != "mode")))
        quickest = fastest(group)
        if quickest is not None:
            best.setdefault(first.family, OrderedDict()).setdefault(shape, {})[first.mode] = quickest
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
    out = list(tables(records, shown, families).values())
    if not families or "model" in families:
        out += model_views_json(records, shown)
    return json.dumps(out, indent=1, allow_nan=False, default=str) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tierbench summary", description=__doc__.splitlines()[0])
    parser.add_argument("run", help=f"run folder ({RUNS_ROOT}/<id>), run id, or sweep id (its shards as one run)")
    parser.add_argument("--runs", type=Path, default=Path(RUNS_ROOT), help="where run ids are looked up")
    parser.add_argument("--family", action="append", help="only these families")
    parser.add_argument("--json", action="store_true", help="the same tables as JSON (one object per table)")
    args = parser.parse_args(argv)
    folders = find_runs(args.run, args.runs)
    with warnings_as_lines("tierbench summary"):
        records = read_runs(folders)
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
