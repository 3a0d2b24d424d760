"""The comparison report as Markdown (a PR comment), as a standalone HTML page, and as JSON for machines."""

from __future__ import annotations

import html
import json
import math

from .compare import Report, Row
from .stats import Verdict

JSON_FORMAT = 1

_STATE_MARK = {
    "slower": "🔴 slower",
    "faster": "🟢 faster",
    "ambiguous": "🟡 ambiguous",
    "unchanged": "unchanged",
    "failed": "failed",
    "skipped": "skipped",
    "new": "new",
    "gone": "gone",
    "incomparable": "incomparable",
}
_COLOURS = {"slower": "#fde2e1", "faster": "#e0f5e3", "ambiguous": "#fff5cc"}


def format_time(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def format_ratio(v: Verdict | None) -> str:
    if v is None or not math.isfinite(v.ratio):
        return "n/a"
    if not math.isfinite(v.ci_low):
        return f"{v.ratio:.3f}"
    return f"{v.ratio:.3f} [{v.ci_low:.3f}, {v.ci_high:.3f}]"


def _confirmation(row: Row) -> str:
    if row.confirmation is None:
        return ""
    c = row.confirmation
    mark = "confirmed" if row.confirmed else "not confirmed"
    return f"{mark}: A/B {c.verdict} {format_ratio(c)}"


def _cells(row: Row) -> list[str]:
    v = row.verdict
    before = format_time(v.before) if v else ""
    after = format_time(v.after) if v else ""
    p = f"{v.p_value:.2g}" if v and math.isfinite(v.p_value) else ""
    limit = f"{v.threshold:.1%}" if v else ""
    source = v.threshold_source if v else ""
    return [
        _STATE_MARK[row.final],
        row.key,
        before,
        after,
        format_ratio(v) if v else "",
        p,
        limit,
        source,
        _confirmation(row),
        row.note,
    ]


HEADER = ["verdict", "benchmark", "before", "after", "ratio [CI]", "p", "threshold", "threshold from", "A/B", "why"]


def summary(report: Report) -> str:
    parts = [f"{report.count(s)} {s}" for s in ("slower", "faster", "ambiguous", "unchanged")]
    others = [f"{report.count(s)} {s}" for s in ("failed", "skipped", "new", "gone", "incomparable") if report.count(s)]
    confirmed = [r for r in report.rows if r.confirmation is not None]
    if confirmed:
        slower = sum(bool(r.confirmed) for r in confirmed)
        others.append(f"{len(confirmed)} re-measured A/B ({slower} confirmed slower)")
    return ", ".join(parts + others)


def settings_line(report: Report) -> str:
    s = report.settings
    unit = "per-round paired ratios" if report.method == "paired A/B" else "session medians"
    return (
        f"{report.method}: {unit}; floor {s.floor:.0%} on the estimate, {s.confidence:.0%} interval "
        f"(t, α {s.alpha:g}); noise: {report.noise_source}"
    )


def drift_line(report: Report) -> str | None:
    """The machine-drift warning, when control series (providers this project does not build) moved."""
    moved = report.moved_controls
    if not moved:
        return None
    named = ", ".join(f"{r.key} x{r.verdict.ratio:.3f}" for r in moved[:4]) + (" ..." if len(moved) > 4 else "")
    return (
        f"Machine drift: {len(moved)} control series (code this project does not build) moved beyond their "
        f"learned noise: {named}. The machine's state differed between the two runs, or the harness changed: "
        "re-measure the project's verdicts A/B (`tierbench compare --ab BASE HEAD`)."
    )


def title(report: Report) -> str:
    return f"tierbench compare {report.base} → {report.head} on {report.machine} ({report.method})"


def headline(report: Report) -> str:
    if report.regressions:
        return "**Performance regression**"
    return "No regression"


def markdown(report: Report) -> str:
    lines = [f"### {title(report)}", ""]
    lines += [f"{headline(report)}: {summary(report)}.", ""]
    drift = drift_line(report)
    if drift:
        lines += [f"⚠️ {drift}", ""]
    lines += [f"<sub>{settings_line(report)}</sub>", ""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "|".join(["---"] * len(HEADER)) + "|")
    for row in report.rows:
        cells = [c.replace("|", "\\|") for c in _cells(row)]
        cells[1] = f"`{cells[1]}`"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def html_page(report: Report) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in HEADER)
    body = []
    for row in report.rows:
        style = f' style="background:{_COLOURS[row.final]}"' if row.final in _COLOURS else ""
        cells = "".join(f"<td>{esc(c)}</td>" for c in _cells(row))
        body.append(f'<tr class="{esc(row.final)}"{style}>{cells}</tr>')
    verdict = "Performance regression" if report.regressions else "No regression"
    drift = drift_line(report)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title(report))}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 3px 8px; text-align: left; }}
td:nth-child(2) {{ font-family: monospace; }}
.note {{ color: #555; }}
.drift {{ background: #fff5cc; padding: 4px 8px; }}
</style></head><body>
<h1>{esc(title(report))}</h1>
<p><b>{esc(verdict)}</b>: {esc(summary(report))}.</p>
{f'<p class="drift">{esc(drift)}</p>' if drift else ""}
<p class="note">{esc(settings_line(report))}</p>
<p class="note">base {esc(report.base_commit or report.base)}, head {esc(report.head_commit or report.head)}</p>
<table><thead><tr>{head}</tr></thead><tbody>
{chr(10).join(body)}
</tbody></table></body></html>
"""


def _verdict_json(v: Verdict | None) -> dict | None:
    if v is None:
        return None
    d = v.as_dict()
    d["interval"] = [d.pop("ci_low"), d.pop("ci_high")]
    return d


def as_json(report: Report) -> dict:
    """Per series: the verdict that counts, ratio, interval, threshold and its source, confirmed or not."""
    s = report.settings
    rows = []
    for row in report.rows:
        v = _verdict_json(row.confirmation or row.verdict) or {}
        rows.append(
            {
                "benchmark": row.key,
                "verdict": row.final,
                "own_code": row.own,
                "ratio": v.get("ratio"),
                "interval": v.get("interval"),
                "threshold": v.get("threshold"),
                "threshold_source": v.get("threshold_source"),
                "confirmed": row.confirmed,
                "method": "paired A/B" if row.confirmation is not None else report.method,
                "cross_session": _verdict_json(row.verdict) if report.method != "paired A/B" else None,
                "ab": _verdict_json(row.confirmation),
                "note": row.note,
            }
        )
    return {
        "format": JSON_FORMAT,
        "base": report.base_commit or report.base,
        "head": report.head_commit or report.head,
        "machine": report.machine,
        "method": report.method,
        "settings": {"floor": s.floor, "alpha": s.alpha, "min_rounds": s.min_rounds},
        "noise": report.noise_source,
        "regression": bool(report.regressions),
        "counts": {state: report.count(state) for state in _STATE_MARK if report.count(state)},
        "series": rows,
    }


def json_text(report: Report) -> str:
    return json.dumps(as_json(report), indent=1, allow_nan=False) + "\n"
