"""HTML of the site's pages, from the views of model.py and history.py.

Templates (assets/*.html.j2) autoescape everything they are given, so a reason, a provider or a case
name from the records renders as text whatever it holds; the few fragments built here in Python (chart
SVG, matrix cells) escape their own strings and are then marked safe. Bidirectional controls in any of
them are written as escapes (every template value passes through text.unbidi), and names from the
records are shown in <bdi>, so a right-to-left name cannot reorder the text around it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from .. import fusion, units
from .. import tiers as tier_records
from ..ceilings import Limits, sol_text
from ..panels import CostPanel, ModelPanel, TradePanel
from ..presentation import Presentation, View
from ..reading import timed
from ..records import Measurement
from ..summary import by_case, rank
from ..text import isolate, unbidi
from . import blocks, charts, history, model, trade
from .charts import Axis
from .cost import cost_rows
from .model import DeviceView, Row, Style
from .runs import Run, slug

ASSETS = Path(__file__).parent / "assets"
# Per benchmark page: charts of this many parameter combinations over this many newest commits, and this
# many newest steps, keep a page light with hundreds of cases and a year of nightlies; asv's site has the rest.
MAX_HISTORY_CHARTS = 16
MAX_HISTORY_COMMITS = 200
MAX_STEPS_LISTED = 100


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(ASSETS),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_no_bidi_controls,
    )
    env.filters["bdi"] = bdi
    env.filters["text"] = text
    builtin = Presentation()
    env.globals.update(
        css=Markup(
            (ASSETS / "site.css").read_text()
            + tier_css(builtin, [])
            + ".t-other{border-left:5px solid #999;background:#eee}"
        ),
        js=Markup((ASSETS / "site.js").read_text()),
        tier_class=tier_class,
        icon=lambda style: Markup(charts.marker_icon(style)),
        quantity=units.quantity,
        sol_text=sol_text,
    )
    return env


def _no_bidi_controls(value: Any) -> Any:
    """Every value a template writes (text and attributes alike): its bidirectional controls as escapes."""
    return unbidi(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def bdi(text: Any) -> Markup:
    """Untrusted text as an isolated, escaped HTML fragment."""
    return Markup("<bdi>%s</bdi>") % unbidi(str(text))


def text(value: Any) -> Markup:
    """Prose for an element's content (never an attribute's): its bidirectional controls as escapes and `&`,
    `<` and `>` escaped; quotes, which mean nothing there, stay as written (a view's panel note)."""
    escaped = unbidi(str(value)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return Markup(escaped)


def _tint(color: str, amount: float = 0.28) -> str:
    """color mixed with white: a cell background light enough to read black text on."""
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(255 - (255 - c) * amount):02x}" for c in rgb)


def tier_css(shown: Presentation, names: list[str]) -> str:
    """A class per tier (index cells are colored by tier): the built-in ones, or those of `names` that are
    not built in; colors are checked hex values."""
    known = [n for n in names if n not in tier_records.BUILTIN] if names else list(tier_records.BUILTIN)
    return "".join(
        f".t-{slug(t)}{{border-left:5px solid {c};background:{_tint(c)}}}" for t in known for c in [shown.tier_color(t)]
    )


def tier_class(tier: str) -> str:
    return f"t-{slug(tier)}"


def _render(template: str, **context: Any) -> str:
    context.setdefault("root", "")
    return _env().get_template(template).render(**context)


# -- index -------------------------------------------------------------------------------------------


@dataclass
class FamilySummary:
    name: str
    href: str  # from the site's root
    view: View
    tiers: list[str]
    matrix: dict[str, list[Row]]
    numbers: dict[tuple[str, str], int]  # (case_id, provider) -> footnote on the family page
    stand_ins: frozenset[tuple[str, str]] = frozenset()  # cells of an earlier run than their case's say so

    @property
    def unit(self) -> str:
        return self.view.unit

    @property
    def x_label(self) -> str:
        return self.view.x


def family_href(view: DeviceView, family: str) -> str:
    return f"devices/{view.device.key}/{slug(family)}.html"


def _refs(records: list[Measurement], f: FamilySummary, label: str | None = None) -> Markup:
    """Footnotes to the family page's list of what was not timed, each under its status (or `label`), worst
    first: `incorrect [3] · skipped [1]`."""
    numbers: dict[str, list[int]] = {}
    for r in sorted(records, key=lambda r: model.status_rank(r.status)):
        status = label or r.status
        if r.key in f.numbers and f.numbers[r.key] not in numbers.get(status, []):
            numbers.setdefault(status, []).append(f.numbers[r.key])
    return Markup(" · ").join(
        Markup("{} {}").format(
            bdi(status), Markup(" ").join(Markup('<a href="{}#p{}">[{}]</a>').format(f.href, n, n) for n in found)
        )
        for status, found in numbers.items()
    )


def _cell(row: Row, tier: str, f: FamilySummary) -> Markup:
    """A tier's verdict on a case: its fastest correct provider; where none was timed, its providers checked
    correct but not timed here; where none was correct, what happened to each (worst first)."""
    cell = row.cells.get(tier)
    if cell is None:
        return Markup('<td class="na">–</td>')
    failures = [r for r in cell.problems if r.status != "skipped"]
    also = _refs(failures, f)
    if cell.best is None:
        correct = [r for r in cell.problems if model.checked_not_timed(r)]
        if correct:
            names = Markup(", ").join(bdi(r.provider) for r in sorted(correct, key=lambda r: r.provider))
            note = _refs(correct, f, label="correct, not timed")
            return Markup(f'<td class="na">{names}<small>{note}</small>{_also(also)}</td>')
        refs = _refs(cell.problems, f) or bdi(cell.status())
        css = "na" if cell.status() in ("skipped", "absent") else "na bad"
        return Markup(f'<td class="{css}">{refs}</td>')
    r = cell.best
    value = model.metric_of(r, f.view)
    shown = model.fmt_rate(value, f.unit) if value else f"{model.fmt(r.median_ms)} ms"
    # the newest run skipped this provider: its last measurement, which names its run
    after = Markup("<small>measured in run {}</small>").format(bdi(r.run_id)) if r.key in f.stand_ins else ""
    after = Markup(after) + _also(also)
    if row.winner == tier and not row.decided:
        names = ", ".join(sorted({str(bdi(u.provider)) for u in row.untimed}))
        note = f"fastest timed; no winner: {names} correct under today's bounds but never timed (re-measure)"
        return Markup(f"<td>{bdi(r.provider)} {shown}<small>{note}</small>{after}</td>")
    if row.winner == tier:
        note = f"{row.margin:.2f}× over {bdi(row.runner_up or '')}" if row.margin else "the only tier timed"
        if r.sol is not None:
            note += f" · {_sol_words(r.sol, 2)}"
        return Markup(f'<td class="w {tier_class(tier)}">{bdi(r.provider)} {shown}<small>{note}</small>{after}</td>')
    return Markup(f"<td>{bdi(r.provider)} {shown}<small>{cell.relative:.2f}× the winner</small>{after}</td>")


def _also(refs: Markup) -> Markup:
    """The tier's other providers that failed, beside its verdict."""
    return Markup('<small class="bad">also {}</small>').format(refs) if refs else Markup("")


def _sol_words(sol: float, digits: int = 3) -> str:
    """'97% SOL', or that the figure is above its ceiling (never a percentage over 100)."""
    text = sol_text(sol, digits)
    return f"SOL {text}" if sol > 1.0 else f"{text} SOL"


def _commit_text(env: dict[str, Any], digits: int = 12) -> str:
    """The commit a record names, and whether its files were that commit's (older records do not say)."""
    text = str(env["git_commit"])[:digits]
    return f"{text} (with uncommitted changes)" if env.get("tierbench_modified") else text


def _device_meta(view: DeviceView) -> list[tuple[str, str]]:
    env = view.env
    meta: list[tuple[str, str]] = [("device", view.device.name)]
    meta.append(_ceilings_meta(view.ceilings))
    soft = [(k, env.get(k)) for k in ("torch", "triton", "cuda", "cudnn", "driver", "python")]
    meta.append(("software", ", ".join(f"{k} {v}" for k, v in soft if v)))
    versions = view.provider_versions()
    if versions:
        meta.append(("providers", ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))))
    if env.get("git_commit"):
        meta.append(("commit", _commit_text(env)))
    return meta


