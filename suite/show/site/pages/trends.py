"""The history pages: an index of asv's benchmarks and a page per benchmark, its steps over commits with the
comparison's verdict at each."""

from __future__ import annotations

import time
from typing import Any

from markupsafe import Markup

from ....text import isolate
from .. import charts, history, model
from ..runs import slug
from .templates import render

# Per benchmark page: charts of this many parameter combinations over this many newest commits, and this
# many newest steps, keep a page light with hundreds of cases and a year of nightlies; asv's site has the rest.
MAX_HISTORY_CHARTS = 16
MAX_HISTORY_COMMITS = 200
MAX_STEPS_LISTED = 100


def _scale(bench: history.Benchmark) -> tuple[float, str]:
    """asv times are in seconds: shown in ms or µs when that reads better."""
    values = [v for s in bench.series for _, v in s.points]
    if bench.unit == "seconds" and values:
        typical = sorted(values)[len(values) // 2]
        if typical < 1e-3:
            return 1e6, "µs"
        if typical < 1:
            return 1e3, "ms"
        return 1.0, "s"
    return 1.0, bench.unit or "value"


def _date(ms: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000)) if ms else ""


def _step_css(bench: history.Benchmark, step: history.Step) -> str:
    better = bench.lower_is_better
    if better is None:
        return ""
    worse = step.after > step.before if better else step.after < step.before
    return "up" if worse else "down"


def _params_text(series: history.Series) -> str:
    return ", ".join(f"{k}={v}" for k, v in series.params.items()) or "(no parameters)"


def trend_pages(
    benches: list[history.Benchmark],
    asv_site: bool,
    asv_dir: str,
    verdicts: dict[tuple[str, str], history.SeriesVerdict] | None = None,
) -> tuple[str, dict[str, str], list[dict[str, Any]]]:
    """The history index, one page per benchmark (file name -> HTML), and the index's rows; each step with the
    comparison's verdict on that series at that commit, where one was made."""
    commits = sorted({c for b in benches for s in b.series for c, _ in s.points}, key=lambda c: (c.date, c.hash))
    position = {c: i for i, c in enumerate(commits)}
    pages: dict[str, str] = {}
    rows = []
    used_names: set[str] = set()
    for bench in benches:
        name = slug(bench.name)
        while name in used_names:
            name += "-x"
        used_names.add(name)
        html, latest = _trend_page(bench, position, asv_site, verdicts or {})
        pages[f"{name}.html"] = html
        rows.append(
            {
                "bench": bench,
                "href": f"{name}.html",
                "asv": history.asv_url(bench),
                "latest": latest,
                "commits": len({c for s in bench.series for c, _ in s.points}),
            }
        )
    index = render(
        "trends.html.j2",
        title="History over commits (asv)",
        root="../",
        benchmarks=rows,
        asv_site=asv_site,
        asv_dir=asv_dir,
        threshold=f"{100 * history.STEP_THRESHOLD:.0f}%",
    )
    return index, pages, rows


def _trend_page(
    bench: history.Benchmark,
    position: dict[history.Commit, int],
    asv_site: bool,
    verdicts: dict[tuple[str, str], history.SeriesVerdict],
) -> tuple[str, dict[str, str] | None]:
    scale, unit = _scale(bench)
    styles = model.styles_for(sorted({s.machine for s in bench.series}))
    hovers = charts.CommitHovers(unit)
    combos: dict[str, list[history.Series]] = {}
    for s in bench.series:
        combos.setdefault(_params_text(s), []).append(s)
    steps = []
    for params, group in combos.items():
        for s in group:
            for step in s.steps:
                c = s.points[step.index][0]
                verdict = verdicts.get((history.series_key(bench, s), c.hash))
                steps.append(
                    {
                        "params": params,
                        "machine": s.machine,
                        "commit": c.short,
                        "date": _date(c.date),
                        "before": model.fmt(step.before * scale, 4),
                        "after": model.fmt(step.after * scale, 4),
                        "change": f"{100 * step.change:+.1f}%",
                        "css": _step_css(bench, step),
                        "asv": history.asv_url(bench, s),
                        "verdict": verdict.text if verdict else "no comparison at this commit",
                        "when": (c.date, c.hash),
                        "x": position[c],
                        "text": f"{100 * step.change:+.1f}% at {c.short} ({_date(c.date)}): "
                        f"{model.fmt(step.before * scale)} → {model.fmt(step.after * scale)} {unit} "
                        f"on {s.machine}",
                    }
                )
    steps.sort(key=lambda r: r["when"], reverse=True)
    # Combinations that stepped come first, the latest step first: those are the ones to look at.
    last_step = {}
    for row in reversed(steps):
        last_step[row["params"]] = row["when"]
    order = sorted(combos, key=lambda p: (p not in last_step, [-x for x in last_step.get(p, (0,))[:1]]))
    newest = max(position.values(), default=0)
    chart_html = []
    for params in order[:MAX_HISTORY_CHARTS]:
        lines: dict[str, list[model.Point]] = {}
        ticks: dict[int, str] = {}
        for s in combos[params]:
            shown = [(c, v) for c, v in s.points if position[c] > newest - MAX_HISTORY_COMMITS]
            if not shown:
                continue
            lines[s.machine] = [
                model.Point(position[c], v * scale, (s.machine, c.short, _date(c.date), v * scale)) for c, v in shown
            ]
            ticks[position[shown[0][0]]] = shown[0][0].short
            ticks[position[shown[-1][0]]] = shown[-1][0].short
        marks = [(r["x"], r["text"]) for r in steps if r["params"] == params and r["x"] > newest - MAX_HISTORY_COMMITS]
        chart_html.append(Markup(charts.history_chart(lines, styles, hovers, params, unit, ticks, marks)))
    latest = None
    if steps:
        latest = {
            "text": f"{steps[0]['change']} at {steps[0]['commit']} ({steps[0]['params']})",
            "css": steps[0]["css"],
        }
    html = render(
        "trend.html.j2",
        title=Markup("{}").format(isolate(bench.name)),
        root="../",
        bench=bench,
        unit=unit,
        lower=bench.lower_is_better,
        styles=styles,
        charts=chart_html,
        hidden=max(0, len(combos) - MAX_HISTORY_CHARTS),
        window=MAX_HISTORY_COMMITS,
        clipped=newest >= MAX_HISTORY_COMMITS,
        steps=steps[:MAX_STEPS_LISTED],
        more_steps=max(0, len(steps) - MAX_STEPS_LISTED),
        asv=history.asv_url(bench),
        asv_site=asv_site,
        defs=Markup(charts.marker_defs(styles)),
        page_css=Markup(charts.marker_css(styles)),
        hovers=Markup(charts.hover_script(hovers)),
    )
    return html, latest
