"""Runs on disk: which exist, which device each ran on, and which ones a device's view merges."""

from __future__ import annotations

import json
import subprocess
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import naming
from ...ceilings import Ceilings
from ...store import runmeta
from ...store.reading import read_records, run_folders_in
from ...store.records import RECORDS_FILE, Measurement
from .kernel_age import KernelAge


class SelectionError(ValueError):
    """Bad input from the command line: the message names the valid choices."""


def slug(text: str) -> str:
    """Site paths and CSS classes: never empty, never longer than a file name may be."""
    return naming.slug(text, empty="x")[:80].strip("-") or "x"


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
    meta: runmeta.RunMeta | None = None
    shards: list[str] = field(default_factory=list)  # a sweep's logical run: the run ids of its shards
    # Whether the Triton kernels changed since the run's commit (set by the site's build; None: not known)
    kernels: KernelAge | None = None

    @property
    def members(self) -> list[str]:
        """The run ids whose records this run holds (its own, or its shards')."""
        return self.shards or [self.run_id]

    @property
    def complete(self) -> bool:
        """Whether the run measured all it planned (a run older than run.json is taken as complete)."""
        return self.meta is None or self.meta.complete

    @property
    def measured_all(self) -> bool:
        """Whether every measurement the run planned is recorded (whether or not it recorded its end)."""
        return self.meta is None or self.meta.done >= self.meta.planned

    @property
    def completeness(self) -> str:
        """How much of its plan the run measured, in words."""
        if self.meta is None:
            return "complete (a run older than run.json)"
        if self.complete:
            return "complete"
        if self.measured_all:  # every record is there; only the run's end was never written
            return (
                f"all {self.meta.planned} planned measurements recorded, but not the run's end "
                "(stopped after its last measurement, or still running)"
            )
        how = "interrupted, failed or still running" if self.meta.finished is None else "ended early"
        return f"incomplete: {self.meta.done} of {self.meta.planned} measured ({how})"

    def families(self) -> set[str]:
        return {r.family for r in self.records}

    @property
    def env(self) -> dict[str, Any]:
        return self.records[-1].env if self.records else {}

    def status_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.records:
            counts[r.status] = counts.get(r.status, 0) + 1
        return counts


def _suite_of(records: list[Measurement], meta: runmeta.RunMeta | None) -> str:
    """The suite the records name (their newest), else the run's meta."""
    named = [r.suite for r in records if r.suite]
    return named[-1] if named else (meta.suite if meta else "")


def load_run(path: Path) -> Run | None:
    """The run in one folder, or None where it holds no records."""
    records = read_records(path)
    if not records:
        return None
    times = [r.time for r in records]
    meta = runmeta.read(path)
    return Run(
        path.name, path, records, _suite_of(records, meta), device_of(records[-1].env), min(times), max(times), meta
    )


def load_runs(runs_dir: Path, only: set[str] | None = None) -> list[Run]:
    """Every run holding records (of the folders named in `only`, where given), oldest first (by its first
    record's time); the shards of a sweep are one logical run per device type."""
    folders = run_folders_in(runs_dir)
    if only is not None:
        folders = [p for p in folders if p.name in only]
    runs = [run for run in (load_run(path) for path in folders) if run is not None]
    return sorted(merge_sweeps(runs), key=lambda r: (r.started, r.run_id))


def committed_runs(runs_dir: Path) -> set[str] | None:
    """The run folders under `runs_dir` whose records git tracks: the published ones. None where the folder
    is not in a git work tree (every run there is then the site's)."""
    if not runs_dir.is_dir():
        return None
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--", "."], cwd=runs_dir, capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    tracked = (Path(name) for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name)
    return {path.parts[0] for path in tracked if len(path.parts) == 2 and path.name == RECORDS_FILE}


def _sweep_of(run: Run) -> str | None:
    if run.meta is not None and run.meta.sweep:
        return run.meta.sweep
    return next((r.sweep for r in run.records if r.sweep), None)


