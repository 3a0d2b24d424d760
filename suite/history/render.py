"""The comparison report as Markdown (a PR comment) and as a standalone HTML page."""

from __future__ import annotations

import html
import math

from .compare import Report, Row

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


def format_ratio(row: Row) -> str:
    c = row.comparison
    if c is None or not math.isfinite(c.ratio):
        return "n/a"
    if not math.isfinite(c.ci_low):
        return f"{c.ratio:.3f}"
    return f"{c.ratio:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}]"


def _cells(row: Row) -> list[str]:
    c = row.comparison
    before = format_time(c.before) if c else ""
    after = format_time(c.after) if c else ""
    p = f"{c.p_value:.2g}" if c and math.isfinite(c.p_value) else ""
    limit = f"{c.threshold:.1%}" if c else ""
    noise = f"{row.noise:.1%} ({row.noise_origin})" if row.noise is not None else ""
    return [_STATE_MARK[row.state], row.key, before, after, format_ratio(row) if c else "", p, limit, noise, row.note]


HEADER = ["verdict", "benchmark", "before", "after", "ratio [CI]", "p", "threshold", "noise (A/A)", "why"]


def summary(report: Report) -> str:
    parts = [f"{report.count(s)} {s}" for s in ("slower", "faster", "ambiguous", "unchanged")]
    others = [f"{report.count(s)} {s}" for s in ("failed", "skipped", "new", "gone", "incomparable") if report.count(s)]
    return ", ".join(parts + others)


def settings_line(report: Report) -> str:
    s = report.settings
    return (
        f"floor {s.floor:.0%}, α {s.alpha:g}, {s.confidence:.0%} interval (Hodges-Lehmann), "
        f"Mann-Whitney U on samples, threshold = max(floor, {s.noise_factor:g} × A/A noise); "
        f"noise: {report.noise_source}"
    )


def drift_line(report: Report) -> str | None:
    """The machine-drift warning, when control series (providers this project does not build) moved."""
    moved = report.moved_controls
    if not moved:
        return None
    named = ", ".join(f"{r.key} x{r.comparison.ratio:.3f}" for r in moved[:4]) + (" ..." if len(moved) > 4 else "")
    own = "/".join(report.own_providers)
    return (
        f"Machine drift: {len(moved)} control series (code this project does not build) moved: {named}. "
        f"The machine's state differed between the two runs, or the harness changed; {own} series of the "
        f"same cases are judged against at least that change."
    )


def title(report: Report) -> str:
    return f"tierbench compare {report.base.label} → {report.head.label} on {report.head.machine}"


def markdown(report: Report) -> str:
    lines = [f"### {title(report)}", ""]
    verdict = "**Performance regression**" if report.regressions else "No confirmed regression"
    lines += [f"{verdict}: {summary(report)}.", ""]
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
    verdict = "Performance regression" if report.regressions else "No confirmed regression"
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
<p class="note">base {esc(report.base.commit)} ({esc(report.base.env)}), head {esc(report.head.commit)}
({esc(report.head.env)})</p>
<table><thead><tr>{head}</tr></thead><tbody>
{chr(10).join(body)}
</tbody></table></body></html>
"""
