"""run.json: what a run folder says about itself, so that every view reads records and this file only.

Written when the run starts and again when it ends: the suite, the plugins loaded, how each family is shown
and which providers its speedups are quoted against, the tiers (order, color, own code), how complete the
run is (measurements planned and done, finished or not) and, for a shard, its sweep. Torch-free: the site
and the tables read it without loading an op or a tier.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

META_FILE = "run.json"
# 2: each view carries the panels its pages draw (presentation.View.panels); format 1 carried only `model`.
META_FORMAT = 2


@dataclass
class RunMeta:
    run_id: str
    suite: str = ""
    plugins: list[str] = field(default_factory=list)
    views: dict[str, dict[str, Any]] = field(default_factory=dict)  # family -> View.to_json()
    baselines: dict[str, list[str]] = field(default_factory=dict)  # op -> providers, preferred first
    tiers: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> order, color, label, own_code
    planned: int = 0  # measurements the plan holds
    done: int = 0  # measurements recorded
    started: float = field(default_factory=time.time)
    finished: float | None = None  # when the run ended (None: still running, killed or interrupted)
    format: int = META_FORMAT
    # A shard of a sweep (suite/scale/sweep.py): the sweep's id, "index/count", which launch, and the measurements
    # the whole sweep plans (its runs together are one logical run). None for a run of its own.
    sweep: str | None = None
    shard: str | None = None
    launch: int | None = None
    sweep_planned: int | None = None
    # Composite ops' cases (a model's blocks): case id -> {"op", "parts": [{"name", "op", "family", "case_id",
    # "in_whole"}]}, the chain in order (suite/measure/compose.py); the model view reads its parts' records by these.
    compositions: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.finished is not None and self.done >= self.planned


def describe_catalog(catalog: Any) -> dict[str, Any]:
    """The views, baselines and tiers of a catalog (suite/catalog.py), as run.json keeps them."""
    return {
        "views": {f.name: f.view.to_json() for f in catalog.families},
        "baselines": {op.name: list(op.baseline) for op in catalog.ops.values()},
        "tiers": {
            t.name: {"order": t.order, "color": t.color, "label": t.label, "own_code": t.own_code}
            for t in catalog.tiers.values()
        },
    }


def write(run_dir: Path, meta: RunMeta) -> None:
    path = Path(run_dir) / META_FILE
    tmp = path.with_name(f".{META_FILE}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(asdict(meta), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # the old run.json stays whole
        raise


def read(run_dir: Path) -> RunMeta | None:
    """The run's meta, or None where it has none (runs older than the file) or it is damaged."""
    try:
        data = json.loads((Path(run_dir) / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        return None
    known = {"format": 1} | {k: v for k, v in data.items() if k in RunMeta.__dataclass_fields__}
    try:
        meta = RunMeta(**known)
    except TypeError:
        return None
    dicts = (meta.views, meta.baselines, meta.tiers, meta.compositions)
    if not all(isinstance(d, dict) for d in dicts) or not isinstance(meta.plugins, list):
        return None
    if not isinstance(meta.format, int) or isinstance(meta.format, bool):
        return None
    return meta
