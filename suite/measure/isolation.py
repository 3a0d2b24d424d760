"""Providers measured in a worker process under a time limit: a crash, a hang or an exit costs one record.

A provider is untrusted code (a plugin's kernel, a library's new release). `tierbench run` therefore
measures in a worker process of its own (suite/measure/worker.py), started once per run and again only after one
was lost, and writes every record itself as the worker reports it. The worker runs the runner as it runs in
process, one timer timing a case's providers together in rotating rounds, and says before each step whose
step it is and what it is (preparing, profiling, warming up, timed round 3 of 5, ...). So when the worker dies
(a segfault, os.abort, os._exit, a library calling exit) or a measurement overruns its time limit
(`time_limit_s`: everything one (case, provider) takes, its preparation, check, profile and turns in the
rounds), the run knows whose step it was: that provider's record is `error` saying what happened and
where, the worker is killed and started again, and the case goes on with the providers it had not
recorded yet (measured again from their inputs, in the new worker). Records already written stay. A worker
also makes way for a new one after a provider with a runtime of its own ran out of memory (that runtime's
pool keeps what it grew to, which would starve every provider measured after it in that process). When a
case's own step (its inputs, its reference) dies in a worker that measured other cases before, the case is
tried once more in a new worker before its providers are blamed: an earlier provider may have left the
process broken (a runtime whose stream is in an error state aborts the next allocation).

Nothing of this is inside a timed repetition: a step is announced between them. The worker is a fresh
interpreter (not a fork), so CUDA works in it whatever the run's process did with the GPU.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection

from ..config import DEFAULT_TIME_LIMIT_S
from ..providers.base import Provider
from ..store.records import Measurement
from ..text import plain
from . import profiling
from .plan import PlannedCase
from .runner import RunContext, new_record
from .worker import WorkerSpec

log = logging.getLogger("tierbench")

_CASE_STEP = None  # the step's owner when it is the case's own (inputs, reference), not a provider's
STARTING = "starting the measuring process"  # the first step of every worker


class HarnessError(RuntimeError):
    """The worker could not start (or said something else than that it was ready): a fault of the harness
    or of the machine, not of a provider, which ends the run; the message says what happened."""


class _Lost(Exception):
    """The worker is gone (died, or killed at the time limit) during `provider`'s step `what`."""

    def __init__(self, provider: str | None, what: str, how: str) -> None:
        super().__init__(how)
        self.provider, self.what, self.how = provider, what, how


def _death(returncode: int | None) -> str:
    """How a process ended, for a person: a signal by name and meaning, or its exit code."""
    if returncode is None:
        return "its process stopped answering"
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        meaning = signal.strsignal(number) or ""
        return f"its process was killed by {name}" + (f" ({meaning})" if meaning else "")
    return f"its process exited with code {returncode}"


