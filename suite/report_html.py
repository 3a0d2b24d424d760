"""report.html of one run: self-contained (inline CSS and SVG, no scripts from a network), opens from disk."""

from __future__ import annotations

from collections import OrderedDict
from html import escape
from pathlib import Path
from typing import Any

from .ceilings import Ceilings
from .records import Measurement
from .summary import by_case, rank
from .svgchart import Series, line_chart

# Per family: the chart's metric, its axis label, and the case parameters that split charts.
FAMILY_VIEW: dict[str, dict[str, Any]] = {
    "matmul": {"metric": "tflops", "unit": "TFLOP/s", "x": "size: cube root of M·N·K", "split": ("dtype",)},
    "norm": {"metric": "gbps", "unit": "GB/s", "x": "elements (rows × hidden)", "split": ("dtype",)},
    "attention": {
        "metric": "tflops",
        "unit": "TFLOP/s",
        "x": "sequence length",
        "split": ("dtype", "head_dim", "causal"),
    },
}

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#1a1a1a;padding:0 16px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.status-ok{color:#006d4f}.status-incorrect,.status-error,.status-oom{color:#b4380f;font-weight:600}
.status-skipped{color:#666}.chart .grid{stroke:#eee}.chart .axis{stroke:#888}
.chart .tick{font-size:11px;fill:#444}.chart .label{font-size:12px;fill:#222}
.chart .title{font-size:13px;font-weight:600}
.meta td{border:none;padding:1px 10px 1px 0}.empty{color:#666}
"""


def _fmt(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def _chart_key(r: Measurement, split: tuple[str, ...]) -> str:
    parts = [r.op] + [f"{k}={r.case.get(k)}" for k in split if k in r.case]
    return " · ".join(parts)


def _charts(family: str, records: list[Measurement]) -> str:
    view = FAMILY_VIEW[family]
    groups: OrderedDict[str, dict[str, Series]] = OrderedDict()
    for r in records:
        if r.status != "ok":
            continue
        key = _chart_key(r, view["split"])
        series = groups.setdefault(key, {}).setdefault(r.provider, Series(r.provider))
        value = getattr(r, view["metric"])
        hover = (
            f"{r.provider} ({r.tier}) {r.label}: {value:.4g} {view['unit']}, median {r.median_ms:.4g} ms, "
            f"SOL {100 * (r.sol or 0):.1f}%, rel. error {_fmt(r.rel_error, 3)}"
        )
        series.points.append((r.x, value, hover))
    return "".join(line_chart(list(s.values()), key, view["x"], view["unit"]) for key, s in groups.items())


def _table(records: list[Measurement]) -> str:
    rows = [
        "<table><tr><th>case</th><th>provider</th><th>tier</th><th>status</th><th>median ms</th>"
        "<th>p10–p90 ms</th><th>speedup</th><th>TFLOP/s</th><th>GB/s</th><th>SOL</th><th>rel. error</th>"
        "<th>peak mem MiB</th><th>reason</th><th>launched</th></tr>"
    ]
    for _, group in by_case(records).items():
        ranked, rest = rank(group)
        for item in ranked:
            r = item.record
            q = r.quantiles_ms
            spread = f"{_fmt(q.get('p10'))}–{_fmt(q.get('p90'))}" if q else ""
            rows.append(_row(r, spread, f"{item.speedup:.2f}×" if item.speedup else ""))
        rows += [_row(r, "", "") for r in rest]
    rows.append("</table>")
    return "".join(rows)


def _row(r: Measurement, spread: str, speedup: str) -> str:
    mem = _fmt(r.peak_mem_bytes / 2**20, 4) if r.peak_mem_bytes is not None else ""
    sol = f"{100 * r.sol:.1f}%" if r.sol is not None else ""
    cells = [
        escape(f"{r.label} {r.case.get('dtype', '')}"),
        escape(r.provider),
        escape(r.tier),
        f'<span class="status-{escape(r.status)}">{escape(r.status)}</span>',
    ]
    nums = [_fmt(r.median_ms), spread, speedup, _fmt(r.tflops), _fmt(r.gbps), sol, _fmt(r.rel_error, 3), mem]
    return (
        "<tr>"
        + "".join(f"<td>{c}</td>" for c in cells)
        + "".join(f'<td class="num">{escape(n)}</td>' for n in nums)
        + f"<td>{escape(r.reason or '')}</td><td>{escape(r.launch or '')}</td></tr>"
    )


def render(records: list[Measurement], run_id: str, ceilings: Ceilings | None) -> str:
    env = records[0].env if records else {}
    meta = [
        ("run", run_id),
        ("device", env.get("device_name")),
        ("driver", env.get("driver")),
        ("CUDA", env.get("cuda")),
        ("torch", env.get("torch")),
        ("triton", env.get("triton")),
        ("commit", env.get("git_commit")),
    ]
    if ceilings:
        meta.append(("copy ceiling", f"{ceilings.copy_gbps:.0f} GB/s"))
        meta += [(f"matmul ceiling {k}", f"{v:.1f} TFLOP/s") for k, v in ceilings.matmul_tflops.items()]
    parts = [
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>tierbench run {escape(run_id)}"
        f"</title><style>{CSS}</style></head><body><h1>tierbench run {escape(run_id)}</h1><table class=meta>",
        *(f"<tr><td>{escape(k)}</td><td>{escape(str(v))}</td></tr>" for k, v in meta if v is not None),
        "</table>",
    ]
    by_family: OrderedDict[str, list[Measurement]] = OrderedDict()
    for r in records:
        by_family.setdefault(r.family, []).append(r)
    for family, recs in by_family.items():
        parts.append(f"<h2>{escape(family)}</h2>")
        if family in FAMILY_VIEW:
            parts.append(_charts(family, recs))
        parts.append(_table(recs))
    parts.append("</body></html>\n")
    return "".join(parts)


def write(run_dir: Path, records: list[Measurement], run_id: str, ceilings: Ceilings | None) -> Path:
    path = run_dir / "report.html"
    tmp = path.with_name("report.html.tmp")
    tmp.write_text(render(records, run_id, ceilings), encoding="utf-8")
    tmp.replace(path)
    return path
