"""Writes the whole site: index, per-device family pages, runs and their reports, history.

Every page is written to a temporary file beside it and renamed into place, so a reader (or a web server)
never sees half a page. Nothing is ever deleted, and nothing is written under <out>/history/, which is
asv's own published site.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from ... import ceilings
from ...ceilings import Limits, load_for_run
from ...measure import provenance
from ..presentation import Presentation
from . import history, model, runs
from .kernel_age import KernelHistory
from .pages.family import family_href, family_page
from .pages.family_charts import styled_records
from .pages.index import index_page
from .pages.models import model_pages
from .pages.run_list import runs_page
from .pages.run_report import run_page
from .pages.trends import trend_pages

ASV_SITE = "history"


@dataclass
class SiteResult:
    out: Path
    written: list[Path] = field(default_factory=list)
    devices: list[model.DeviceView] = field(default_factory=list)
    benchmarks: int = 0

    @property
    def index(self) -> Path:
        return self.out / "index.html"


def write_atomic(path: Path, data: str | bytes, out: Path) -> Path:
    """Write by rename; refuses anything inside asv's site."""
    if (out / ASV_SITE) in path.parents:
        raise ValueError(f"refusing to write {path}: {out / ASV_SITE} belongs to asv")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    tmp.replace(path)
    return path


def measured_ceilings(run: runs.Run, ceilings_dir: Path) -> list[ceilings.Ceilings]:
    """The ceilings a run measured (each shard's, for a sweep), else the ceilings folder's for its device."""
    folders = [run.path.parent / member for member in run.members] if run.shards else [run.path]
    found = [c for folder in folders if (c := load_for_run(folder)) is not None]
    if not found and (c := runs.find_ceilings(ceilings_dir, run.env)) is not None:
        found.append(c)
    return found


def read_ceilings(every: list[runs.Run], ceilings_dir: Path) -> dict[str, Limits | None]:
    """Each device's ceilings as the site states them, raised by what these runs sustained (see
    ceilings.Limits); the runs' records get their SOL re-read against them, so every page agrees."""
    found = ceilings.limits_per_device((measured_ceilings(run, ceilings_dir), run.records) for run in every)
    for run in every:
        run.records = ceilings.with_sol(run.records, found)
    return found


def device_views(selected: list[runs.Run], explicit: bool, limits: dict[str, Limits | None]) -> list[model.DeviceView]:
    """One view per device, GPUs before CPUs: the runs named on the command line, or else its newest complete
    run of each case."""
    if explicit:
        per_device: dict[runs.Device, list[runs.Run]] = {}
        for run in selected:
            per_device.setdefault(run.device, []).append(run)
    else:
        per_device = runs.latest_per_device(selected)
    views = []
    for device, merged in per_device.items():
        # A provider the newest record skipped keeps its last measurement: from the runs named, or by
        # default from any of the device's runs.
        earlier = merged if explicit else [r for r in selected if r.device == device]
        records = runs.merge(merged, earlier)
        chosen = runs.newest_per_case(merged)
        own = {id(r) for run in merged for r in run.records if chosen[(device, r.case_id)] is run}
        borrowed = {id(r) for r in records if id(r) not in own}
        stand_ins = frozenset(r.key for r in records if id(r) in borrowed)
        newest = {id(run) for run in merged}
        shown = merged + [
            run for run in earlier if id(run) not in newest and any(id(r) in borrowed for r in run.records)
        ]
        newest_run = max(merged, key=lambda run: run.finished)
        found = limits.get(ceilings.device_key(newest_run.env))
        # Views, baselines and tiers from the runs' own run.json, the newest run's winning.
        presentation = Presentation.of(run.meta for run in sorted(shown, key=lambda r: r.finished))
        views.append(model.DeviceView(device, shown, records, found, stand_ins, presentation))
    # Accelerators first: a CPU's smoke run is a check that the suite runs, not the results one came for.
    return sorted(views, key=lambda view: view.is_cpu)


def _run_report(run: runs.Run, limits: Limits | None, standalone: bool) -> str:
    return run_page(run, limits, Presentation.of([run.meta]), standalone=standalone)


def write_run_report(run_dir: Path, ceilings_dir: Path | None = None) -> Path:
    """A run's own report.html, beside its records: the site's run page, without the site's navigation; its
    ceilings are raised by its own records alone (the site's by every run of the device)."""
    run_dir = Path(run_dir)
    run = runs.load_run(run_dir)
    target = run_dir / "report.html"
    if run is None:
        raise runs.SelectionError(f"{run_dir} holds no records")
    found = read_ceilings([run], ceilings_dir or run_dir.parent.parent / "ceilings")
    html = _run_report(run, found.get(ceilings.device_key(run.env)), standalone=True)
    tmp = target.with_name(f".report.html.{os.getpid()}.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(target)
    return target


def build(
    runs_dir: Path,
    out: Path,
    asv_dir: Path,
    ceilings_dir: Path,
    run_ids: list[str] | None = None,
    only: set[str] | None = None,
    kernels: KernelHistory | None = None,
) -> SiteResult:
    """Build the site (from the run folders named in `only`, where given); raises runs.SelectionError for
    unknown run ids, and for no runs unless asv has history to show (the nightly job publishes history
    before any run exists). The same records always build the same bytes in the same checkout: no page says
    when it was built, but each run says whether the Triton kernels changed since its commit (`kernels`: the
    history asked, by default that of the checkout tierbench runs from)."""
    every = runs.load_runs(runs_dir, only)
    kernels = kernels or KernelHistory(provenance.checkout_root())
    for run in every:
        age = kernels.age(run.env.get("git_commit"))
        run.kernels = replace(age, modified=True) if age and run.env.get("tierbench_modified") else age
    benches = history.read_asv(asv_dir)
    if every or run_ids or not benches:
        selected = runs.select_runs(every, run_ids, runs_dir)
    else:
        selected = []
    limits = read_ceilings(every, ceilings_dir)
    views = device_views(selected, bool(run_ids), limits)
    asv_site = (out / ASV_SITE / "index.html").is_file()
    result = SiteResult(out, devices=views, benchmarks=len(benches))
    w = result.written

    verdicts = history.read_verdicts(asv_dir.parent / "compare")
    trends_index, trend_files, trend_rows = trend_pages(benches, asv_site, str(asv_dir), verdicts)
    w.append(write_atomic(out / "index.html", index_page(views, asv_site, str(runs_dir), trend_rows), out))
    for view in views:
        for family, records in view.families().items():
            styles = model.provider_styles(styled_records(view, family, records), view.shown)
            html = family_page(view, family, records, styles, asv_site)
            w.append(write_atomic(out / family_href(view, family), html, out))
            for name, html in model_pages(view, family, asv_site).items():
                w.append(write_atomic((out / family_href(view, family)).with_name(name), html, out))
    shown = {r.run_id for v in views for r in v.runs}
    w.append(write_atomic(out / "runs.html", runs_page(every, shown, asv_site), out))
    for run in every:
        # Rendered from the records, never copied: a report.html placed in a run folder by hand is not the site's.
        html = _run_report(run, limits.get(ceilings.device_key(run.env)), standalone=False)
        w.append(write_atomic(out / "runs" / run.run_id / "report.html", html, out))

    w.append(write_atomic(out / "trends" / "index.html", trends_index, out))
    for name, html in trend_files.items():
        w.append(write_atomic(out / "trends" / name, html, out))
    return result
