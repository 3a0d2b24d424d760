"""A page per model, beside the page of a family whose view has the `model` panel."""

from __future__ import annotations

from markupsafe import Markup

from ....text import isolate
from ...panels import ModelPanel
from .. import blocks, charts, model
from ..model import DeviceView
from ..runs import slug
from .templates import render


def model_pages(view: DeviceView, family: str, asv_site: bool) -> dict[str, str]:
    """A page per model of a family whose view has the `model` panel: file name (beside the family's page)
    -> HTML."""
    if not view.view(family).has(ModelPanel):
        return {}
    found = blocks.sections(view.records, view.shown, view.ceilings)  # the parts are other families' records
    pages = {}
    for section in found:
        others = [(s.name, s.href) for s in found if s is not section]
        pages[section.href] = render(
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
