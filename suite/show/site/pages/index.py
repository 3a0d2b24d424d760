"""The index page: per device and family, each tier's fastest correct provider per case, and the history's
latest steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from .... import tiers as tier_records
from ....ceilings import sol_text
from ....store.records import Measurement
from ...presentation import Presentation, View
from .. import model
from ..kernel_age import PROVIDER
from ..model import DeviceView, Row
from .family import family_href
from .meta import ceilings_meta, commit_text
from .templates import bdi, render, tier_class, tier_css


@dataclass
class FamilySummary:
    name: str
    href: str  # from the site's root
    view: View
    tiers: list[str]
    matrix: dict[str, list[Row]]
    numbers: dict[tuple[str, str], int]  # (case_id, provider) -> footnote on the family page
    stand_ins: frozenset[tuple[str, str]] = frozenset()  # cells of an earlier run than their case's say so
    older_kernels: dict[str, str] = field(default_factory=dict)  # run id -> how the Triton kernels changed since

    @property
    def unit(self) -> str:
        return self.view.unit

    @property
    def x_label(self) -> str:
        return self.view.x


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
    if r.provider == PROVIDER and r.run_id in f.older_kernels:
        since = f.older_kernels[r.run_id]
        after = Markup(after) + Markup('<small class="stale" title="{}">kernels changed since</small>').format(since)
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


def _device_meta(view: DeviceView) -> list[tuple[str, str]]:
    env = view.env
    meta: list[tuple[str, str]] = [("device", view.device.name)]
    meta.append(ceilings_meta(view.ceilings))
    soft = [(k, env.get(k)) for k in ("torch", "triton", "cuda", "cudnn", "driver", "python")]
    meta.append(("software", ", ".join(f"{k} {v}" for k, v in soft if v)))
    versions = view.provider_versions()
    if versions:
        meta.append(("providers", ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))))
    # Every commit the merged runs measured, newest run first: one commit alone would speak for all of them.
    commits = list(dict.fromkeys(commit_text(run.env) for run in view.runs if run.env.get("git_commit")))
    if commits:
        meta.append(("commit" if len(commits) == 1 else "commits", ", ".join(commits)))
    return meta


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
        view.older_kernels,
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
    return render(
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