def _ceilings_meta(c: Limits | None) -> tuple[str, str]:
    """The ceilings SOL is read against, each with what set it: measured, or a checked measurement above it."""
    if c is None:
        return ("ceilings", "none measured for this device: SOL figures are the records' own")
    return ("ceilings", "; ".join(c.lines()))


def family_summary(view: DeviceView, family: str, records: list[Measurement]) -> FamilySummary:
    v = view.view(family)
    tiers = view.shown.tier_names(records)
    _, numbers = model.problems(records, v, view.shown)
    return FamilySummary(
        family,
        family_href(view, family),
        v,
        tiers,
        model.matrix(records, v, tiers),
        numbers,
        view.stand_ins,
    )


def index_page(views: list[DeviceView], asv_site: bool, runs_dir: str, trends: list[dict[str, Any]]) -> str:
    devices = []
    tiers: set[str] = set()
    shown = Presentation()
    for view in views:
        families = [family_summary(view, fam, recs) for fam, recs in view.families().items()]
        for f in families:
            tiers.update(f.tiers)
        devices.append({"view": view, "meta": _device_meta(view), "families": families})
        shown.tiers.update(view.shown.tiers)
    ordered = sorted(tiers, key=shown.tier_rank)
    # The legend is the whole ladder: every built-in tier in ladder order (one no record measured yet says
    # so), then the other tiers the records name.
    rungs = {name for name, t in tier_records.BUILTIN.items() if t.rung}
    ladder = sorted(tiers | rungs, key=shown.tier_rank)
    return _render(
        "index.html.j2",
        title="tierbench: fastest correct kernel per tier",
        page_css=Markup(tier_css(shown, ordered)),
        devices=devices,
        tiers=ordered,
        ladder=ladder,
        cell=_cell,
        asv_site=asv_site,
        runs_dir=runs_dir,
        trends=trends,
    )


