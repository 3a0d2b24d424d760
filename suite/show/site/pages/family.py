"""A family's page on one device: its charts, what was not timed, and the panels its view declares."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ....store.records import Measurement
from ....text import isolate
from ... import fusion
from ...panels import CostPanel, ModelPanel
from ...presentation import Presentation, View
from .. import blocks, charts, model
from ..cost import cost_rows
from ..model import DeviceView, Style
from ..runs import slug
from .family_charts import family_charts, roofline_partners, trade_panels
from .templates import render


def family_href(view: DeviceView, family: str) -> str:
    return f"devices/{view.device.key}/{slug(family)}.html"


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
    hovers = model.RecordHovers(v.unit, view.stand_ins, name_runs=len(view.runs) > 1, older_kernels=view.older_kernels)
    fc = family_charts(
        records, family, v, view.shown, styles, view.ceilings, view.stand_ins, hovers=hovers, partners=partners
    )
    siblings = [(f, f"{slug(f)}.html") for f in view.families() if f != family]
    # The panels the family's view declares, by kind; `model`: its models' pages (written by model_pages).
    models = blocks.sections(view.records, view.shown, view.ceilings) if v.has(ModelPanel) else []
    return render(
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
        trades=trade_panels(records, v, fc),
        models=models,
        defs=Markup(charts.marker_defs(fc.styles)),
        page_css=Markup(charts.marker_css(fc.styles)),
        hovers=Markup(charts.hover_script(fc.hovers)),
        asv_site=asv_site,
    )