class Worker:
    """One worker process and the socket to it; `events()` reads it against the time limit."""

    def __init__(self, spec: WorkerSpec, time_limit_s: float) -> None:
        self.time_limit_s = time_limit_s
        ours, theirs = socket.socketpair()
        self.started = time.perf_counter()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tierbench.suite.measure.worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # no terminal signal reaches it; killed as a group with what it started
            )
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.step: tuple[str | None, str] = (_CASE_STEP, STARTING)
        self.since = time.perf_counter()
        self.spent: dict[str | None, float] = {}
        self.cases = 0  # cases started in this process
        self.conn.send(spec)

    def _charge(self) -> None:
        now = time.perf_counter()
        owner = self.step[0]
        self.spent[owner] = self.spent.get(owner, 0.0) + now - self.since
        self.since = now

    def events(self) -> Iterator[tuple]:
        """The worker's messages, each step charged to its owner's time; _Lost when the worker dies, or is
        killed because the step's owner ran past the time limit."""
        while True:
            owner, what = self.step
            left = self.time_limit_s - self.spent.get(owner, 0.0) - (time.perf_counter() - self.since)
            if not self.conn.poll(max(left, 0.0)):
                self._charge()
                self.kill()
                raise _Lost(
                    owner,
                    what,
                    f"still running after the time limit of {self.time_limit_s:g} s per measurement "
                    "(time_limit_s); its process was stopped",
                )
            try:
                message = self.conn.recv()
            except (EOFError, OSError) as exc:
                raise _Lost(owner, what, _death(self._reap())) from exc
            except Exception as exc:  # noqa: BLE001 - a garbled message: the process is not to be trusted
                self.kill()
                raise _Lost(owner, what, f"its process sent something unreadable ({type(exc).__name__})") from exc
            self._charge()
            if message[0] == "step":
                self.step = (message[1], message[2])
                self.spent.setdefault(message[1], 0.0)
                continue
            if message[0] == "harness":
                self._reap()
                log.debug("the measuring process failed while %s:\n%s", what, message[1])
                raise _Lost(owner, what, f"the harness failed in its process ({_last_line(message[1])})")
            yield message

    def start_case(self, case_id: str, providers: list[str]) -> None:
        self.cases += 1
        self.step = (_CASE_STEP, "starting the case")
        self.since = time.perf_counter()
        self.spent = {}
        self.conn.send(("case", case_id, providers))

    def _reap(self) -> int | None:
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # closed its socket but lives on: not to be trusted either
            self.kill()
            return None

    def kill(self) -> None:
        """The worker and whatever it started, gone."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.conn.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        """Let the worker end on its own (it measured everything), or make it."""
        with contextlib.suppress(OSError):
            self.conn.send(("stop",))
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


def _last_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else "no account"


class IsolatedMeasure:
    """`run_plan`'s way to measure a case (runner.CaseMeasure) through a worker process.

    The run's own `ctx` builds the records of lost providers and fills in what only the run knows (the
    sweep's shards running beside it); a worker is started when first needed and after each one lost.
    """

    def __init__(self, spec: WorkerSpec, ctx: RunContext, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> None:
        self.spec, self.ctx, self.time_limit_s = spec, ctx, time_limit_s
        self.worker: Worker | None = None
        self.starts: list[float] = []  # seconds from each worker's start to its first word of being ready

    def __enter__(self) -> IsolatedMeasure:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.close(kill=kind is not None)

    def close(self, kill: bool = False) -> None:
        """The worker told to stop (or, after an interrupt or a failure, killed)."""
        if self.worker is not None:
            self.worker.kill() if kill else self.worker.stop()
            self.worker = None

    def _ready_worker(self) -> Worker:
        if self.worker is not None:
            return self.worker
        try:
            worker = Worker(self.spec, self.time_limit_s)
        except OSError as exc:  # no process at all (no memory for it, an interpreter gone)
            raise HarnessError(f"the measuring process could not start: {exc.strerror or exc}") from None
        try:
            message = next(worker.events())
        except _Lost as lost:
            raise HarnessError(f"the measuring process could not start: {lost.how} while {lost.what}") from None
        except BaseException:
            worker.kill()
            raise
        if message[0] != "ready":
            worker.kill()
            raise HarnessError(f"the measuring process said {message[0]!r} before it was ready")
        self.starts.append(time.perf_counter() - worker.started)
        self.worker = worker
        return worker

    def __call__(
        self,
        planned: PlannedCase,
        providers: list[Provider],
        profiles: dict[tuple[str, str], profiling.Profile],
    ) -> Iterator[Measurement]:
        case = planned.case
        work = planned.op.work(case)
        seen = self.ctx.beside()
        pending = {p.name: p for p in providers}
        retried = False
        while pending:
            try:
                worker = self._ready_worker()
                worker.start_case(case.case_id, list(pending))
                for message in worker.events():
                    if message[0] == "done":  # whatever it left unmeasured is recorded, never asked again
                        for provider in pending.values():
                            reason = "the measuring process did not measure it (no such provider in its plan)"
                            yield new_record(self.ctx, case, provider, work, "error", reason, self.ctx.beside(seen))
                        return
                    if message[0] == "oserror":
                        raise OSError(message[1], message[2], message[3])
                    if message[0] == "renew":  # the rest of the case is measured in a new process
                        log.warning(
                            "case %s: %s; the case goes on in a new process", plain(case.case_id), plain(message[1])
                        )
                        self.worker = None
                        worker.kill()
                        break
                    if message[0] == "record":
                        record: Measurement = message[1]
                        if record.provider not in pending or record.case_id != case.case_id:
                            continue  # not one this case asked for: never two records of one key
                        del pending[record.provider]
                        seen = self.ctx.beside(seen)
                        record.neighbours = seen
                        if message[2] is not None:
                            profiles[record.key] = message[2]
                        yield record
            except _Lost as lost:
                self.worker = None
                log.warning("case %s: %s while %s", plain(case.case_id), lost.how, plain(lost.what))
                # The case's own step lost in a process that measured other cases before: what killed it may
                # be what an earlier provider left there (a runtime's stream in an error state), so the case
                # is tried once more in a new process before its providers are blamed.
                if lost.provider is _CASE_STEP and worker.cases > 1 and not retried:
                    retried = True
                    log.warning("case %s: tried again in a new process", plain(case.case_id))
                    continue
                blamed = [pending[lost.provider]] if lost.provider in pending else list(pending.values())
                for provider in blamed:
                    del pending[provider.name]
                    whose = "" if lost.provider == provider.name else "in the case's own step, "
                    reason = f"{lost.how} {whose}while {lost.what}; the run went on in a new process"
                    yield new_record(self.ctx, case, provider, work, "error", reason, self.ctx.beside(seen))
