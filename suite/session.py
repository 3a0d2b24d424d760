"""A measuring session, and one run from start to end.

`Measurer` is the one session-level way to measure: the device's ceilings, the climb to the card's steady
state, the environment and the timer, then `measure(planned_case)`. `tierbench run` (RunSession, below),
the asv benchmarks (suite/benchmarks/_harness.py) and the library API (suite/api.py) all go through it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from tierbench.timing import TimingSettings, bring_to_steady_state, make_timer

from . import runmeta
from .catalog import Catalog
from .ceilings import Ceilings, load_or_measure, save_for_run
from .envinfo import environment
from .ops.base import choice_name
from .plan import PlanError, PlannedCase, make_plan, timing_settings
from .records import CONFIG_FILE, Measurement, RecordWriter, create_run_dir, read_records
from .runner import RunContext, measure_case, run_plan
from .shard_job import ShardJob
from .tiers import Tier

log = logging.getLogger("tierbench")


@dataclass
class Measurer:
    ctx: RunContext

    @classmethod
    def open(
        cls,
        device: torch.device,
        timing: TimingSettings,
        ceilings_dir: str | Path,
        *,
        run_id: str = "",
        run_dir: Path | None = None,
        seed: int = 0,
        suite: str = "",
        tiers: dict[str, Tier] | None = None,
        remeasure_ceilings: bool = False,
        metrics: tuple[str, ...] = (),
    ) -> Measurer:
        ceilings = load_or_measure(device, ceilings_dir, remeasure_ceilings)
        log.info(
            "ceilings of %s: copy %.0f GB/s, matmul %s TFLOP/s",
            ceilings.device_name,
            ceilings.copy_gbps,
            {k: round(v, 1) for k, v in ceilings.matmul_tflops.items()},
        )
        bring_to_steady_state(device, timing.steady_state_s)
        ctx = RunContext(
            run_id=run_id,
            run_dir=run_dir or Path.cwd(),
            device=device,
            timer=make_timer(timing, device),
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

    def run(self, plan: list[PlannedCase]) -> list[Measurement]:
        """The plan's measurements not yet in the run folder, appended to it as they finish."""
        return run_plan(plan, self.ctx)


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

    @classmethod
    def open(cls, cfg: DictConfig, device: torch.device, catalog: Catalog, shard: ShardJob | None = None) -> RunSession:
        """A new run folder, or with resume=<id> the interrupted run's own folder and its saved config; a
        shard's run is always a new folder, with the shard's part of the sweep's (missing) work."""
        results = Path(cfg.results_dir)
        if shard is not None:
            cfg = shard.base_config(cfg)
            part, planned = shard.assigned(cfg, make_plan(cfg, catalog))
            run_id, run_dir = create_run_dir(results, shard.spec.run_name)
            (run_dir / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
            shard.attach(run_id)
            return cls(cfg, catalog, device, run_id, run_dir, part, shard=shard, sweep_planned=planned)
        if cfg.resume:
            run_dir = results / cfg.resume
            saved = run_dir / CONFIG_FILE
            if not saved.exists():
                known = (
                    sorted(p.name for p in results.iterdir() if (p / CONFIG_FILE).exists()) if results.is_dir() else []
                )
                raise PlanError(
                    f"resume={cfg.resume}: no run folder {run_dir} with a {CONFIG_FILE}; "
                    f"runs here: {', '.join(known[-10:]) or 'none'}"
                )
            # The plan comes from the run's own config: a resumed run finishes what it started.
            resumed = OmegaConf.merge(cfg, OmegaConf.load(saved))
            resumed.resume = cfg.resume
            return cls(resumed, catalog, device, cfg.resume, run_dir, make_plan(resumed, catalog))
        plan = make_plan(cfg, catalog)  # fails before any folder is made
        run_id, run_dir = create_run_dir(results, cfg.run_id)
        (run_dir / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
        return cls(cfg, catalog, device, run_id, run_dir, plan)

    def count(self) -> int:
        return len(read_records(self.run_dir))

    def _meta(self, finished: float | None = None) -> runmeta.RunMeta:
        old = runmeta.read(self.run_dir)
        meta = runmeta.RunMeta(
            run_id=self.run_id,
            suite=str(self.cfg.suite),
            plugins=[p.name for p in self.catalog.plugins],
            planned=sum(len(pc.providers) for pc in self.plan),
            done=len({r.key for r in read_records(self.run_dir)}),
            finished=finished,
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
        done = {r.key for r in read_records(self.run_dir)}
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
        )
        self.ceilings = measurer.ceilings
        save_for_run(self.ceilings, self.run_dir)
        measurer.ctx.done = done
        if self.shard is not None:
            measurer.ctx.sweep, measurer.ctx.shard = self.shard.spec.sweep, self.shard.spec.label
            measurer.ctx.neighbours = self.shard.neighbours
        measurer.run(self.plan)

    def finish(self) -> None:
        import time

        records = read_records(self.run_dir)
        runmeta.write(self.run_dir, self._meta(finished=time.time()))
        if self.cfg.table and self.shard is None:  # a sweep's table is printed once, by its command
            from . import table

            print(table.render(records, runmeta.read(self.run_dir)), flush=True)
        if self.cfg.html:
            from .site.build import write_run_report

            path = write_run_report(self.run_dir)
            log.info("report: %s", path)
        log.info("records: %s (%d)", self.run_dir / "measurements.jsonl", len(records))

    def interrupted(self) -> None:
        """Keep run.json true after an interrupt: what is done, and that the run did not finish."""
        runmeta.write(self.run_dir, self._meta())
