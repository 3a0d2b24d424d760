"""A real interrupt (Ctrl-C, SIGINT) told apart from an exception that a provider raised itself.

A provider's code may raise anything: SystemExit from a library that calls sys.exit, KeyboardInterrupt
or another BaseException of its own (asyncio's CancelledError, a test framework's outcome). Each one is
that provider's failure, recorded as such, and the run goes on. Only an interrupt the process received
ends a run. While `watch()` is active (as `tierbench run` does), SIGINT is noted before it raises, so a
KeyboardInterrupt without one is the provider's; outside it (the library API, asv) every
KeyboardInterrupt is taken as real.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_state = {"watching": False, "received": False}


def _on_sigint(signum: int, frame: Any) -> None:
    _state["received"] = True
    raise KeyboardInterrupt


@contextmanager
def watch() -> Iterator[None]:
    """Note every SIGINT while the block runs (main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    saved = dict(_state)
    _state.update(watching=True, received=False)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _state.update(saved)


def is_real(exc: BaseException) -> bool:
    """Whether exc is an interrupt the process received (which ends the run), not a provider's failure."""
    return isinstance(exc, KeyboardInterrupt) and (_state["received"] or not _state["watching"])


def reraise_real(exc: BaseException) -> None:
    """Raise exc again if it is a real interrupt; return for any other exception (a provider's failure)."""
    if is_real(exc):
        raise exc
