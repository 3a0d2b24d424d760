"""`devices=`: one command spreads a suite over the devices of a host, or a cluster, as one sweep.

    tierbench run devices=all suite=all

becomes Hydra's multirun of one job per device, each a shard of one new sweep, run by the joblib launcher
(hydra-joblib-launcher: all jobs at once, each in a process of its own) unless hydra/launcher= names another
(hydra/launcher=slurm: one SLURM job per shard, through hydra-submitit-launcher):

    --multirun shard.index=0,1,...,n-1 shard.count=n shard.sweep=<id> hydra.sweep.dir=<results>/.sweeps/<id>
               hydra/launcher=joblib hydra.launcher.n_jobs=n

A --multirun sweep of other keys (suite=matmul,norm) becomes one sweep per point, Hydra's own sweep syntax
deciding the points, each fanned out the same way. resume=<sweep id> (or the run id of one of its shards)
launches the sweep's missing work as its next launch, over devices= (default: as many as before).
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..measure.plan import PlanError, check_resume
from ..store.reading import RUNS_ROOT, find_sweep, read_runs, sweep_runs
from . import sweep
from .shard_job import parse_devices

log = logging.getLogger("tierbench")

MULTIRUN_FLAGS = ("--multirun", "-m")
VALUED_FLAGS = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd", "--cfg", "-c", "--package", "-p")
INSPECTING = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc")
# The launchers a sharded command may name (joblib by default): the Hydra plugin each needs, and its package.
LAUNCHER_PLUGINS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "hydra-joblib-launcher"),
    "slurm": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher"),
}


@dataclass(frozen=True)
class Launch:
    sweep: str
    folder: Path
    launch: int
    count: int
    argv: list[str]


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """Hydra's flags (with the value of those that take one) apart from the overrides."""
    flags, overrides = [], []
    args = iter(argv)
    for arg in args:
        if arg.startswith("-"):
            flags.append(arg)
            if arg in VALUED_FLAGS:
                flags.append(next(args, ""))
        else:
            overrides.append(arg)
    return flags, overrides


def _key(arg: str) -> str:
    return arg.split("=", 1)[0].lstrip("+~")


def _value(args: list[str], key: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    found = [a for a in args if "=" in a and _key(a) == key]
    return OverridesParser.create().parse_overrides([found[-1]])[0].value() if found else None


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w./-]+", text) else "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def device_count(devices: Any, device: str) -> int:
    """How many shards `devices` asks for; GPUs counted here only where it names them all or by index."""
    wanted = parse_devices(devices)
    if isinstance(wanted, int):
        return wanted
    import torch

    gpus = torch.cuda.device_count() if device != "cpu" and torch.cuda.is_available() else 0
    if not gpus:
        raise PlanError(f"devices={devices} names GPUs but none is visible here; for CPU jobs give a count (devices=2)")
    if wanted == "all":
        return gpus
    outside = [i for i in wanted if i >= gpus]
    if outside:
        raise PlanError(f"devices={devices}: GPU {outside[0]} does not exist here ({gpus} visible to PyTorch)")
    return len(wanted)


def points(overrides: list[str], multirun: bool) -> list[list[str]]:
    """The jobs a --multirun of these overrides would run (Hydra's sweep syntax), or the one job."""
    if not multirun:
        return [overrides]
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def plan(argv: list[str]) -> list[Launch] | None:
    """The Hydra invocations a sharded command becomes, or None for a command that is not one (a plain
    run, a plain resume, or a --multirun that sets shard.* itself). Creates the sweep folders."""
    flags, overrides = split_argv(argv)
    if any(_key(a).startswith("shard.") or _key(a) == "shard" for a in overrides):
        return None
    if any(f.split("=", 1)[0] in INSPECTING for f in flags):
        return None  # Hydra shows the config or its help: nothing runs
    devices, resume = _value(overrides, "devices"), _value(overrides, "resume")
    check_resume(resume)
    if devices is not None and _value(overrides, "run_id"):
        raise PlanError("run_id names one run; a sweep's shard runs are named after the sweep: drop run_id")
    results = str(_value(overrides, "results_dir") or RUNS_ROOT)
    device = str(_value(overrides, "device") or "auto")
    found = find_sweep(str(resume), results) if resume else None
    if resume and found is None:
        if devices is not None:
            raise PlanError(f"resume={resume} is not a sweep: a run of its own resumes in one job; drop devices=")
        return None
    if found is None and devices is None:
        return None
    require_launcher(overrides)
    multirun = any(f in MULTIRUN_FLAGS for f in flags)
    rest = [f for f in flags if f not in MULTIRUN_FLAGS]
    if found is not None:
        folder = sweep.sweep_dir(results, found)
        if devices is None:
            devices = (sweep.info(folder) or {}).get("devices", 1)
        running = [b for b in sweep.beats(folder) if b.alive()]
        if running:
            b = running[0]
            raise PlanError(f"sweep {found} still runs shard {b.label} (pid {b.pid} on {b.host}): let it finish first")
        count = device_count(devices, device)
        launch = max(sweep.launches(folder), default=-1) + 1
        job = [a for a in overrides if _key(a) not in ("devices", "resume")]
        job += [f"resume={found}", f"devices={_devices_text(devices)}"]
        return [_compose(found, folder, launch, count, job, rest)]
    count = device_count(devices, device)
    out = []
    for job in points(overrides, multirun):
        sid, folder = sweep.create(results, _plain(devices), count)
        out.append(_compose(sid, folder, 0, count, job, rest))
    return out


