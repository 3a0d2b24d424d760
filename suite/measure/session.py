"""A measuring session, and one run from start to end.

`Measurer` is the one session-level way to measure: the device's ceilings, the climb to the card's steady
state, the environment and the timer, then `measure(planned_case)`. `tierbench run` (RunSession, below),
the asv benchmarks (suite/benchmarks/_measure.py) and the library API (suite/measure/api.py) all go through it.
"""

from __future__ import annotations

import logging
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml
from omegaconf import DictConfig, OmegaConf

from tierbench.timing import TimingSettings, bring_to_steady_state, make_timer

from ..catalog import Catalog
from ..ceilings import Ceilings, load_or_measure, save_for_run, user_cache
from ..ops.base import choice_name
from ..scale.shard_job import ShardJob
from ..store import runfolder, runmeta
from ..store.reading import is_path, read_records, read_runs, resume_target
from ..store.records import CONFIG_FILE, RECORDS_FILE, Measurement, RecordWriter, create_run_dir
from ..tiers import Tier
from ..units import quantity
from .compose import compositions
from .envinfo import environment
from .isolation import IsolatedMeasure
from .plan import PlanError, PlannedCase, check_resume, make_plan, nothing_planned, timing_settings
from .runner import RunContext, measure_case, run_plan
from .worker import WorkerSpec

log = logging.getLogger("tierbench")


