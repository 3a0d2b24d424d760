"""A launch-config tuner that times its candidates in turns, the way the harness times providers.

Triton's autotuner times each candidate once, one after another. On a card at its power cap the clocks
move between those timings, and candidates within a percent of each other trade places from one process
to the next: the norm suite's pick for RMSNorm 16384x8192 flipped between two chunk widths 0.5% apart in
three runs of one commit, and the harness read the slower pick as a step. This tuner times every
candidate in several short turns in a rotating order, with L2 flushed before each call, and keeps the
lowest median over all turns, so drift falls on every candidate alike. Each candidate's launch is replayed
from a CUDA graph, as the harness replays providers: a kernel of a few microseconds, launched from Python
one call at a time, is timed partly on the host's launch path, which is the same for every candidate
and only adds noise to the pick.

It keeps the interface the launchers use of Triton's autotuner: `tuner[grid](*args, **meta)`,
`.best_config` (the config of the latest launch) and `.cache` (key -> config).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

import torch
import triton
from triton.compiler.errors import CompileTimeAssertionFailure
from triton.runtime.errors import OutOfResources, PTXASError

from tierbench.timing import CacheFlush, event_times, graph_replay, rotations

from ._common import INTERPRET

K = TypeVar("K", bound=Hashable)

# Each candidate is timed in TURNS turns of about TURN_MS of kernel time (at least MIN_REPS calls each).
TURNS = 7
TURN_MS = 3.0
MIN_REPS = 3

PruneFn = Callable[..., list[triton.Config]]  # prune(configs, named_args, **meta), as Triton's autotuner calls it
# What a compiler may reject for one shape (too much shared memory, too many registers): that candidate is skipped.
_UNFIT = (OutOfResources, PTXASError, CompileTimeAssertionFailure)


# The best config depends on how many rows each SM gets, not only on the width: on the H200 a pick made at
# 4096 rows ran LayerNorm 16384x4096 6% slower than the pick made there. Keying on the row count would
# tune again for every batch size, so the norm kernels keep one tuner per band of rows per SM instead.
# Bands: fewer than 8 rows per SM, fewer than 64, more.
ROWS_PER_SM_BANDS = (8, 64)


def rows_per_sm_band(n_rows: int, sms: int) -> int:
    """Index of the tuner for this many rows on a device with `sms` SMs."""
    return sum(n_rows >= band * sms for band in ROWS_PER_SM_BANDS)


def time_in_turns(
    calls: Mapping[K, Callable[[], object]],
    device: torch.device,
    turns: int = TURNS,
    turn_ms: float = TURN_MS,
) -> dict[K, float]:
    """Median milliseconds of each call over `turns` rotating turns (CUDA events around each call, the L2
    flushed before each: the harness's own primitives, tierbench.timing)."""
    flush = CacheFlush(device)
    keys = list(calls)

    def timed(call: Callable[[], object], reps: int) -> list[float]:
        return event_times(call, reps, flush, device)

    # Calls per turn from a first estimate, so each candidate's turn lasts about turn_ms.
    reps = {k: max(MIN_REPS, int(turn_ms / max(statistics.median(timed(calls[k], MIN_REPS)), 1e-3))) for k in keys}
    samples: dict[K, list[float]] = {k: [] for k in keys}
    for order in rotations(len(keys), turns):
        for i in order:
            samples[keys[i]] += timed(calls[keys[i]], reps[keys[i]])
    return {k: statistics.median(v) for k, v in samples.items()}


class TurnTuner:
    """Picks, per key, the fastest of a kernel's candidate configs (see the module's docstring).

    key: names of the kernel arguments whose values select a pick (tensor dtypes are added);
    prune(configs, named_args, **meta) -> the candidates that suit this call (named_args: the arguments by name).
    Candidates must be safe to launch repeatedly on the same arguments (no in-place updates).
    """

    def __init__(self, fn: triton.JITFunction, configs: Sequence[triton.Config], key: Sequence[str], prune: PruneFn):
        self.fn = fn
        self.configs = list(configs)
        self.key = tuple(key)
        self.prune = prune
        self.cache: dict[tuple, triton.Config] = {}
        self.timings: dict[tuple, dict[triton.Config, float]] = {}  # key -> candidate -> median ms
        self.best_config: triton.Config | None = None
        self._arg_index = {name: i for i, name in enumerate(fn.arg_names)}

    def __getitem__(self, grid: Callable[[dict[str, Any]], tuple[int, ...]]) -> Callable[..., object]:
        return lambda *args, **meta: self.run(grid, *args, **meta)

    def run(self, grid: Callable[[dict[str, Any]], tuple[int, ...]], *args: Any, **meta: Any) -> object:
        # Every launch comes through here: the key is read straight from the arguments, no dicts built.
        key = tuple(meta[k] if k in meta else args[self._arg_index[k]] for k in self.key)
        key += tuple(str(a.dtype) for a in args if isinstance(a, torch.Tensor))
        config = self.cache.get(key)
        if config is None:
            named = dict(zip(self.fn.arg_names, args))
            config = self._choose(key, grid, args, meta, self.prune(self.configs, named, **meta))
        self.best_config = config
        return self._launch(grid, config, args, meta)

    def _launch(self, grid: Callable, config: triton.Config, args: tuple, meta: dict) -> object:
        full = {**meta, **config.all_kwargs()}
        return self.fn[grid(full)](*args, **full)

    def _choose(self, key: tuple, grid: Callable, args: tuple, meta: dict, candidates: list[triton.Config]):
        if len(candidates) == 1 or INTERPRET:
            self.cache[key] = candidates[0]
            return candidates[0]
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                f"{self.fn.__name__}: a new shape ({key}) cannot be tuned while a CUDA graph is being captured; "
                "call it once outside the capture first"
            )
        calls = {}
        for config in candidates:
            try:
                self._launch(grid, config, args, meta)  # compiles it
            except _UNFIT:
                continue
            call = lambda config=config: self._launch(grid, config, args, meta)  # noqa: E731
            calls[config] = graph_replay(call, device) or call
        if not calls:
            raise RuntimeError(f"{self.fn.__name__}: no candidate config fits this device for {key}")
        timings = time_in_turns(calls, device)
        del calls  # frees the graphs
        self.timings[key] = timings
        self.cache[key] = min(timings, key=timings.get)
        return self.cache[key]