def require_launcher(overrides: list[str]) -> None:
    """Refuse, before any sweep folder exists, a launcher whose Hydra plugin is not installed: otherwise each
    shard fails inside Hydra and the sweep only says its shards never finished."""
    name = str(_value(overrides, "hydra/launcher") or "joblib")
    module, package = LAUNCHER_PLUGINS.get(name, ("", ""))
    if module and importlib.util.find_spec(module) is None:
        raise PlanError(
            f"hydra/launcher={name} runs the shards through {package}, which is not installed here: "
            f'pip install {package} (or pip install "tierbench[cluster]")'
        )


def _plain(devices: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(devices) if OmegaConf.is_list(devices) else devices


def _devices_text(devices: Any) -> str:
    value = _plain(devices)
    return "[" + ",".join(str(i) for i in value) + "]" if isinstance(value, list) else str(value)


def _compose(sid: str, folder: Path, launch: int, count: int, job: list[str], flags: list[str]) -> Launch:
    keys = {_key(a) for a in job}
    argv = [*flags, "--multirun", *job]
    argv += [
        "shard.index=" + ",".join(str(i) for i in range(count)),
        f"shard.count={count}",
        f"shard.sweep={sid}",
        f"shard.launch={launch}",
        f"hydra.sweep.dir={_quote(str(folder))}",
    ]
    if "hydra/launcher" not in keys:
        argv.append("hydra/launcher=joblib")
    launcher = _value(job, "hydra/launcher") if "hydra/launcher" in keys else "joblib"
    if launcher == "joblib" and "hydra.launcher.n_jobs" not in keys:
        argv.append(f"hydra.launcher.n_jobs={count}")
    return Launch(sid, folder, launch, count, argv)


def outcome(one: Launch) -> tuple[int, str]:
    """The launch's exit code (the worst of its shards'; 1 for a shard that died or never reported) and a
    line per shard."""
    beats = {b.index: b for b in sweep.beats(one.folder) if b.launch == one.launch}
    worst, lines = 0, []
    for index in range(one.count):
        b = beats.get(index)
        if b is None or b.code is None:
            worst = max(worst, 1)
            lines.append(f"  shard {index}/{one.count}: never finished" + (f" (run {b.run_id})" if b else ""))
            continue
        worst = max(worst, b.code)
        where = f"GPU {b.device_index} ({b.device_uuid})" if b.device_index is not None else b.device
        said = f": {b.error}" if b.error else ""
        lines.append(f"  shard {b.label}: exit {b.code} on {where}, run {b.run_id or '-'}{said}")
    return worst, "\n".join(lines)


def run_all(launches: list[Launch], invoke: Callable[[list[str]], int], results_dir: str, table: bool) -> int:
    """Run each launch through Hydra (`invoke`), then say how each shard ended; the worst exit code."""
    worst = 0
    for one in launches:
        log.info("sweep %s: launch %d over %d shards", one.sweep, one.launch, one.count)
        try:
            code = invoke(one.argv)
        except SystemExit as exc:  # Hydra reported a job that failed or died, and exits
            code = exc.code if isinstance(exc.code, int) else 1
        shards_code, lines = outcome(one)
        code = 130 if code == 130 else max(code, shards_code)
        print(f"sweep {one.sweep} (launch {one.launch}):\n{lines}", file=sys.stderr if code else sys.stdout)
        if code:
            print(f"tierbench run: finish the sweep with: tierbench run resume={one.sweep}", file=sys.stderr)
        else:
            if table:
                print(sweep_table(one.sweep, results_dir), flush=True)
            print(f"one logical run: tierbench summary {one.sweep}")
        worst = max(worst, code)
        if code == 130:
            break
    return worst


def sweep_table(sweep_id: str, results_dir: str) -> str:
    """The terminal table of a sweep's shard runs as one run."""
    from ..show import table as tables
    from ..store import runmeta

    folders = sweep_runs(results_dir, sweep_id)
    records = sorted(read_runs(folders), key=lambda r: r.time)
    return tables.render(records, runmeta.read(folders[0]) if folders else None)