def _new_run_folder(cfg: DictConfig, name: str | None) -> tuple[str, Path, runfolder.RunLock]:
    """A new run folder under a writable results_dir (the ceilings_dir writable too), locked by this
    process and holding the config; on a full disk, no folder at all."""
    run_id = runfolder.check_run_id(name) if name else None
    results = runfolder.check_writable_dir(cfg.results_dir, "results_dir")
    _check_ceilings_dir(cfg.ceilings_dir)
    run_id, run_dir = create_run_dir(results, run_id)
    lock = runfolder.RunLock(run_dir).acquire()
    try:
        (run_dir / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
    except OSError as exc:  # a full disk: leave no half-made run folder behind
        lock.release()
        shutil.rmtree(run_dir, ignore_errors=True)
        raise runfolder.RunFolderError(
            f"results_dir={cfg.results_dir} is not a writable directory: {exc.strerror or exc}"
        ) from None
    return run_id, run_dir, lock


def _check_ceilings_dir(value: str | None) -> None:
    """The ceilings folder a run may write: the one named, else the user's cache."""
    runfolder.check_writable_dir(value if value is not None else str(user_cache()), "ceilings_dir")


def _resume_target(cfg: DictConfig) -> tuple[Path, str]:
    """(results folder, run id) of resume=: a run folder by its path, or a run id under results_dir."""
    target = resume_target(str(cfg.resume), cfg.results_dir)
    if is_path(target.given) and target.config is not None and target.config.is_file():
        return runfolder.check_writable_dir(str(target.results), "resume"), target.name
    name = runfolder.check_existing_name(target.given)  # before the results folder is made: a bad name makes nothing
    return runfolder.check_writable_dir(cfg.results_dir, "results_dir"), name


def _saved_config(cfg: DictConfig, saved: Path, run_id: str) -> DictConfig:
    """The run's own config (what it started with, keys added by `+key=...` included) over the schema's."""
    where = f"resume={run_id}: {saved}"
    try:
        data = yaml.safe_load(saved.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PlanError(f"{where} cannot be read ({type(exc).__name__}); the run cannot be resumed") from None
    if not isinstance(data, dict) or "suite" not in data:
        raise PlanError(f"{where} holds no run config (empty, or no `suite`); the run cannot be resumed")
    base = cfg.copy()
    OmegaConf.set_struct(base, False)
    try:
        resumed = OmegaConf.merge(base, OmegaConf.create(data))
    except Exception as exc:  # noqa: BLE001 - a value of the wrong type for the schema
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PlanError(f"{where} does not fit the config schema ({first}); the run cannot be resumed") from None
    OmegaConf.set_struct(resumed, True)
    resumed.resume = run_id
    return resumed


@dataclass
class Measurer:
    ctx: RunContext

    @classmethod
    def open(
        cls,
        device: torch.device,
        timing: TimingSettings,
        ceilings_dir: str | Path | None,
        *,
        run_id: str = "",
        run_dir: Path | None = None,
        seed: int = 0,
        suite: str = "",
        tiers: dict[str, Tier] | None = None,
        remeasure_ceilings: bool = False,
        metrics: tuple[str, ...] = (),
        in_worker: bool = False,
    ) -> Measurer:
        """The session's ceilings, environment and context; with `in_worker` the providers will be measured
        in a worker process (suite/measure/isolation.py), which climbs to the steady state and times there."""
        ceilings = load_or_measure(device, ceilings_dir, remeasure_ceilings)
        log.info(
            "ceilings of %s: copy %s, matmul %s",
            ceilings.device_name,
            quantity(ceilings.copy_gbps, "GB/s"),
            ", ".join(f"{k} {quantity(v, 'TFLOP/s')}" for k, v in ceilings.matmul_tflops.items()),
        )
        if not in_worker:
            bring_to_steady_state(device, timing.steady_state_s)
        elif device.type == "cuda":
            torch.cuda.empty_cache()  # what measuring the ceilings held goes back to the worker's use
        ctx = RunContext(
            run_id=run_id,
            run_dir=run_dir or Path.cwd(),
            device=device,
            timer=None if in_worker else make_timer(timing, device),
            ceilings=ceilings,
            env=environment(device),
            seed=seed,
            suite=suite,
            metrics=tuple(metrics),
        )
        if tiers is not None:
            ctx.tiers = dict(tiers)
        return cls(ctx)

    @property
    def ceilings(self) -> Ceilings:
        return self.ctx.ceilings

    def measure(self, planned: PlannedCase) -> Iterator[Measurement]:
        """Every provider of the case: checked, then the correct ones timed together."""
        return measure_case(planned.case, list(planned.providers), self.ctx, planned.op)


@dataclass
class RunSession:
    cfg: DictConfig
    catalog: Catalog
    device: torch.device
    run_id: str
    run_dir: Path
    plan: list[PlannedCase]
    ceilings: Ceilings | None = None
    shard: ShardJob | None = None
    sweep_planned: int | None = None  # a shard's: the measurements of the whole sweep
    lock: runfolder.RunLock | None = None

    @classmethod
    def open(cls, cfg: DictConfig, device: torch.device, catalog: Catalog, shard: ShardJob | None = None) -> RunSession:
        """A new run folder, or with resume=<id> the interrupted run's own folder and its saved config; a
        shard's run is always a new folder, with the shard's part of the sweep's (missing) work.

        Either way this process holds the folder's lock until close(). Raises PlanError for a config that
        cannot work and RunFolderError for a folder that cannot be used, before anything is written.
        """
        if shard is not None:
            cfg = shard.base_config(cfg)
            part, planned = shard.assigned(cfg, make_plan(cfg, catalog))
            run_id, run_dir, lock = _new_run_folder(cfg, shard.spec.run_name)
            shard.attach(run_id)
            return cls(cfg, catalog, device, run_id, run_dir, part, shard=shard, sweep_planned=planned, lock=lock)
        check_resume(cfg.resume)
        if cfg.resume:
            return cls._resume(cfg, device, catalog)
        plan = make_plan(cfg, catalog)  # fails before any folder is made
        if why := nothing_planned(plan, cfg, catalog):
            raise PlanError(why)
        run_id, run_dir, lock = _new_run_folder(cfg, str(cfg.run_id) if cfg.run_id else None)
        return cls(cfg, catalog, device, run_id, run_dir, plan, lock=lock)

    @classmethod
    def _resume(cls, cfg: DictConfig, device: torch.device, catalog: Catalog) -> RunSession:
        results, name = _resume_target(cfg)
        run_dir = results / name
        saved = run_dir / CONFIG_FILE
        if not saved.is_file():
            known = sorted(p.name for p in results.iterdir() if (p / CONFIG_FILE).is_file())
            raise PlanError(
                f"resume={name}: no run folder {run_dir} with a {CONFIG_FILE}; "
                f"runs here: {', '.join(known[-10:]) or 'none'}"
            )
        lock = runfolder.RunLock(run_dir).acquire()
        try:
            resumed = _saved_config(cfg, saved, name)
            _check_ceilings_dir(resumed.ceilings_dir)
            plan = make_plan(resumed, catalog)
        except BaseException:
            lock.release()
            raise
        return cls(resumed, catalog, device, name, run_dir, plan, lock=lock)

    def close(self) -> None:
        """Let another process have the run folder."""
        if self.lock is not None:
            self.lock.release()

    def count(self) -> int:
        return len(read_records(self.run_dir))

    def _meta(self, finished: float | None = None) -> runmeta.RunMeta:
        old = runmeta.read(self.run_dir)
        meta = runmeta.RunMeta(
            run_id=self.run_id,
            suite=str(self.cfg.suite),
            plugins=[p.name for p in self.catalog.plugins],
            planned=sum(len(pc.providers) for pc in self.plan),
            done=self.count(),
            finished=finished,
            compositions=compositions(self.plan),
            **runmeta.describe_catalog(self.catalog),
        )
        if self.shard is not None:
            spec = self.shard.spec
            meta.sweep, meta.shard, meta.launch = spec.sweep, spec.label, spec.launch
            meta.sweep_planned = self.sweep_planned
        if old is not None:
            meta.started = old.started
        return meta

    def run(self) -> None:
        """The plan's measurements not yet in the run folder, appended to it as they finish: in a worker
        process (isolation=process), else here."""
        ctx = self._open_context()
        if not self.isolated:
            run_plan(self.plan, ctx)
            return
        with IsolatedMeasure(self._worker_spec(ctx), ctx, float(self.cfg.time_limit_s)) as measure:
            run_plan(self.plan, ctx, measure=measure)
        if measure.starts:
            log.info(
                "measuring process: started %d time(s), %s s to be ready",
                len(measure.starts),
                ", ".join(f"{s:.1f}" for s in measure.starts),
            )

    @property
    def isolated(self) -> bool:
        return choice_name(self.cfg.get("isolation", "process")) == "process"

    def _open_context(self) -> RunContext:
        """The run's measuring context: its records so far, run.json, the session's ceilings (saved in the
        run folder) and, where this process times, the device at its steady state."""
        earlier = read_records(self.run_dir)
        done = {r.key for r in earlier}
        total = sum(len(pc.providers) for pc in self.plan)
        log.info(
            "run %s on %s: %d cases, %d measurements (%d already done) -> %s",
            self.run_id,
            self.device,
            len(self.plan),
            total,
            len(done),
            self.run_dir,
        )
        RecordWriter(self.run_dir)  # a resumed run first cuts a record left half-written by a kill
        runmeta.write(self.run_dir, self._meta())
        measurer = Measurer.open(
            self.device,
            timing_settings(self.cfg.timing),
            self.cfg.ceilings_dir,
            run_id=self.run_id,
            run_dir=self.run_dir,
            seed=int(self.cfg.seed),
            suite=str(self.cfg.suite),
            tiers=self.catalog.tiers,
            remeasure_ceilings=bool(self.cfg.remeasure_ceilings),
            metrics=tuple(choice_name(m) for m in self.cfg.get("metrics") or ()),
            in_worker=self.isolated,
        )
        self.ceilings = measurer.ceilings
        save_for_run(self.ceilings, self.run_dir)
        ctx = measurer.ctx
        ctx.done = done
        for record in earlier:  # a resumed run's records: what its composites' best mixes are chosen from
            ctx.note(record)
        if self.shard is not None:
            ctx.sweep, ctx.shard = self.shard.spec.sweep, self.shard.spec.label
            ctx.neighbours = self.shard.neighbours
        return ctx

    def _worker_spec(self, ctx: RunContext) -> WorkerSpec:
        """What the worker process needs to measure this run's cases as this process would."""
        return WorkerSpec(
            config=OmegaConf.to_container(self.cfg, resolve=True),
            plugins=[p.name for p in self.catalog.plugins],
            device=str(self.device),
            run_id=self.run_id,
            run_dir=str(ctx.run_dir),
            env=ctx.env,
            ceilings=ctx.ceilings,
            sys_path=list(sys.path),
            sweep=ctx.sweep,
            shard=ctx.shard,
        )

    def finish(self) -> None:
        import time

        records = read_runs([self.run_dir])
        runmeta.write(self.run_dir, self._meta(finished=time.time()))
        if self.cfg.table and self.shard is None:  # a sweep's table is printed once, by its command
            from ..show import table

            print(table.render(records, runmeta.read(self.run_dir)), flush=True)
        if self.cfg.html and records:  # a shard dealt no work has nothing to report
            from ..show.site.build import write_run_report

            path = write_run_report(self.run_dir)
            log.info("report: %s", path)
        log.info("records: %s (%d)", self.run_dir / RECORDS_FILE, len(records))

    def interrupted(self) -> None:
        """Keep run.json true after an interrupt: what is done, and that the run did not finish."""
        runmeta.write(self.run_dir, self._meta())
