"""A family's charts, shared by its page and by a run's report: per chart group throughput, speedup and
memory; the roofline (with the families that share it); the trade panels its view declares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from .... import units
from ....ceilings import Limits
from ....store.reading import timed
from ....store.records import Measurement
from ...panels import TradePanel
from ...presentation import Presentation, View
from .. import charts, model, trade
from ..charts import Axis
from ..model import DeviceView, Style


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


def trade_panels(records: list[Measurement], v: View, fc: FamilyCharts) -> list[trade.Panel]:
    """The trade panels the family's view declares, of these records, their charts ready for the template."""
    out = []
    for spec in v.has(TradePanel):
        panel = trade.panel(records, spec, fc.styles, fc.hovers)
        for mode in panel.modes if panel else []:
            mode["charts"] = [Markup(c) for c in mode["charts"]]
        if panel is not None:
            out.append(panel)
    return out
