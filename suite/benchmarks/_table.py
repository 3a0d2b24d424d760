"""The table a class is built from at import (per provider, the labels of the cases it runs here; the
series' version), computed from the plan or read from asv's cache folder.

Why a table file: with launch_method "spawn", asv starts one process per parameter combination and each
imports the benchmark modules to learn the params. Working them out needs torch and the plan (seconds per
process), so `setup_cache` leaves the tables of every class its module declares in asv's cache folder, the
working folder of those processes, and they read them instead of importing torch (a module of two classes
imports both in every process, whichever class's setup_cache ran).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ._cases import family_entries, planned_suite, selection_name
from ._settings import max_samples

# Bump when what a stored sample means changes (unit, thinning, timer semantics): asv then starts a new
# history series instead of mixing old and new numbers.
SCHEMA = "tierbench-asv-1"
TABLE_FILE = "tierbench-asv-{name}.json"


@dataclass
class FamilyTable:
    """What asv needs at import: per provider, the labels of the cases it runs here; the version."""

    family: str
    version: str
    labels: dict[str, list[str]]
    fingerprint: str


def _plan_variables() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k.startswith("TIERBENCH_") or k in ("PYTHONPATH", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES")
    }


# The variables that change the plan as asv started this process, read at import, before anything decides
# for it (the plan sets TRITON_INTERPRET on a CPU): the setup_cache that writes a table and the benchmark
# processes that read it fingerprint the same thing, and a reader needs no torch to do so.
_STARTED_WITH = _plan_variables()


def _fingerprint() -> str:
    """Identifies the settings a table was computed under: the interpreter and the variables it started with."""
    return hashlib.sha256(json.dumps([sys.executable, sorted(_STARTED_WITH.items())]).encode()).hexdigest()[:16]


def compute_table(family: str, where: Mapping[str, Any] | None = None) -> FamilyTable:
    cfg, device, _ = planned_suite()
    entries = family_entries(family, where)
    labels: dict[str, list[str]] = {}
    for _, label, planned in entries:
        for provider in planned.providers:
            labels.setdefault(provider.name, []).append(label)
    version = series_version([case.case_id for case, _, _ in entries], cfg, device.type)
    return FamilyTable(selection_name(family, where), version, labels, _fingerprint())


def series_version(case_ids: list[str], cfg: Any, device_type: str) -> str:
    """A class's asv version: what the source hash cannot see (the cases from YAML, the timing settings,
    the seed, the device type, the samples kept), so a series restarts exactly when its measurement changes."""
    identity = {
        "schema": SCHEMA,
        "cases": sorted(case_ids),
        "timing": {k: v for k, v in dict(cfg.timing).items() if k != "name"},
        "seed": int(cfg.seed),
        "device": device_type,
        "max_samples": max_samples(),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


# Every class's selection this process has built a table for (its modules' classes, at import).
_DECLARED: dict[str, tuple[str, Mapping[str, Any] | None]] = {}


def family_table(family: str, where: Mapping[str, Any] | None = None) -> FamilyTable:
    """The table, from asv's cache folder in a benchmark process, else computed from the plan."""
    name = selection_name(family, where)
    _DECLARED[name] = (family, where)
    path = Path.cwd() / TABLE_FILE.format(name=name)
    if path.exists() and (Path.cwd() / "cache.pickle").exists():
        try:
            table = FamilyTable(**json.loads(path.read_text()))
            if table.fingerprint == _fingerprint() and table.family == name:
                return table
        except (json.JSONDecodeError, TypeError):
            pass  # a damaged table is computed again
    return compute_table(family, where)


def save_tables(family: str, where: Mapping[str, Any] | None = None) -> None:
    """Compute the tables of this class and of every class declared beside it, and leave them in asv's cache
    folder (the working folder of `setup_cache`), where the benchmark processes that follow read them."""
    for selected, selection in {selection_name(family, where): (family, where), **_DECLARED}.items():
        table = compute_table(*selection)
        path = Path.cwd() / TABLE_FILE.format(name=selected)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(table)))
        tmp.replace(path)
