"""`tierbench run`: a Hydra app (overrides and --multirun sweeps) that plans, measures and reports."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from .config import register_configs

log = logging.getLogger("tierbench")


def conf_dir() -> str:
    """The config tree, installed as the package tierbench.conf (the folder conf/ of the checkout)."""
    import tierbench.conf

    return str(Path(tierbench.conf.__file__).resolve().parent)


def execute(cfg: DictConfig) -> int:
    """One job: returns the process exit code (0 done, 2 bad config, 130 interrupted)."""
    # Imported here so `tierbench run --help` and config errors stay fast.
    from .plan import PlanError, resolve_device

    try:
        device = resolve_device(cfg.device)
    except PlanError as exc:
        print(f"tierbench run: {exc}", file=sys.stderr)
        return 2
    if device.type == "cpu":
        # Triton's kernels run on the CPU only through its interpreter (checked, never timed).
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from .session import RunSession

    try:
        session = RunSession.open(cfg, device)
    except (PlanError, FileExistsError, FileNotFoundError) as exc:
        print(f"tierbench run: {exc}", file=sys.stderr)
        return 2
    try:
        session.run()
    except KeyboardInterrupt:
        print(
            f"\ntierbench run: interrupted; {session.count()} records are safe in {session.run_dir}. "
            f"Finish with: tierbench run resume={session.run_id}",
            file=sys.stderr,
        )
        return 130
    session.finish()
    return 0


def main(argv: list[str]) -> int:
    register_configs()
    status = {"code": 0}

    @hydra.main(config_path=conf_dir(), config_name="config", version_base="1.3")
    def app(cfg: DictConfig) -> None:
        code = execute(cfg)
        status["code"] = max(status["code"], code)
        if code == 130:
            raise KeyboardInterrupt  # stop a sweep too

    saved = sys.argv
    sys.argv = ["tierbench run", *argv]
    try:
        app()
    except KeyboardInterrupt:
        return 130
    finally:
        sys.argv = saved
    return status["code"]
