"""One shard of a sweep, inside its job: which device it takes, which cases it measures, who runs beside it.

A GPU shard claims a GPU for itself (suite/scale/sweep.py's claims: no two jobs ever share one) and makes it the
current device before anything else touches CUDA in this process: the GPU devices[index] where it is free,
else the next free one of the list; a job a scheduler placed (SLURM) takes one of the GPUs it was given.
A CPU shard is a CPU job. While the shard runs, its heartbeat tells the others it is there; each of its
records names the shards that ran beside it on this host.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from ..ceilings import Ceilings, cached
from ..measure.envinfo import device_identity, device_name
from ..measure.plan import PlanError, PlannedCase, resolve_device, timing_settings
from ..store.reading import read_records, run_folders_in, sweep_runs
from ..store.records import CONFIG_FILE
from . import balance, sweep

log = logging.getLogger("tierbench")


@dataclass(frozen=True)
class ShardSpec:
    index: int
    count: int
    sweep: str
    launch: int

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def run_name(self) -> str:
        """The shard's run folder: named after the sweep, so a listing shows which runs go together."""
        again = f"-r{self.launch}" if self.launch else ""
        return f"{self.sweep}{again}-{self.index}of{self.count}"


def is_sharded(cfg: Any) -> bool:
    return cfg.shard.sweep is not None or int(cfg.shard.count) != 1 or int(cfg.shard.index) != 0


def shard_spec(cfg: Any) -> ShardSpec:
    """The shard keys, validated; each message names its key."""
    index, count, launch, sid = int(cfg.shard.index), int(cfg.shard.count), int(cfg.shard.launch), cfg.shard.sweep
    if count < 1:
        raise PlanError(f"shard.count={count} must be at least 1")
    if not 0 <= index < count:
        raise PlanError(f"shard.index={index} is outside 0..{count - 1} (shard.count={count})")
    if launch < 0:
        raise PlanError(f"shard.launch={launch} must be 0 or more")
    if not sid:
        raise PlanError("shard.count and shard.index need shard.sweep=<id>, the id every shard of the sweep shares")
    if not sweep.valid_id(str(sid)):
        raise PlanError(f"shard.sweep={sid!r} is not a valid sweep id (letters, digits, '.', '_', '-')")
    if cfg.run_id:
        raise PlanError(f"run_id={cfg.run_id}: a shard's run is named after its sweep; leave run_id out")
    return ShardSpec(index, count, str(sid), launch)


def parse_devices(value: Any) -> str | int | list[int] | None:
    """`devices` as given: None, 'all', a number of jobs, or a list of distinct GPU indices."""
    if value is None:
        return None
    if OmegaConf.is_list(value) or isinstance(value, (list, tuple)):
        items = list(value)
        if not items or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items):
            raise PlanError(f"devices={items}: a list of GPU indices (devices=[0,2])")
        if len(set(items)) != len(items):
            raise PlanError(f"devices={items} names a GPU twice: no two jobs share a GPU")
        return items
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise PlanError(f"devices={value}: at least 1 job")
        return value
    if value == "all":
        return "all"
    raise PlanError(f"devices={value!r}: give all, a count of jobs (devices=2) or a list of GPUs (devices=[0,2])")


def scheduler_placed() -> bool:
    """A job a scheduler started on GPUs of its choosing (SLURM sets these in every job step)."""
    return "SLURM_JOB_ID" in os.environ or os.environ.get("SUBMITIT_EXECUTOR") == "slurm"


def gpu_candidates(devices: Any, visible: int) -> list[int]:
    """The GPU indices (of those this job sees) a shard may take."""
    if scheduler_placed():
        return list(range(visible))
    wanted = parse_devices(devices)
    if wanted == "all" or wanted is None:
        return list(range(visible))
    listed = list(range(wanted)) if isinstance(wanted, int) else list(wanted)
    outside = [i for i in listed if i >= visible]
    if outside:
        raise PlanError(f"devices={devices}: GPU {outside[0]} does not exist here ({visible} visible to PyTorch)")
    return listed