def merge_sweeps(runs: list[Run]) -> list[Run]:
    """Runs of their own as they are; the shard runs of each sweep (every launch, every host) merged into one
    run per device type, named after the sweep, complete once every measurement the sweep planned is done."""
    out: list[Run] = []
    groups: dict[tuple[str, Device], list[Run]] = {}
    for run in runs:
        sid = _sweep_of(run)
        if sid is None:
            out.append(run)
        else:
            groups.setdefault((sid, run.device), []).append(run)
    for (sid, device), shards in groups.items():
        shards.sort(key=lambda r: (r.started, r.run_id))
        records = sorted((r for run in shards for r in run.records), key=lambda r: r.time)
        metas = [run.meta for run in shards if run.meta is not None]
        planned = max((m.sweep_planned or m.planned for m in metas), default=0)
        done = len({r.key for r in records})
        ended = [m.finished for m in metas if m.finished is not None]
        meta = None
        if metas:
            base = metas[-1]
            meta = runmeta.RunMeta(
                run_id=sid,
                suite=base.suite,
                plugins=sorted({p for m in metas for p in m.plugins}),
                views={k: v for m in metas for k, v in m.views.items()},
                baselines={k: v for m in metas for k, v in m.baselines.items()},
                tiers={k: v for m in metas for k, v in m.tiers.items()},
                compositions={k: v for m in metas for k, v in m.compositions.items()},
                planned=planned,
                done=done,
                started=min(m.started for m in metas),
                finished=max(ended) if ended and done >= planned else None,
                sweep=sid,
                sweep_planned=planned,
                format=min(m.format for m in metas),
            )
        out.append(
            Run(
                sid,
                shards[0].path,
                records,
                _suite_of(records, meta),
                device,
                min(r.started for r in shards),
                max(r.finished for r in shards),
                meta,
                [r.run_id for r in shards],
            )
        )
    return out


def select_runs(runs: list[Run], run_ids: list[str] | None, runs_dir: Path) -> list[Run]:
    """The runs named on the command line, or all of them; a clear error for names that are not runs."""
    if not runs:
        raise SelectionError(f"no runs with records under {runs_dir} (make one with `tierbench run`)")
    if not run_ids:
        return runs
    by_id = {r.run_id: r for r in runs}
    for run in runs:  # a shard's run id names its sweep's logical run
        for member in run.shards:
            by_id.setdefault(member, run)
    unknown = [i for i in run_ids if i not in by_id]
    if unknown:
        valid = ", ".join(r.run_id for r in runs[-20:])
        raise SelectionError(f"unknown run {', '.join(map(repr, unknown))}; runs under {runs_dir}: {valid}")
    return list({id(by_id[i]): by_id[i] for i in run_ids}.values())


def newest_per_case(runs: list[Run]) -> dict[tuple[Device, str], Run]:
    """Per device and case, the newest complete run that measured it (an incomplete run only where no
    complete one did): a killed run, or one that left a case out, never hides an earlier complete one."""
    chosen: dict[tuple[Device, str], Run] = {}
    for run in sorted(runs, key=lambda r: (r.started, r.run_id)):  # oldest first: a later run replaces it
        for case_id in dict.fromkeys(r.case_id for r in run.records):
            key = (run.device, case_id)
            if run.complete or key not in chosen or not chosen[key].complete:
                chosen[key] = run
    return chosen


def latest_per_device(runs: list[Run]) -> OrderedDict[Device, list[Run]]:
    """Per device, the runs its view merges: each the newest complete run of at least one case, newest
    first."""
    chosen = newest_per_case(runs)
    out: OrderedDict[Device, list[Run]] = OrderedDict()
    for run in sorted({id(r): r for r in chosen.values()}.values(), key=lambda r: (-r.finished, r.run_id)):
        out.setdefault(run.device, []).append(run)
    return out


def merge(runs: list[Run], earlier: list[Run] | None = None) -> list[Measurement]:
    """Records of several runs of one device: each case's records from its newest complete run among them.

    Where such a record is a skip (a package not installed there, no GPU), the provider's newest measurement
    of that case in the `earlier` runs of the device (these runs among them or not) stands instead: a run
    that could not measure a provider does not erase what an earlier one measured. Failures (incorrect,
    error, oom) always stand: they are news.
    """
    chosen = newest_per_case(runs)
    latest: dict[tuple[str, str], Measurement] = {}  # in first-seen order; a key a sweep holds twice: its newest
    for r in sorted(
        (r for run in runs for r in run.records if chosen[(run.device, r.case_id)] is run), key=lambda r: r.time
    ):
        latest[r.key] = r
    measured: dict[tuple[str, str], Measurement] = {}
    for r in sorted((r for run in earlier or [] for r in run.records if r.status == "ok"), key=lambda r: r.time):
        measured[r.key] = r
    return [measured[key] if r.status == "skipped" and key in measured else r for key, r in latest.items()]


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
