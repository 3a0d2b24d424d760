"""The page listing every run, newest first, and which of them the index shows."""

from __future__ import annotations

import time

from ..runs import Run
from .templates import render


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
    return render("runs.html.j2", title="All runs", runs=rows, asv_site=asv_site)