@dataclass
class ShardJob:
    spec: ShardSpec
    folder: Path  # the sweep's folder
    device: torch.device
    device_index: int | None
    device_uuid: str | None
    heartbeat: sweep.Heartbeat
    claim_key: str | None = None

    @classmethod
    def start(cls, cfg: Any) -> ShardJob:
        """Validate the shard, take and pin its device, and start its heartbeat (PlanError if it cannot)."""
        spec = shard_spec(cfg)
        folder = sweep.sweep_dir(cfg.results_dir, spec.sweep)
        folder.mkdir(parents=True, exist_ok=True)
        device = resolve_device(cfg.device)
        index = uuid = key = None
        if device.type == "cuda":
            index, uuid = _take_gpu(cfg.devices, spec)
            key = uuid
            device = torch.device("cuda", index)
        beat = sweep.Beat(
            spec.sweep, spec.launch, spec.index, spec.count, device=device.type, device_index=index, device_uuid=uuid
        )
        job = cls(spec, folder, device, index, uuid, sweep.Heartbeat(folder, beat), key)
        log.info("shard %s of sweep %s on %s%s", spec.label, spec.sweep, device, f" ({uuid})" if uuid else "")
        return job

    def attach(self, run_id: str) -> None:
        self.heartbeat.update(run_id=run_id)

    def neighbours(self) -> list[dict[str, Any]]:
        return sweep.neighbours(self.folder, self.heartbeat.beat)

    def stop(self, code: int, error: str = "") -> None:
        self.heartbeat.stop(code, error)
        if self.claim_key:
            sweep.release(sweep.claims_dir(), self.claim_key)

    # -- the config and the cases of this shard ---------------------------------------------------------

    def base_config(self, cfg: Any) -> Any:
        """The config the shard measures: on a resume, the sweep's saved one with this launch's shard keys."""
        saved = self.folder / CONFIG_FILE
        if not cfg.resume:
            sweep.write_once_text(saved, OmegaConf.to_yaml(cfg, resolve=True))
            return cfg
        if not saved.is_file():
            raise PlanError(f"resume={cfg.resume}: the sweep has no {saved}; nothing to resume")
        merged = OmegaConf.merge(cfg, OmegaConf.load(saved))
        merged.shard, merged.devices, merged.resume = cfg.shard, cfg.devices, cfg.resume
        return merged

    def assigned(self, cfg: Any, plan: list[PlannedCase]) -> tuple[list[PlannedCase], int]:
        """This shard's part of the launch (missing work only) and the measurements the whole sweep plans."""
        data = sweep.read_launch(self.folder, self.spec.launch)
        if data is None:
            data = sweep.write_once(sweep.launch_file(self.folder, self.spec.launch), self._deal(cfg, plan))
        if int(data.get("count", -1)) != self.spec.count:
            raise PlanError(
                f"launch {self.spec.launch} of sweep {self.spec.sweep} was dealt to {data.get('count')} shards, "
                f"not shard.count={self.spec.count}"
            )
        mine = {case_id: set(names) for case_id, names, shard, _ in data["cases"] if shard == self.spec.index}
        part = []
        for pc in plan:
            names = mine.get(pc.case.case_id)
            if names:
                part.append(PlannedCase(pc.case, pc.op, tuple(p for p in pc.providers if p.name in names)))
        return part, int(data["planned"])

    def _deal(self, cfg: Any, plan: list[PlannedCase]) -> dict[str, Any]:
        """Deal the sweep's missing (case, provider) pairs to the launch's shards, balanced by expected cost."""
        if self.spec.launch > 0:
            running = [b for b in sweep.beats(self.folder) if b.launch < self.spec.launch and b.alive()]
            if running:
                b = running[0]
                raise PlanError(
                    f"sweep {self.spec.sweep} still runs shard {b.label} (pid {b.pid} on {b.host}): "
                    "let it finish or stop it before resuming"
                )
        earlier_runs = sweep_runs(cfg.results_dir, self.spec.sweep)
        done = {r.key for folder in earlier_runs for r in read_records(folder)}
        timing = timing_settings(cfg.timing)
        name = device_name(self.device)
        found = cached(self.device, cfg.ceilings_dir)
        history = [r for folder in run_folders_in(cfg.results_dir) for r in read_records(folder)]
        earlier = balance.earlier_costs(history, name, timing)
        todo, costs = [], []
        for pc in plan:
            names = [p.name for p in pc.providers if (pc.case.case_id, p.name) not in done]
            if not names:
                continue
            work = pc.op.work(pc.case)
            ceilings = _ceilings_for(found, self.device.type, pc.case.params["dtype"])
            todo.append((pc.case.case_id, names))
            costs.append(balance.case_cost(pc.case.case_id, names, work, timing, ceilings, self.device.type, earlier))
        shards = balance.assign(costs, self.spec.count)
        # A composite's parts go where the composite goes: its best mix is chosen from its own run's records.
        parts = {pc.case.case_id: [p.case.case_id for p in pc.op.parts(pc.case)] for pc in plan if pc.op.parts}
        shards = balance.together(shards, [case_id for case_id, _ in todo], parts)
        log.info(
            "sweep %s launch %d: %d cases dealt to %d shards, expected %s s each",
            self.spec.sweep,
            self.spec.launch,
            len(todo),
            self.spec.count,
            [round(t) for t in balance.totals(costs, shards, self.spec.count)],
        )
        return {
            "sweep": self.spec.sweep,
            "launch": self.spec.launch,
            "count": self.spec.count,
            "planned": sum(len(pc.providers) for pc in plan),
            "cases": [[cid, names, shard, cost] for (cid, names), shard, cost in zip(todo, shards, costs)],
        }


def _take_gpu(devices: Any, spec: ShardSpec) -> tuple[int, str]:
    candidates = gpu_candidates(devices, torch.cuda.device_count())
    if not candidates:
        raise PlanError("no CUDA GPU is visible to this job")
    start = spec.index % len(candidates)
    busy = []
    for index in candidates[start:] + candidates[:start]:
        uuid = device_identity(torch.device("cuda", index))[1] or f"cuda-{index}"
        try:
            sweep.claim(sweep.claims_dir(), uuid, {"sweep": spec.sweep, "shard": spec.label, "device_index": index})
        except sweep.DeviceBusy as exc:
            busy.append(str(exc))
            continue
        torch.cuda.set_device(index)
        if torch.cuda.current_device() != index:
            sweep.release(sweep.claims_dir(), uuid)
            raise PlanError(f"could not make GPU {index} the current device of this job")
        return index, uuid
    raise PlanError(f"every GPU this shard may take is in use: {'; '.join(busy)}")


def _ceilings_for(found: Ceilings | None, device_type: str, dtype: str) -> tuple[float, float]:
    if found is not None:
        return found.peak_tflops(dtype), found.copy_gbps
    return balance.NOMINAL.get(device_type, balance.NOMINAL["cuda"])