# -- family pages ------------------------------------------------------------------------------------


@dataclass
class FamilyCharts:
    """A family's charts on one page: per chart group throughput (GB/s against the copy ceiling, with its share
    of it on a second axis), speedup and memory; the roofline; what was not timed; the legend's styles and
    the page's hover table."""

    groups: list[dict[str, Any]]
    roofline: Markup
    problems: list[model.Problem]
    styles: dict[str, Style]
    hovers: model.RecordHovers
    joined: list[str] = field(default_factory=list)  # families whose points share the roofline


Partners = list[tuple[View, list[Measurement]]]


def roofline_partners(families: dict[str, list[Measurement]], family: str, v: View, shown: Presentation) -> Partners:
    """The families whose points join this family's roofline (its view's roofline_with), with their views."""
    return [(shown.view(f, families[f]), families[f]) for f in v.roofline_with if f != family and families.get(f)]


def family_charts(
    records: list[Measurement],
    family: str,
    v: View,
    shown: Presentation,
    styles: dict[str, Style],
    ceilings: Limits | None,
    stand_ins: frozenset[tuple[str, str]] = frozenset(),
    hovers: model.RecordHovers | None = None,
    partners: Partners | None = None,
) -> FamilyCharts:
    x_axis = Axis(v.x, log=True, at_data=True)
    partners = partners or []
    roof_records = records + [r for _, recs in partners for r in recs]
    # The legend names providers with marks; the others are in the list of what was not timed.
    used = {r.provider for r in roof_records if timed(r)}
    drawn = {k: s for k, s in styles.items() if k in used}
    table = model.describe(records, v, shown, stand_ins, hovers)
    for partner_view, recs in partners:
        model.describe(recs, partner_view, shown, stand_ins, table)
    c = ceilings
    # A bandwidth-bound family's throughput is read against the copy ceiling: drawn in, and its share of it
    # (the speed of light) on the right-hand axis.
    copy_gbps = c.copy_gbps if c and v.metric == "gbps" else None
    groups = []
    for key, recs in model.by_group(records, v).items():
        speed, base = model.speedup_points(recs, shown)
        # Rates in the prefix that reads best (GFLOP/s on a CPU, TB/s past 1000 GB/s), the ceiling with them.
        rates, unit, factor = charts.readable_rate(
            model.throughput_points(recs, v), v.unit, [copy_gbps] if copy_gbps else []
        )
        copy = copy_gbps * factor if copy_gbps else None
        memory, memory_unit = charts.readable_memory(model.memory_points(recs))
        groups.append(
            {
                "key": key,
                "throughput": Markup(
                    charts.line_chart(
                        rates,
                        drawn,
                        table,
                        f"achieved {unit}",
                        x_axis,
                        Axis(unit),
                        ref=(copy, f"copy ceiling {units.quantity(copy_gbps, 'GB/s')}") if copy else None,
                        share_of=(copy, "SOL (% of copy)") if copy else None,
                    )
                ),
                "speedup": Markup(
                    charts.line_chart(
                        speed,
                        drawn,
                        table,
                        f"speedup over {base}",
                        x_axis,
                        Axis("speedup (×)"),
                        ref=(1.0, f"1× = {base}"),
                    )
                    if base
                    else '<p class="empty">speedup: no baseline timed.</p>'
                ),
                "memory": Markup(
                    charts.line_chart(memory, drawn, table, "peak device memory", x_axis, Axis(memory_unit))
                    if memory
                    else Markup('<p class="empty">peak device memory: {}.</p>').format(model.why_no_memory(recs))
                ),
            }
        )
    dtypes = {str(r.case.get("dtype")) for r in roof_records}
    peaks = {k: t for k, t in (c.matmul_tflops.items() if c else ()) if k in dtypes} or (
        dict(c.matmul_tflops) if c else {}
    )
    joined = [recs[0].family for _, recs in partners]
    title = f"{' and '.join([family, *joined])}: {'one ' if joined else ''}roofline"
    roof = charts.roofline(model.roofline_points(roof_records), drawn, table, title, c.copy_gbps if c else None, peaks)
    problems, _ = model.problems(records, v, shown)
    return FamilyCharts(groups, Markup(roof), problems, drawn, table, joined)


