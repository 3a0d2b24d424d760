"""The comparison report as Markdown (a PR comment), as a standalone HTML page, and as JSON for machines."""

from __future__ import annotations

import html
import json
import math

from .compare import OTHER_STATES, Report, Row
from .stats import Verdict

JSON_FORMAT = 2

_STATE_MARK = {
    "confirmed": "🔴 confirmed slower",
    "suspected": "🟡 suspected slower",
    "faster": "🟢 faster",
    "unchanged": "unchanged",
    "drift": "⚠️ drift (control)",
    "steady": "steady (control)",
    "failed": "failed",
    "skipped": "skipped",
    "new": "new",
    "gone": "gone",
    "incomparable": "incomparable",
    "unjudged": "unjudged",
}
_COLOURS = {"confirmed": "#fde2e1", "suspected": "#fff5cc", "faster": "#e0f5e3", "drift": "#f0f0f0"}
SUMMARY_STATES = ("confirmed", "suspected", "faster", "unchanged", "drift", "steady")


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


def _cross_cell(row: Row) -> str:
    """The cross-session estimate behind a row that an A/B then decided, for the reader."""
    if row.ab is None or row.cross is None:
        return ""
    return f"across sessions {format_ratio(row.cross)}"


def _cells(row: Row) -> list[str]:
    v = row.verdict
    before = format_time(v.before) if v else ""
    after = format_time(v.after) if v else ""
    p = f"{v.p_value:.2g}" if v and math.isfinite(v.p_value) else ""
    limit = f"{v.threshold:.1%}" if v and row.state not in OTHER_STATES else ""
    source = v.threshold_source if v and row.state not in OTHER_STATES else ""
    how = row.decided_by
    cross = _cross_cell(row)
    return [
        _STATE_MARK[row.state],
        row.key,
        before,
        after,
        format_ratio(v) if v else "",
        p,
        limit,
        source,
        how + (f"; {cross}" if cross else ""),
        row.note,
    ]


HEADER = [
    "verdict",
    "benchmark",
    "before",
    "after",
    "ratio [CI]",
    "p",
    "threshold",
    "threshold from",
    "decided by",
    "why",
]


def summary(report: Report) -> str:
    parts = [f"{report.count(s)} {s}" for s in SUMMARY_STATES if report.count(s) or s in ("confirmed", "suspected")]
    parts += [f"{report.count(s)} {s}" for s in OTHER_STATES if report.count(s)]
    return ", ".join(parts)


def settings_line(report: Report) -> str:
    s = report.settings
    if report.method == "paired A/B":
        rule = f"paired A/B: per-round ratios, {s.confidence:.0%} interval (t, α {s.alpha:g}), floor {s.floor:.0%}"
    else:
        rule = (
            f"across sessions: run medians against the series' noise between sessions; a suspect is at least "
            f"{s.floor:.0%} slower with one-sided p < {s.suspect_alpha:g}; only a paired A/B "
            f"({s.confidence:.0%} interval, floor {s.floor:.0%}) confirms"
        )
    extra = f"; {report.confirmation}" if report.confirmation else ""
    return f"{rule}; noise: {report.noise_source}{extra}"


def drift_line(report: Report) -> str | None:
    """The machine-drift line: control series (providers this project does not build) that moved, with sizes."""
    moved = report.drifted
    if not moved:
        return None
    named = ", ".join(f"{r.key} ×{r.verdict.ratio:.3f}" for r in moved[:4]) + (" ..." if len(moved) > 4 else "")
    size = report.drift_size()
    typical = f" (median of all controls ×{size:.3f})" if size else ""
    where = (
        "between the two builds' runs of this A/B: the harness or the machine differed"
        if report.method == "paired A/B"
        else "between the two sessions: the machine's state differed"
    )
    return (
        f"Machine drift: {len(moved)} control series (code this project does not build) moved beyond their "
        f"noise {where}{typical}: {named}. Controls never fail a run; the project's suspects are decided by a "
        "paired A/B in one session (`--confirm`), which drift between sessions does not reach."
    )


def title(report: Report) -> str:
    return f"tierbench compare {report.base} → {report.head} on {report.machine} ({report.method})"


def headline(report: Report) -> str:
    if report.what:  # two runs, providers or plugin versions: the head is slower or not, no commit regressed
        if report.regressions:
            return "**Confirmed slower**"
        return "**Suspected slower, not confirmed**" if report.suspects else "Not slower"
    if report.regressions:
        return "**Confirmed regression**"
    if report.suspects:
        return "**Suspected, not confirmed**"
    return "No regression"


def markdown(report: Report) -> str:
    lines = [f"### {title(report)}", ""]
    if report.what:
        lines += [f"Compared: {report.what}.", ""]
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
        style = f' style="background:{_COLOURS[row.state]}"' if row.state in _COLOURS else ""
        cells = "".join(f"<td>{esc(c)}</td>" for c in _cells(row))
        body.append(f'<tr class="{esc(row.state)}"{style}>{cells}</tr>')
    verdict = headline(report).strip("*")
    drift = drift_line(report)
    compared = esc(f"compared: {report.what}; ") if report.what else ""
    sides = esc(f"base {report.base_commit or report.base}, head {report.head_commit or report.head}")
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
<p class="note">{compared}{sides}</p>
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
    """Per series: the state that counts and how it was decided, ratio, interval, threshold and its source, the
    cross-session and A/B verdicts in full."""
    s = report.settings
    rows = []
    for row in report.rows:
        v = _verdict_json(row.verdict) or {}
        rows.append(
            {
                "benchmark": row.key,
                "verdict": row.state,
                "own_code": row.own,
                "decided_by": row.decided_by,
                "ratio": v.get("ratio"),
                "interval": v.get("interval"),
                "threshold": v.get("threshold"),
                "threshold_source": v.get("threshold_source"),
                "confirmed": row.confirmed,
                "normalised_by": row.normalised_by or None,
                "cross_session": _verdict_json(row.cross),
                "ab": _verdict_json(row.ab),
                "note": row.note,
            }
        )
    compared = {"compared": report.what} if report.what else {}  # runs, providers, plugin versions
    return {
        "format": JSON_FORMAT,
        **compared,
        "base": report.base_commit or report.base,
        "head": report.head_commit or report.head,
        "machine": report.machine,
        "method": report.method,
        "settings": {
            "floor": s.floor,
            "alpha": s.alpha,
            "suspect_alpha": s.suspect_alpha,
            "min_rounds": s.min_rounds,
        },
        "noise": report.noise_source,
        "confirmation": report.confirmation,
        "regression": bool(report.regressions),
        "drift": {
            "controls_moved": [r.key for r in report.drifted],
            "median_ratio": report.drift_size(),
        },
        "counts": {state: report.count(state) for state in _STATE_MARK if report.count(state)},
        "series": rows,
    }


def json_text(report: Report) -> str:
    return json.dumps(as_json(report), indent=1, allow_nan=False) + "\n"
