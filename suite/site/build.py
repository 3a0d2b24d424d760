"""Writes the whole site: index, per-device family pages, runs and their reports, history.

Every page is written to a temporary file beside it and renamed into place, so a reader (or a web server)
never sees half a page. Nothing is ever deleted, and nothing is written under <out>/history/, which is
asv's own published site.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..ceilings import load_for_run
from ..presentation import Presentation
from . import history, model, pages, runs

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


def device_views(selected: list[runs.Run], explicit: bool, ceilings_dir: Path) -> list[model.DeviceView]:
    """One view per device: the runs named on the command line, or else its newest run of each suite."""
    if explicit:
        per_device: dict[runs.Device, list[runs.Run]] = {}
        for run in selected:
            per_device.setdefault(run.device, []).append(run)
    else:
        per_device = runs.latest_per_device(selected)
    views = []
    for device, merged in per_device.items():
        # A provider the newest record skipped keeps its last measurement: from an older one of the runs
        # named, or by default from the device's other runs.
        newest = {id(run) for run in merged}
        earlier = merged if explicit else [r for r in selected if r.device == device and id(r) not in newest]
        records = runs.merge(merged, earlier)
        latest = {r.key: r for r in sorted((r for run in merged for r in run.records), key=lambda r: r.time)}
        stood_in = {id(r) for r in records if latest.get(r.key) is not r}
        stand_ins = [run for run in earlier if any(id(r) in stood_in for r in run.records)]
        newest_run = max(merged, key=lambda run: run.finished)
        found = load_for_run(newest_run.path) or runs.find_ceilings(ceilings_dir, newest_run.env)
        shown = merged + [run for run in stand_ins if id(run) not in newest]
        # Views, baselines and tiers from the runs' own run.json, the newest run's winning.
        presentation = Presentation.of(run.meta for run in sorted(shown, key=lambda r: r.finished))
        stood = frozenset(member for r in stand_ins for member in r.members)
        views.append(model.DeviceView(device, shown, records, found, stood, presentation))
    return views


def _run_report(run: runs.Run, ceilings_dir: Path, standalone: bool) -> str:
    ceilings = load_for_run(run.path) or runs.find_ceilings(ceilings_dir, run.env)
    return pages.run_page(run, ceilings, Presentation.of([run.meta]), standalone=standalone)


def write_run_report(run_dir: Path, ceilings_dir: Path | None = None) -> Path:
    """A run's own report.html, beside its records: the site's run page, without the site's navigation."""
    run_dir = Path(run_dir)
    run = runs.load_run(run_dir)
    target = run_dir / "report.html"
    if run is None:
        raise runs.SelectionError(f"{run_dir} holds no records")
    html = _run_report(run, ceilings_dir or run_dir.parent.parent / "ceilings", standalone=True)
    tmp = target.with_name(f".report.html.{os.getpid()}.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(target)
    return target


def build(runs_dir: Path, out: Path, asv_dir: Path, ceilings_dir: Path, run_ids: list[str] | None = None) -> SiteResult:
    """Build the site; raises runs.SelectionError for unknown run ids, and for no runs unless asv has
    history to show (the nightly job publishes history before any run exists)."""
    every = runs.load_runs(runs_dir)
    benches = history.read_asv(asv_dir)
    if every or run_ids or not benches:
        selected = runs.select_runs(every, run_ids, runs_dir)
    else:
        selected = []
    views = device_views(selected, bool(run_ids), ceilings_dir)
    asv_site = (out / ASV_SITE / "index.html").is_file()
    result = SiteResult(out, devices=views, benchmarks=len(benches))
    w = result.written

    verdicts = history.read_verdicts(asv_dir.parent / "compare")
    trends_index, trend_pages, trend_rows = pages.trend_pages(benches, asv_site, str(asv_dir), verdicts)
    w.append(write_atomic(out / "index.html", pages.index_page(views, asv_site, str(runs_dir), trend_rows), out))
    for view in views:
        for family, records in view.families().items():
            styles = model.provider_styles(pages.styled_records(view, family, records), view.shown)
            html = pages.family_page(view, family, records, styles, asv_site)
            w.append(write_atomic(out / pages.family_href(view, family), html, out))
    shown = {r.run_id for v in views for r in v.runs}
    w.append(write_atomic(out / "runs.html", pages.runs_page(every, shown, asv_site), out))
    for run in every:
        # Rendered from the records, never copied: a report.html placed in a run folder by hand is not the site's.
        html = _run_report(run, ceilings_dir, standalone=False)
        w.append(write_atomic(out / "runs" / run.run_id / "report.html", html, out))

    w.append(write_atomic(out / "trends" / "index.html", trends_index, out))
    for name, html in trend_pages.items():
        w.append(write_atomic(out / "trends" / name, html, out))
    return result
