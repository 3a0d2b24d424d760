"""`tierbench run`: a Hydra app (overrides and --multirun sweeps) that plans, measures and reports.

Plugins are loaded before Hydra composes the config, since their families add config sections: their
names come from the `plugins=[...]` override (and, with `resume=`, from the resumed run's config).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("tierbench")


def conf_dir() -> str:
    """The config tree, installed as the package tierbench.conf (the folder conf/ of the checkout)."""
    import tierbench.conf

    return str(Path(tierbench.conf.__file__).resolve().parent)


def _override_value(argv: list[str], key: str) -> object | None:
    """The value an override `key=...` (or `+key=...`) gives on the command line, parsed as Hydra would."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    wanted = [a for a in argv if a.split("=", 1)[0].lstrip("+~") == key and "=" in a]
    if not wanted:
        return None
    parsed = OverridesParser.create().parse_overrides([wanted[-1]])[0]
    return parsed.value()


def plugin_names(argv: list[str]) -> list[str]:
    """Plugins named by `plugins=[...]`, and those of the config a `resume=` run or sweep saved."""
    from ..store.reading import RUNS_ROOT, resume_target

    names = _override_value(argv, "plugins") or []
    if isinstance(names, str):
        names = [names]
    resume = _override_value(argv, "resume")
    if resume:
        saved = resume_target(str(resume), str(_override_value(argv, "results_dir") or RUNS_ROOT)).config
        try:
            names = [*names, *(OmegaConf.load(saved).get("plugins") or [])] if saved is not None else names
        except Exception:  # noqa: BLE001 - a missing or broken saved config is reported when the run is opened
            pass
    return [str(n) for n in dict.fromkeys(names)]


def decide_interpreter(argv: list[str]) -> None:
    """On a CPU, Triton's kernels run only through its interpreter (checked, never timed). Decided before
    any plugin defines a Triton kernel: triton.jit reads TRITON_INTERPRET when it decorates. The asv suite
    decides it here too, from its overrides, so asv runs a plugin's kernels as `tierbench run` does."""
    import torch

    device = str(_override_value(argv, "device") or "auto")
    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        os.environ.setdefault("TRITON_INTERPRET", "1")


def execute(cfg: DictConfig, catalog) -> int:
    """One job, a sweep's shard or a run on the device it names: returns the process exit code (0 done, 1 a
    write failed, 2 bad input, 130 interrupted)."""
    from tierbench import interrupts

    from ..measure.plan import PlanError, resolve_device
    from ..scale.shard_job import is_sharded

    with interrupts.watch():  # a provider's own KeyboardInterrupt is its failure; only a real one stops
        if is_sharded(cfg):
            return execute_shard(cfg, catalog)
        try:
            device = resolve_device(cfg.device)
        except PlanError as exc:
            print(f"tierbench run: {exc}", file=sys.stderr)
            return 2
        return _measure(cfg, device, catalog)


def execute_shard(cfg: DictConfig, catalog) -> int:
    """One shard of a sweep: its device taken and pinned, its heartbeat kept, its outcome left for the
    command that launched it."""
    from ..measure.plan import PlanError
    from ..scale import sweep
    from ..scale.shard_job import ShardJob

    try:
        job = ShardJob.start(cfg)
    except (PlanError, sweep.SweepError) as exc:
        print(f"tierbench run: shard {cfg.shard.index}/{cfg.shard.count}: {exc}", file=sys.stderr)
        sweep.record_failure(cfg.results_dir, cfg.shard, str(exc))
        return 2
    code, error = 1, "stopped by an exception"
    try:
        code = _measure(cfg, job.device, catalog, job)
        error = "" if code == 0 else ("interrupted" if code == 130 else "see the job's log")
    finally:
        job.stop(code, error)
    return code


