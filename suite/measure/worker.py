"""The measuring process of an isolated run (suite/measure/isolation.py): providers run here, never in the run's own.

Started by the run as `python -m tierbench.suite.measure.worker FD` (a fresh interpreter, so CUDA works in it), it
reads a `WorkerSpec` from the socket FD, rebuilds the catalog and the plan from the run's config, brings the
GPU to its steady state, says it is ready, then measures each case it is sent with the runner's own
`measure_case`: one timer, every provider of the case in the same rotating rounds. It tells the run each
step before it starts (whose, and what), and each record as it is made. Whatever a provider does to this
process (a crash, a hang, `os._exit`) costs the run only the step it was in.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where the worker needs them, after it has said it is alive
    from ..providers.base import Provider
    from ..store.records import Measurement


@dataclass
class WorkerSpec:
    """What a worker needs to measure a run's cases as the run itself would."""

    config: dict[str, Any]  # the run's config, resolved (suite, families, timing, compiler, seed, ...)
    plugins: list[str]  # the run's plugin modules (entry points included), loaded as the run loaded them
    device: str  # "cpu", "cuda" or "cuda:<index>" (a shard's pinned GPU)
    run_id: str
    run_dir: str  # absolute
    env: dict[str, Any]
    ceilings: Any  # suite.ceilings.Ceilings, measured once by the run
    sys_path: list[str] = field(default_factory=list)  # where the run found its plugins
    sweep: str | None = None
    shard: str | None = None


def _die_with_parent() -> None:
    """Linux: this process gets SIGKILL when the run's process ends, however it ends (kill -9 included)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() == 1:  # the run ended before the call above: nothing to measure for
        os._exit(0)


def _setup(spec: WorkerSpec, send) -> tuple[Any, dict[str, Any]]:
    """The runner's context and the run's planned cases by id, as the run built them."""
    import torch
    from omegaconf import OmegaConf

    from tierbench.timing import bring_to_steady_state, make_timer

    from ..catalog import build
    from ..config import run_schema
    from ..ops.base import choice_name
    from ..store.reading import read_records
    from .plan import make_plan, timing_settings
    from .runner import RunContext

    for entry in reversed(spec.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    catalog = build(spec.plugins, entry_points=False)
    schema = OmegaConf.structured(run_schema(catalog.families))
    OmegaConf.set_struct(schema, False)  # keys the run was given with `+key=...` come along
    cfg = OmegaConf.merge(schema, OmegaConf.create(spec.config))
    plan = {pc.case.case_id: pc for pc in make_plan(cfg, catalog)}
    device = torch.device(spec.device)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    timing = timing_settings(cfg.timing)
    send(("step", None, "bringing the device to its steady state"))
    bring_to_steady_state(device, timing.steady_state_s)
    ctx = RunContext(
        run_id=spec.run_id,
        run_dir=Path(spec.run_dir),
        device=device,
        timer=make_timer(timing, device),
        ceilings=spec.ceilings,
        env=spec.env,
        seed=int(cfg.seed),
        suite=str(cfg.suite),
        tiers=dict(catalog.tiers),
        metrics=tuple(choice_name(m) for m in cfg.get("metrics") or ()),
        sweep=spec.sweep,
        shard=spec.shard,
        step=lambda provider, what: send(("step", provider, what)),
    )
    # The run's records so far (a worker started again after a lost one, a resumed run): what its
    # composites' best mixes are chosen from; the records this worker makes are noted as it makes them.
    for record in read_records(ctx.run_dir):
        ctx.note(record)
    return ctx, plan


def _keeps_memory(record: Measurement, providers: list[Provider]) -> str:
    """Why this process must make way for a new one after `record`, or ''.

    A runtime of its own (JAX, TVM, IREE) allocates from a pool beside PyTorch's and keeps what it grew to
    after running out of memory: every provider measured after it here would be starved of that memory.
    """
    provider = next((p for p in providers if p.name == record.provider), None)
    if record.status != "oom" or provider is None or provider.stream_join is None:
        return ""
    return f"{record.provider} ran out of memory and its runtime keeps the memory it had grown to"


def _serve(conn: Connection) -> None:
    from tierbench import interrupts

    from .runner import _release, measure_case

    spec: WorkerSpec = conn.recv()
    home = os.getcwd()
    # This process is in a session of its own (no terminal's Ctrl-C reaches it): a KeyboardInterrupt here
    # is always a provider's own, its failure and its record.
    with interrupts.watch():
        ctx, plan = _setup(spec, conn.send)
        conn.send(("ready",))
        while True:
            message = conn.recv()
            if message[0] == "stop":
                return
            _, case_id, names = message
            planned = plan[case_id]
            providers = [p for p in planned.providers if p.name in names]
            profiles: dict = {}
            try:
                for record in measure_case(planned.case, providers, ctx, planned.op, profiles):
                    conn.send(("record", record, profiles.pop(record.key, None)))
                    if why := _keeps_memory(record, providers):
                        conn.send(("renew", why))
                        return
            except OSError as exc:  # the run's own files (ncu's reports in the run folder): the run decides
                conn.send(("oserror", exc.errno, exc.strerror, exc.filename))
                return
            finally:
                with contextlib.suppress(OSError):
                    os.chdir(home)
            conn.send(("done",))
            _release(ctx.device)  # while the run writes the case's records


def main(argv: list[str]) -> int:
    _die_with_parent()
    conn = Connection(int(argv[0]))
    try:
        _serve(conn)
    except (EOFError, BrokenPipeError, ConnectionResetError):  # the run went away: nothing to tell
        return 0
    except BaseException:  # a failure of the harness itself: the run shows it and stops
        with contextlib.suppress(OSError):
            conn.send(("harness", traceback.format_exc()))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
