"""One run from start to end: its folder (new or resumed), ceilings, environment, the plan, the reports."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from . import report_html, table
from .ceilings import Ceilings, load_or_measure, save_for_run
from .envinfo import environment
from .plan import PlanError, PlannedCase, make_plan
from .records import CONFIG_FILE, RecordWriter, create_run_dir, read_records
from .runner import RunContext, run_plan
from .timing import TimingSettings, bring_to_steady_state, make_timer

log = logging.getLogger("tierbench")


@dataclass
class RunSession:
    cfg: DictConfig
    device: torch.device
    run_id: str
    run_dir: Path
    plan: list[PlannedCase]
    ceilings: Ceilings | None = None

    @classmethod
    def open(cls, cfg: DictConfig, device: torch.device) -> RunSession:
        """A new run folder, or with resume=<id> the interrupted run's own folder and its saved config."""
        results = Path(cfg.results_dir)
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
            return cls(resumed, device, cfg.resume, run_dir, make_plan(resumed))
        plan = make_plan(cfg)  # fails before any folder is made
        run_id, run_dir = create_run_dir(results, cfg.run_id)
        (run_dir / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
        return cls(cfg, device, run_id, run_dir, plan)

    def count(self) -> int:
        return len(read_records(self.run_dir))

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
        self.ceilings = load_or_measure(self.device, self.cfg.ceilings_dir, self.cfg.remeasure_ceilings)
        save_for_run(self.ceilings, self.run_dir)
        log.info(
            "ceilings of %s: copy %.0f GB/s, matmul %s TFLOP/s",
            self.ceilings.device_name,
            self.ceilings.copy_gbps,
            {k: round(v, 1) for k, v in self.ceilings.matmul_tflops.items()},
        )
        settings = TimingSettings.from_config(self.cfg.timing)
        bring_to_steady_state(self.device, settings.steady_state_s)
        ctx = RunContext(
            run_id=self.run_id,
            run_dir=self.run_dir,
            device=self.device,
            timer=make_timer(settings, self.device),
            ceilings=self.ceilings,
            env=environment(self.device),
            seed=int(self.cfg.seed),
            done=done,
        )
        run_plan(self.plan, ctx)

    def finish(self) -> None:
        records = read_records(self.run_dir)
        if self.cfg.table:
            print(table.render(records), flush=True)
        if self.cfg.html:
            path = report_html.write(self.run_dir, records, self.run_id, self.ceilings)
            log.info("report: %s", path)
        log.info("records: %s (%d)", self.run_dir / "measurements.jsonl", len(records))
