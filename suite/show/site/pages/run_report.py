"""One run's report: per family its charts and every record, ranked per case (the site's run page, and the
report.html written beside a run's records)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ....ceilings import Limits
from ....store.records import Measurement
from ....text import isolate
from ... import fusion
from ...panels import ModelPanel
from ...presentation import Presentation
from ...summary import by_case, rank
from .. import blocks, charts, model
from ..runs import Run
from .family_charts import family_charts, roofline_partners, trade_panels
from .meta import ceilings_meta, commit_text
from .templates import render


def _run_meta(run: Run, ceilings: Limits | None) -> list[tuple[str, str]]:
    env = run.env
    meta = [("run", run.run_id), ("suite", run.suite or "–"), ("device", run.device.name)]
    if run.shards:
        meta.append(("sweep of", f"{len(run.shards)} shard runs: {', '.join(run.shards)}"))
    meta += [(k, str(env[k])) for k in ("driver", "cuda", "torch", "triton") if env.get(k)]
    if env.get("git_commit"):
        meta.append(("git_commit", commit_text(env, 40)))
    if run.kernels is not None:
        meta.append(("Triton kernels", run.kernels.words()))
    meta.append(ceilings_meta(ceilings))
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
                "trades": trade_panels(recs, v, fc),
                "models": blocks.sections(records, shown, ceilings, hovers) if v.has(ModelPanel) else [],
            }
        )
    return render(
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
