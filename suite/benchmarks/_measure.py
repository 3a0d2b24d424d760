"""Measures a class's cases in its asv `setup_cache`: every runnable (case, provider) pair through the
session-level `Measurer` of `tierbench run`, providers interleaved as there, and hands asv the
per-repetition timer samples in seconds."""

from __future__ import annotations

import gc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._cases import catalog, family_entries, part_entries, planned_suite
from ._guard import check_build
from ._settings import ceilings_dir, max_samples
from ._table import save_tables


def _thin(values: list[float], keep: int) -> list[float]:
    """At most `keep` values, evenly spaced over the time-ordered list, so every round stays represented."""
    if len(values) <= keep:
        return list(values)
    step = (len(values) - 1) / (keep - 1)
    return [values[round(i * step)] for i in range(keep)]


def measure_family(family: str, where: Mapping[str, Any] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Measure every runnable (case, provider) of a family (of its `where` cases) through the session-level
    `Measurer` of `tierbench run`: {(label, provider): status, reason, samples_s}."""
    import torch

    from tierbench.suite.measure.plan import timing_settings
    from tierbench.suite.measure.session import Measurer

    cfg, device, _ = planned_suite()
    check_build()
    save_tables(family, where)
    entries = [(label, planned) for _, label, planned in family_entries(family, where) if planned.providers]
    if not entries:
        return {}
    measurer = Measurer.open(
        device,
        timing_settings(cfg.timing),
        ceilings_dir(),
        run_id="asv",
        run_dir=Path.cwd(),
        seed=int(cfg.seed),
        suite=str(cfg.suite),
        tiers=catalog().tiers,
    )
    keep = max_samples()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    # A model block's parts first, through the same session: its best mix is chosen from their records.
    for _, _, planned in part_entries(family_entries(family, where)):
        for _ in measurer.measure(planned):
            pass
    for label, planned in entries:
        for record in measurer.measure(planned):
            out[(label, record.provider)] = {
                "status": record.status,
                "reason": record.reason,
                "samples_s": _thin([ms * 1e-3 for ms in record.samples_ms], keep),
            }
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return out
