"""Runs on disk: which exist, which device each ran on, and which ones a device's view merges."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import naming
from ..ceilings import Ceilings
from ..records import CONFIG_FILE, RECORDS_FILE, Measurement, read_records


class SelectionError(ValueError):
    """Bad input from the command line: the message names the valid choices."""


def slug(text: str) -> str:
    """Site paths and CSS classes: never empty."""
    return naming.slug(text, empty="x")


@dataclass(frozen=True)
class Device:
    key: str  # slug, used in paths
    name: str  # for people


def device_of(env: dict[str, Any]) -> Device:
    name = str(env.get("device_name") or "unknown device")
    if env.get("device_type") == "cpu":
        name = f"CPU {name} ×{env.get('threads', '?')} threads"
    return Device(slug(name), name)


@dataclass
class Run:
    run_id: str
    path: Path
    records: list[Measurement]
    suite: str
    device: Device
    started: float
    finished: float

    @property
    def env(self) -> dict[str, Any]:
        return self.records[-1].env if self.records else {}

    def status_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.records:
            counts[r.status] = counts.get(r.status, 0) + 1
        return counts


def _suite_of(run_dir: Path) -> str:
    try:
        cfg = yaml.safe_load((run_dir / CONFIG_FILE).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return ""
    return str(cfg.get("suite") or "") if isinstance(cfg, dict) else ""


def load_runs(runs_dir: Path) -> list[Run]:
    """Every run folder holding records, oldest first (by its first record's time)."""
    runs = []
    for path in sorted(p for p in runs_dir.iterdir() if (p / RECORDS_FILE).is_file()) if runs_dir.is_dir() else []:
        records = read_records(path)
        if not records:
            continue
        times = [r.time for r in records]
        runs.append(Run(path.name, path, records, _suite_of(path), device_of(records[-1].env), min(times), max(times)))
    return sorted(runs, key=lambda r: (r.started, r.run_id))


def select_runs(runs: list[Run], run_ids: list[str] | None, runs_dir: Path) -> list[Run]:
    """The runs named on the command line, or all of them; a clear error for names that are not runs."""
    if not runs:
        raise SelectionError(f"no runs with records under {runs_dir} (make one with `tierbench run`)")
    if not run_ids:
        return runs
    by_id = {r.run_id: r for r in runs}
    unknown = [i for i in run_ids if i not in by_id]
    if unknown:
        valid = ", ".join(r.run_id for r in runs[-20:])
        raise SelectionError(f"unknown run {', '.join(map(repr, unknown))}; runs under {runs_dir}: {valid}")
    return [by_id[i] for i in dict.fromkeys(run_ids)]


def latest_per_device(runs: list[Run]) -> OrderedDict[Device, list[Run]]:
    """Per device, the newest run of each suite: those are the runs its view merges."""
    newest: dict[tuple[Device, str], Run] = {}
    for run in runs:  # oldest first, so a later run replaces an earlier one
        newest[(run.device, run.suite)] = run
    out: OrderedDict[Device, list[Run]] = OrderedDict()
    for (device, _), run in sorted(newest.items(), key=lambda kv: -kv[1].finished):
        out.setdefault(device, []).append(run)
    return out


def merge(runs: list[Run], earlier: list[Run] | None = None) -> list[Measurement]:
    """Records of several runs of one device: the newest record per (case_id, provider) wins.

    Where that record is a skip (a package not installed there, no GPU), the provider's newest measurement
    in the `earlier` runs of the device stands instead: a run that could not measure a provider does not
    erase what an earlier one measured. Failures (incorrect, error, oom) always stand: they are news.
    """
    latest: dict[tuple[str, str], Measurement] = {}
    order: dict[tuple[str, str], int] = {}
    for i, r in enumerate(sorted((r for run in runs for r in run.records), key=lambda r: r.time)):
        latest[r.key] = r
        order.setdefault(r.key, i)
    measured: dict[tuple[str, str], Measurement] = {}
    for r in sorted((r for run in earlier or [] for r in run.records if r.status == "ok"), key=lambda r: r.time):
        measured[r.key] = r
    for key, r in latest.items():
        if r.status == "skipped" and key in measured:
            latest[key] = measured[key]
    return sorted(latest.values(), key=lambda r: order[r.key])


def find_ceilings(folder: Path, env: dict[str, Any]) -> Ceilings | None:
    """The measured ceilings of the device that records' env describes, if results/ceilings has them."""
    name = str(env.get("device_name") or "")
    wanted = {slug(name)}
    if env.get("device_type") == "cpu":  # ceilings.device_name() spells CPUs this way
        wanted.add(slug(f"cpu {name} x{env.get('threads')} threads"))
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            if slug(str(data.get("device_name", ""))) in wanted or path.stem in wanted:
                return Ceilings(**data)
        except (OSError, json.JSONDecodeError, TypeError):
            continue
    return None