def styled_records(view: DeviceView, family: str, records: list[Measurement]) -> list[Measurement]:
    """The records a family page draws: its own and those of the families sharing its roofline."""
    partners = roofline_partners(view.families(), family, view.view(family), view.shown)
    return records + [r for _, recs in partners for r in recs]


def _trade_panels(records: list[Measurement], v: View, fc: FamilyCharts) -> list[trade.Panel]:
    """The trade panels the family's view declares, of these records, their charts ready for the template."""
    out = []
    for spec in v.has(TradePanel):
        panel = trade.panel(records, spec, fc.styles, fc.hovers)
        for mode in panel.modes if panel else []:
            mode["charts"] = [Markup(c) for c in mode["charts"]]
        if panel is not None:
            out.append(panel)
    return out


def _cost_tables(records: list[Measurement], v: View, shown: Presentation) -> list[dict[str, Any]]:
    """The cost tables the family's view declares, each with its rows and the tiers they name."""
    out = []
    for spec in v.has(CostPanel):
        rows = cost_rows(records, spec)
        if rows:
            tiers = shown.tier_names(c.case for row in rows for c in row.costs.values())
            out.append({"spec": spec, "rows": rows, "tiers": tiers})
    return out


def family_page(
    view: DeviceView, family: str, records: list[Measurement], styles: dict[str, Style], asv_site: bool
) -> str:
    v = view.view(family)
    partners = roofline_partners(view.families(), family, v, view.shown)
    hovers = model.RecordHovers(v.unit, view.stand_ins, name_runs=len(view.runs) > 1)
    fc = family_charts(
        records, family, v, view.shown, styles, view.ceilings, view.stand_ins, hovers=hovers, partners=partners
    )
    siblings = [(f, f"{slug(f)}.html") for f in view.families() if f != family]
    # The panels the family's view declares, by kind; `model`: its models' pages (written by model_pages).
    models = blocks.sections(view.records, view.shown, view.ceilings) if v.has(ModelPanel) else []
    return _render(
        "family.html.j2",
        title=Markup("{} on {}").format(isolate(family), isolate(view.device.name)),
        root="../../",
        device=view.device,
        runs=view.runs,
        siblings=siblings,
        styles=fc.styles,
        tiers_of={r.provider: r.tier for r in records},
        ceilings=view.ceilings,
        roofline=fc.roofline,
        joined=fc.joined,
        family=family,
        groups=fc.groups,
        problems=fc.problems,
        costs=_cost_tables(records, v, view.shown),
        launches=fusion.launch_rows(records, view.shown),
        fusion=fusion.fusion_lines(records, view.shown),
        trades=_trade_panels(records, v, fc),
        models=models,
        defs=Markup(charts.marker_defs(fc.styles)),
        page_css=Markup(charts.marker_css(fc.styles)),
        hovers=Markup(charts.hover_script(fc.hovers)),
        asv_site=asv_site,
    )