def _measure(cfg: DictConfig, device, catalog, shard=None) -> int:
    """One run in its session, from opening its folder to its report; what stops it, as an exit code."""
    from ..measure.isolation import HarnessError
    from ..measure.plan import PlanError
    from ..measure.session import RunSession
    from ..store.runfolder import RunFolderError

    try:
        session = RunSession.open(cfg, device, catalog, shard)
    except (PlanError, RunFolderError, FileExistsError, FileNotFoundError) as exc:
        print(f"tierbench run: {exc}", file=sys.stderr)
        return 2
    try:
        session.run()
        session.finish()
    except KeyboardInterrupt:
        _keep_meta(session)
        print(
            f"\ntierbench run: interrupted; {session.count()} records are safe in {session.run_dir}. "
            f"Finish with: tierbench run resume={session.run_dir}",
            file=sys.stderr,
        )
        return 130
    except HarnessError as exc:  # the measuring process could not start, or failed outside any provider
        _keep_meta(session)
        print(
            f"\ntierbench run: {exc}. {_safe_count(session)} records are safe in {session.run_dir}; "
            f"finish with: tierbench run resume={session.run_dir}",
            file=sys.stderr,
        )
        return 1
    except OSError as exc:  # the run's own files: a full disk, a folder removed or made read-only
        _keep_meta(session)
        print(
            f"\ntierbench run: could not write to {exc.filename or session.run_dir}: {exc.strerror or exc}. "
            f"{_safe_count(session)} records are safe in {session.run_dir} (a failed write leaves no partial record). "
            f"Free some space, then finish with: tierbench run resume={session.run_id}",
            file=sys.stderr,
        )
        return 1
    finally:
        session.close()
    return 0


def _keep_meta(session) -> None:
    """Keep run.json true after an interrupt or a failed write, where the disk still takes it."""
    try:
        session.interrupted()
    except OSError:
        pass


def _safe_count(session) -> int | str:
    try:
        return session.count()
    except OSError:
        return "the"


def main(argv: list[str]) -> int:
    from ..catalog import build
    from ..config import register_configs
    from ..plugins import PluginError
    from .config_keys import UnknownKey, check_overrides

    decide_interpreter(argv)
    try:
        catalog = build(plugin_names(argv))
    except PluginError as exc:
        print(f"tierbench run: {exc}", file=sys.stderr)
        return 2
    if any(a in ("-h", "--help") for a in argv):
        from .run_help import render

        print(render(Path(conf_dir()), catalog), end="")
        return 0
    schema = register_configs(catalog.families)
    try:
        check_overrides(argv, schema, Path(conf_dir()))
    except UnknownKey as exc:
        print(f"tierbench run: {exc}", file=sys.stderr)
        return 2
    from ..measure.plan import PlanError
    from ..scale import launch

    try:
        launches = launch.plan(argv)
    except PlanError as exc:
        print(f"tierbench run: {exc}", file=sys.stderr)
        return 2
    if launches is None:
        return _hydra(argv, catalog, in_process=True)
    from ..store.reading import RUNS_ROOT

    results = _override_value(argv, "results_dir") or RUNS_ROOT
    table = _override_value(argv, "table") is not False
    return launch.run_all(launches, lambda args: _hydra(args, catalog), str(results), table)


def _hydra(argv: list[str], catalog, in_process: bool = False) -> int:
    """The Hydra app over these arguments (one run, or a multirun through the configured launcher).

    in_process: its jobs run here (not a sharded sweep's launcher), so a Hydra exit before any job ran is
    a config it could not compose: bad input, exit 2."""
    status = {"code": 0, "in_job": False}

    @hydra.main(config_path=conf_dir(), config_name="config", version_base="1.3")
    def app(cfg: DictConfig) -> None:
        status["in_job"] = True
        code = execute(cfg, catalog)
        status["code"] = max(status["code"], code)
        status["in_job"] = False
        if code == 130:
            raise KeyboardInterrupt  # stop a sweep too

    saved = sys.argv
    sys.argv = ["tierbench run", *[a if a != "--hydra-help" else "--help" for a in argv]]
    try:
        app()
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:
        # Hydra exits 1 when it cannot compose the config (an unknown key, group or value: bad input, which
        # is 2 here); an error escaping a job itself stays 1.
        if in_process and exc.code == 1 and not status["in_job"]:
            return 2
        raise
    finally:
        sys.argv = saved
    return status["code"]
