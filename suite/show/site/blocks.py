"""The model view on the site: a page per model, and its sections in a run's report (the `model` panel).

From suite/show/blocks.py's views: per phase the parts' table (share of the eager block, fastest tier, what moving
only that part buys end to end), the ranked moves, a stacked chart of the block's time by part for each
strategy with the measured block drawn across its bar, the strategies' table (measured against the sum of
parts, peak memory) and whether compiling the whole block beats the best mix; per model one roofline with
the parts of prefill (compute-bound) beside those of decode (bandwidth-bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ...ceilings import Ceilings
from ...store.reading import timed
from ...store.records import Measurement
from .. import blocks
from ..presentation import Presentation
from . import charts, model
from .runs import slug

# A color per part of a chain (Okabe-Ito, then greys): parts keep their color across strategies and phases.
PART_COLORS = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#8C564B", "#999999", "#663399",
)  # fmt: skip


@dataclass
class ModelSection:
    """One model on a page: its phases' views, their charts, and the shared roofline."""

    name: str
    href: str
    phases: list[dict[str, Any]]
    roofline: Markup
    hovers: model.RecordHovers
    colors: dict[str, str]

    @property
    def legend(self) -> Markup:
        """The parts' colors as an HTML legend (escaped names)."""
        return Markup("").join(
            Markup('<span class="swatch" style="background:{}"></span><bdi>{}</bdi>').format(color, name)
            for name, color in self.colors.items()
        )

    @property
    def headline(self) -> list[tuple[str, str]]:
        return [(p["view"].phase, p["view"].headline) for p in self.phases]


def part_colors(views: list[blocks.BlockView]) -> dict[str, str]:
    names: list[str] = []
    for v in views:
        names += [p.name for p in v.parts if p.name not in names]
    return {name: PART_COLORS[i % len(PART_COLORS)] for i, name in enumerate(names)}


def _stacked(view: blocks.BlockView, colors: dict[str, str]) -> Markup:
    bars = []
    for row in view.strategies.values():
        segs = [(p.name, r.median_ms) for p in view.parts if timed(r := p.strategies[row.name])]
        bars.append((row.name, segs if not row.missing else [], row.measured_ms))
    title = f"{view.phase}: block time by part, per strategy"
    return Markup(charts.stacked_bars(bars, colors, title, "ms", width=520))


def _roofline(
    name: str, views: list[blocks.BlockView], shown: Presentation, ceilings: Ceilings | None, hovers: model.RecordHovers
) -> Markup:
    """Each part's fastest record, prefill's and decode's on one roofline (a series per phase)."""
    series: dict[str, list[model.Point]] = {}
    for v in views:
        if v.phase not in blocks.ROOFLINE_PHASES:
            continue
        for p in v.parts:
            r = p.fastest
            if r is None or not r.flops or not r.min_bytes:
                continue
            if r.key not in hovers.by_key:
                hovers.add_record(r, shown.view(r.family, [r]), None)
            tflops = r.flops / (r.median_ms * 1e-3) / 1e12
            series.setdefault(v.phase, []).append(model.Point(r.flops / r.min_bytes, tflops, r.key))
    # Marker ids of their own: a run's report defines the providers' markers on the same page.
    styles = {
        k: model.Style(s.color, s.marker, ROOFLINE_MARKERS + s.index) for k, s in model.styles_for(list(series)).items()
    }
    peaks = dict(ceilings.matmul_tflops) if ceilings else {}
    dtypes = {v.dtype for v in views}
    peaks = {k: t for k, t in peaks.items() if k in dtypes} or peaks
    title = f"{name}: prefill beside decode, each part at its fastest provider"
    svg = charts.roofline(series, styles, hovers, title, ceilings.copy_gbps if ceilings else None, peaks)
    key = " ".join(f"{charts.marker_icon(style)} {phase}" for phase, style in styles.items())
    return Markup(
        charts.marker_defs(styles) + f"<style>{charts.marker_css(styles)}</style>" + svg + f'<p class="muted">{key}</p>'
    )


ROOFLINE_MARKERS = 900


def model_href(name: str) -> str:
    return f"model-{slug(name)}.html"


def sections(
    records: list[Measurement], shown: Presentation, ceilings: Ceilings | None, hovers: model.RecordHovers | None = None
) -> list[ModelSection]:
    """Every model of these records (run.json's compositions name their parts), in first-seen order."""
    found = blocks.views(records, shown)
    colors = part_colors(found)
    out = []
    for name, views in blocks.by_model(found).items():
        table = hovers if hovers is not None else model.RecordHovers("TFLOP/s")
        phases = [{"view": v, "stacked": _stacked(v, colors), "compile_vs_mix": v.compile_vs_mix()} for v in views]
        roof = _roofline(name, views, shown, ceilings, table)
        out.append(ModelSection(name, model_href(name), phases, roof, table, colors))
    return out