def model_pages(view: DeviceView, family: str, asv_site: bool) -> dict[str, str]:
    """A page per model of a family whose view has the `model` panel: file name (beside the family's page)
    -> HTML."""
    if not view.view(family).has(ModelPanel):
        return {}
    found = blocks.sections(view.records, view.shown, view.ceilings)  # the parts are other families' records
    pages = {}
    for section in found:
        others = [(s.name, s.href) for s in found if s is not section]
        pages[section.href] = _render(
            "model.html.j2",
            title=Markup("{} on {}").format(isolate(section.name), isolate(view.device.name)),
            root="../../",
            device=view.device,
            runs=view.runs,
            family_href=f"{slug(family)}.html",
            others=others,
            section=section,
            fmt=model.fmt,
            hovers=Markup(charts.hover_script(section.hovers)),
            asv_site=asv_site,
        )
    return pages


# -- one run's report ----------------------------------------------------------------------------------


def _run_meta(run: Run, ceilings: Limits | None) -> list[tuple[str, str]]:
    env = run.env
    meta = [("run", run.run_id), ("suite", run.suite or "–"), ("device", run.device.name)]
    if run.shards:
        meta.append(("sweep of", f"{len(run.shards)} shard runs: {', '.join(run.shards)}"))
    meta += [(k, str(env[k])) for k in ("driver", "cuda", "torch", "triton") if env.get(k)]
    if env.get("git_commit"):
        meta.append(("git_commit", _commit_text(env, 40)))
    meta.append(_ceilings_meta(ceilings))
    if run.meta is not None:
        done = f"{run.meta.done} of {run.meta.planned} planned (complete)"
        meta.append(("measurements", done if run.complete else run.completeness))
    return meta


def _run_rows(records: list[Measurement], shown: Presentation) -> list[dict[str, Any]]:
    rows = []
    for _, group in by_case(records).items():
        ranked, rest = rank(group, shown)
        for item in [*ranked, *rest]:
            r = item.record if hasattr(item, "record") else item
            q = r.quantiles_ms or {}
            rows.append(
                {
                    "r": r,
                    "spread": f"{model.fmt(q.get('p10'), 4)}–{model.fmt(q.get('p90'), 4)}" if q else "",
                    "speedup": f"{item.speedup:.2f}×" if getattr(item, "speedup", None) else "",
                    "mem": model.fmt(r.peak_mem_bytes / 2**20, 4) if r.peak_mem_bytes is not None else "",
                    "traffic": f"{ratio:.3g}×" if (ratio := fusion.traffic_ratio(r)) is not None else "",
                }
            )
    return rows


def run_page(run: Run, ceilings: Limits | None, shown: Presentation, standalone: bool = False) -> str:
    """One run on one page: per family its charts and every record in a table, ranked per case."""
    records = run.records
    styles = model.provider_styles(records, shown)
    hovers = model.RecordHovers("")
    families = []
    by_family: dict[str, list[Measurement]] = {}
    for r in records:
        by_family.setdefault(r.family, []).append(r)
    for family, recs in by_family.items():
        v = shown.view(family, recs)
        partners = roofline_partners(by_family, family, v, shown)
        fc = family_charts(recs, family, v, shown, styles, ceilings, hovers=hovers, partners=partners)
        families.append(
            {
                "name": family,
                "view": v,
                "charts": fc,
                "rows": _run_rows(recs, shown),
                "fusion": fusion.fusion_lines(recs, shown),
                "trades": _trade_panels(recs, v, fc),
                "models": blocks.sections(records, shown, ceilings, hovers) if v.has(ModelPanel) else [],
            }
        )
    return _render(
        "run.html.j2",
        title=Markup("run {}").format(isolate(run.run_id)),
        root="../../",
        standalone=standalone,
        meta=_run_meta(run, ceilings),
        families=families,
        styles=styles,
        fmt=model.fmt,
        defs=Markup(charts.marker_defs(styles)),
        page_css=Markup(charts.marker_css(styles)),
        hovers=Markup(charts.hover_script(hovers)),
        asv_site=False,
    )


# -- runs --------------------------------------------------------------------------------------------


def runs_page(runs: list[Run], shown: set[str], asv_site: bool) -> str:
    rows = [
        {
            "run": r,
            "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.started)),
            "counts": sorted(r.status_counts().items()),
            "commit": str(r.env.get("git_commit") or "")[:12],
            "shown": r.run_id in shown,
            "completeness": r.completeness,
        }
        for r in reversed(runs)
    ]
    return _render("runs.html.j2", title="All runs", runs=rows, asv_site=asv_site)


# -- history -----------------------------------------------------------------------------------------


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
    index = _render(
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
    html = _render(
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
