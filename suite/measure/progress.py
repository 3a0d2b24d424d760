"""What a run says while it runs: one live line on a terminal, plain lines elsewhere (CI logs, files).

The runner calls `case` when a case starts and `record` as each measurement is written; a warning a
record carries (a spread too wide to trust its median) is said as soon as it is known.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import IO, Any

from ..store.reading import timed
from ..store.records import Measurement
from ..store.verdicts import verdict
from ..text import plain

log = logging.getLogger("tierbench")


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _label(case: Any) -> str:
    """A case as a progress line names it; a plugin's names may hold control characters: shown as escapes."""
    return plain(f"{case.op} {case.label} ({case.params.get('dtype', '')}, {case.mode})")


def _outcome(r: Measurement) -> str:
    if timed(r):
        return f"ok {r.median_ms:.4g} ms"
    return verdict(r)


class PlainProgress:
    """A log line per case and per measurement, with the time spent and an estimate of what is left."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.started = total, 0, time.monotonic()
        self.label = ""

    def estimate(self) -> str:
        elapsed = time.monotonic() - self.started
        if not self.done:
            return f"{_clock(elapsed)} elapsed"
        left = elapsed / self.done * (self.total - self.done)
        return f"{_clock(elapsed)} elapsed, ~{_clock(left)} left"

    def case(self, index: int, count: int, case: Any, providers: list[str]) -> None:
        self.label = _label(case)
        log.info("[%d/%d] %s: %s", index, count, self.label, plain(", ".join(providers)))

    def record(self, r: Measurement) -> None:
        self.done += 1
        log.info("  %d/%d %s: %s (%s)", self.done, self.total, plain(r.provider), _outcome(r), self.estimate())
        if r.warning:
            log.warning("  %s %s: %s", self.label, plain(r.provider), plain(r.warning))

    def close(self) -> None:
        pass


class LiveProgress(PlainProgress):
    """One line, redrawn in place (tqdm): the case and provider just measured, time spent and left."""

    def __init__(self, total: int, stream: IO[str] | None = None) -> None:
        from tqdm import tqdm

        super().__init__(total)
        self.stream = stream or sys.stderr
        self.bar = tqdm(
            total=total,
            file=self.stream,
            unit="measurement",
            dynamic_ncols=True,
            bar_format="{n}/{total} [{elapsed}<{remaining}] {desc}",
        )
        # A case can take minutes (compilation, autotuning): the clock on the line keeps moving meanwhile.
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self.bar.refresh()

    def case(self, index: int, count: int, case: Any, providers: list[str]) -> None:
        self.label = _label(case)
        self.bar.set_description_str(f"case {index}/{count} {self.label}: {len(providers)} providers")

    def record(self, r: Measurement) -> None:
        self.done += 1
        self.bar.set_description_str(f"{self.label} · {plain(r.provider)}: {_outcome(r)}", refresh=False)
        self.bar.update(1)
        if r.warning:
            self.bar.write(f"warning: {self.label} {plain(r.provider)}: {plain(r.warning)}", file=self.stream)

    def close(self) -> None:
        self._stop.set()
        self._ticker.join()
        self.bar.close()


def for_run(total: int, live: bool | None = None, stream: IO[str] | None = None) -> PlainProgress:
    """A live line where `stream` (stderr) is a terminal, plain log lines otherwise."""
    stream = stream or sys.stderr
    if live is None:
        live = hasattr(stream, "isatty") and stream.isatty()
    return LiveProgress(total, stream) if live else PlainProgress(total)
