"""One way to time every provider, whatever its tier, and the primitives the kernels' tuner shares.

GPU: CUDA events around each repetition, the L2 cache flushed before each one, warm-up by time, each call
replayed from a CUDA graph where it can be captured, and the providers of a case taking turns across rounds
so that clock and power drift hits all of them alike. CPU: the same schedule with a plain monotonic clock.

This module knows no op, no tier and no config tree: `TimingSettings` is both the Hydra schema node of
`timing` and what the timers read, and kernels/ may import it (of tierbench it imports only
tierbench.interrupts, which tells a real interrupt from a provider's own exception).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .interrupts import reraise_real

# Fallback flush size when the device does not report its L2 (bytes): larger than any current GPU's L2.
_DEFAULT_FLUSH_BYTES = 256 << 20
# CPU caches are flushed by writing a buffer larger than any last-level cache before each repetition.
_CPU_FLUSH_BYTES = 64 << 20
# A warm-up or time budget longer than this could not finish a suite: refused when the config is composed.
MAX_BUDGET_MS = 60_000.0
MAX_STEADY_STATE_S = 600.0
# Counts bounded for the same reason: a provider is called at least rounds x min_reps times.
MAX_ROUNDS = 1000
MAX_REPS = 100_000


@dataclass
class TimingSettings:
    """How every provider is timed. Units are in the names."""

    name: str = "default"  # the preset's name, recorded with the run
    warmup_ms: float = 25.0  # milliseconds of untimed calls before a provider's first timed round
    rep_ms: float = 40.0  # timed budget of one round of one provider
    rounds: int = 5  # providers of a case take turns this many times
    min_reps: int = 5  # fewest repetitions of one round, however long a call takes
    max_reps: int = 500  # most repetitions of one round, however short a call is
    flush_l2: bool = True  # overwrite the L2 cache before each repetition, so no call finds its inputs there
    # GPU only: seconds of matmul load before the first measurement, so the card is at its power cap.
    steady_state_s: float = 3.0
    # GPU only: replay each provider's call from a CUDA graph, so host launch overhead (Python, dispatch)
    # is not timed; a call that cannot be captured is timed by plain launches (the record's `timer` says).
    cuda_graph: bool = True

    def problems(self) -> list[str]:
        """What makes these settings unusable (each names its key and the valid range); empty when fine."""
        out = []
        for key, value, low, high in (
            ("warmup_ms", self.warmup_ms, 0.0, MAX_BUDGET_MS),
            ("rep_ms", self.rep_ms, 0.0, MAX_BUDGET_MS),
            ("steady_state_s", self.steady_state_s, 0.0, MAX_STEADY_STATE_S),
        ):
            if not low <= value <= high:  # also refuses NaN
                out.append(f"timing.{key}={value} is outside [{low:g}, {high:g}]")
        for key, value, high in (
            ("rounds", self.rounds, MAX_ROUNDS),
            ("min_reps", self.min_reps, MAX_REPS),
            ("max_reps", self.max_reps, MAX_REPS),
        ):
            if not 1 <= value <= high:
                out.append(f"timing.{key}={value} is outside [1, {high}]")
        if self.min_reps > self.max_reps:
            out.append(f"timing.min_reps={self.min_reps} exceeds timing.max_reps={self.max_reps}")
        return out


Samples = dict[str, list[float] | BaseException]


class Watch:
    """What a timer tells its caller about each contender, always between timed repetitions, never inside one.

    `step(name, what)` comes before each of a contender's steps (building its call, capturing it, warming up,
    each round, the last call after the rounds), so a caller that limits or isolates contenders knows whose
    turn it is; `after(name)` comes when a step has ended, and an exception it raises drops that contender
    from the later rounds, as if its own call had raised it (a contender caught writing into its inputs).
    """

    def step(self, name: str, what: str) -> None:
        """Called before a contender's step."""

    def after(self, name: str) -> None:
        """Called when a contender's step has ended; raise to drop the contender."""


_QUIET = Watch()


@dataclass(frozen=True)
class Staged:
    """A call whose state must be built where it is timed: `build()` returns the call to time.

    A backward pass is timed this way: `build` runs the forward (on the stream the timer captures on, so
    the backward's kernels land in the graph) and returns the backward-only call.
    """

    build: Callable[[], Callable[[], Any]]


@dataclass(frozen=True)
class Ungraphed:
    """A call (or a Staged one) the timer must not capture in a CUDA graph: its library runs its device work
    through a runtime of its own (JAX, TVM, IREE, MAX), which a capture on the timer's stream would not see,
    or would see only in part. It is timed by plain launches between the events, its work ordered on the
    timer's stream as `method` says (the record's `timer` is "cuda-events+<method>")."""

    call: Callable[[], Any] | Staged
    method: str


# -- primitives shared with the kernels' tuner ---------------------------------------------------------


def rotations(n: int, rounds: int) -> list[list[int]]:
    """The order of n contenders in each round: rotated by one per round, so none is always first or last."""
    return [[(r + i) % n for i in range(n)] for r in range(rounds)] if n else [[] for _ in range(rounds)]


class CacheFlush:
    """Overwrites a buffer larger than the last-level cache, so every timed call starts from memory."""

    def __init__(self, device: torch.device) -> None:
        if device.type == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or _DEFAULT_FLUSH_BYTES
            self._buffer = torch.empty(max(2 * l2, 1 << 20), dtype=torch.int8, device=device)
        else:
            self._buffer = torch.empty(_CPU_FLUSH_BYTES, dtype=torch.int8)

    def __call__(self) -> None:
        self._buffer.zero_()


def graph_replay(
    fn: Callable[[], Any], device: torch.device, stream: torch.cuda.Stream | None = None
) -> Callable[[], Any] | None:
    """fn captured in a CUDA graph (after one warm-up call on the capture stream), or None where it cannot
    be captured (it syncs, or allocates in a way graphs refuse).

    Replaying a graph removes the host's launch path (Python, autotuner dispatch) from the timed region, as
    a serving stack running under CUDA graphs would; the kernels themselves are unchanged.
    """
    try:
        side = stream or torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            fn()  # libraries set up handles and workspaces outside the capture
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            fn()
        torch.cuda.synchronize(device)
    except BaseException as exc:  # not capturable: timed by plain launches, and the record says so
        reraise_real(exc)
        torch.cuda.synchronize(device)
        return None
    return graph.replay


def event_times(
    fn: Callable[[], Any], reps: int, flush: Callable[[], None] | None, device: torch.device
) -> list[float]:
    """Milliseconds of `reps` calls of fn, one CUDA event pair around each, the cache flushed before each."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if flush is not None:
            flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize(device)
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


# -- the timers ----------------------------------------------------------------------------------------


class CpuTimer:
    """Host clock around each call; for CPU providers only (GPU work would need a sync to be honest)."""

    kind = "cpu-clock"

    def __init__(self, settings: TimingSettings) -> None:
        self.settings = settings
        self.kinds: dict[str, str] = {}
        self.outputs: dict[str, Any] = {}
        self._flush = CacheFlush(torch.device("cpu")) if settings.flush_l2 else None

    def _per_call_ms(self, fn: Callable[[], Any]) -> float:
        """Milliseconds a repetition costs, its cache flush included: on a CPU writing 64 MiB takes longer
        than a small call, so repetitions sized by the call alone would spend most of a round flushing."""
        start, calls = time.perf_counter(), 0
        while True:
            if self._flush is not None:
                self._flush()
            fn()
            calls += 1
            elapsed = (time.perf_counter() - start) * 1e3
            if elapsed >= self.settings.warmup_ms:
                return elapsed / calls

    def _round(self, fn: Callable[[], Any], reps: int) -> list[float]:
        out = []
        for _ in range(reps):
            if self._flush is not None:
                self._flush()
            start = time.perf_counter()
            fn()
            out.append((time.perf_counter() - start) * 1e3)
        return out

    def measure(self, fns: dict[str, Callable[[], Any] | Staged | Ungraphed], watch: Watch = _QUIET) -> Samples:
        """Samples (ms) per contender, or the exception that stopped it; `outputs` then holds what each
        contender that finished every round returns when its timed call is made once more, untimed."""
        self.kinds = dict.fromkeys(fns, self.kind)
        calls, failed = _build(fns, watch)
        result = interleaved(calls, self.settings, self._per_call_ms, self._round, watch)
        self.outputs = _last_outputs(calls, result, watch)
        return {**failed, **result}


class CudaEventTimer:
    """CUDA events per repetition with the L2 flushed in between, so every rep starts from device memory.

    Everything runs on one side stream of the timer's own: a staged call's forward, the graph capture and
    the timed replays, so a backward pass whose kernels follow its forward's stream is captured too.
    """

    kind = "cuda-events"

    def __init__(self, settings: TimingSettings, device: torch.device) -> None:
        self.settings = settings
        self.device = device
        self.kinds: dict[str, str] = {}  # per provider of the last measure(): "cuda-events[+graph]"
        self.outputs: dict[str, Any] = {}  # per provider of the last measure(): its last timed output
        self._flush = CacheFlush(device) if settings.flush_l2 else None
        self._stream = torch.cuda.Stream(device)

    def _per_call_ms(self, fn: Callable[[], Any]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        torch.cuda.synchronize(self.device)
        calls, total_ms = 0, 0.0
        while total_ms < self.settings.warmup_ms:
            batch = max(1, calls)  # doubling batches: few syncs for fast kernels, one call for slow ones
            start.record()
            for _ in range(batch):
                if self._flush is not None:
                    self._flush()
                fn()
            end.record()
            end.synchronize()
            total_ms += start.elapsed_time(end)
            calls += batch
        return total_ms / calls

    def _round(self, fn: Callable[[], Any], reps: int) -> list[float]:
        return event_times(fn, reps, self._flush, self.device)

    def measure(self, fns: dict[str, Callable[[], Any] | Staged | Ungraphed], watch: Watch = _QUIET) -> Samples:
        """Samples (ms) per contender, or the exception that stopped it; `outputs` then holds each surviving
        contender's last timed output: a graph's own (what its last replay wrote), else what the timed
        call returns when made once more, untimed."""
        self.kinds, self.outputs = {}, {}
        self._stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self._stream):
            calls, failed = _build(fns, watch)
            replays: dict[str, Callable[[], Any] | None] = {}
            captured: dict[str, Any] = {}
            for name, fn in list(calls.items()):
                replays[name] = None
                method = fns[name].method if isinstance(fns[name], Ungraphed) else None
                if self.settings.cuda_graph and method is None:

                    def keep(fn=fn, name=name) -> None:  # runs at capture only: replays run the kernels alone
                        captured[name] = fn()

                    try:
                        watch.step(name, "capturing its call in a CUDA graph")
                        replays[name] = graph_replay(keep, self.device, self._stream)
                        watch.after(name)
                    except BaseException as exc:  # its capture's calls were caught doing wrong (watch.after)
                        reraise_real(exc)
                        failed[name] = exc
                        del calls[name]
                        continue
                self.kinds[name] = self.kind + ("+graph" if replays[name] else f"+{method}" if method else "")
            try:
                timed = {n: replays[n] or fn for n, fn in calls.items()}
                result = interleaved(timed, self.settings, self._per_call_ms, self._round, watch)
                plain = {n: fn for n, fn in calls.items() if not replays[n]}
                self.outputs = _last_outputs(plain, result, watch)
                torch.cuda.synchronize(self.device)
                self.outputs |= {n: _copy(captured[n]) for n in calls if replays[n] and isinstance(result[n], list)}
                return {**failed, **result}
            finally:
                replays.clear()  # frees the graphs' memory pools with the case
                captured.clear()
                torch.cuda.synchronize(self.device)


def _build(
    fns: dict[str, Callable[[], Any] | Staged | Ungraphed], watch: Watch = _QUIET
) -> tuple[dict[str, Callable[[], Any]], Samples]:
    """The calls to time, staged ones built here; a build that raises is that provider's result."""
    calls: dict[str, Callable[[], Any]] = {}
    failed: Samples = {}
    for name, fn in fns.items():
        if isinstance(fn, Ungraphed):
            fn = fn.call
        try:
            if isinstance(fn, Staged):
                watch.step(name, "building its timed call")
                calls[name] = fn.build()
                watch.after(name)
            else:
                calls[name] = fn
        except BaseException as exc:  # one provider's failure (whatever it raises) must not stop the others
            reraise_real(exc)
            failed[name] = exc
            calls.pop(name, None)
    return calls, failed


def _last_outputs(calls: dict[str, Callable[[], Any]], result: Samples, watch: Watch) -> dict[str, Any]:
    """What each contender that finished every round returns from one more call of its timed call, untimed:
    checked again by the caller, so a call that goes wrong only while timed does not pass (an exception it
    raises is its output)."""
    out: dict[str, Any] = {}
    for name, fn in calls.items():
        if not isinstance(result.get(name), list):
            continue
        watch.step(name, "a last call after the timed rounds")
        try:
            out[name] = fn()
            watch.after(name)
        except BaseException as exc:
            reraise_real(exc)
            out[name] = exc
    return out


def _copy(value: Any) -> Any:
    """Tensors copied out of a graph's memory pool, which goes with the graph."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_copy(v) for v in value)
    return value


def interleaved(
    fns: dict[str, Callable[[], Any]],
    settings: TimingSettings,
    per_call_ms: Callable[[Callable[[], Any]], float],
    one_round: Callable[[Callable[[], Any], int], list[float]],
    watch: Watch = _QUIET,
) -> Samples:
    """Warm each contender up by time, then run `rounds` rounds in which every contender takes a turn.

    The order rotates each round so that no contender always runs first (right after another's load).
    One that raises (or whose `watch.after` raises) is dropped from later rounds and reported by its exception.
    """
    result: Samples = {}
    reps: dict[str, int] = {}
    for name, fn in fns.items():
        try:
            watch.step(name, "warming up")
            est = max(per_call_ms(fn), 1e-6)
            watch.after(name)
        except BaseException as exc:  # one provider's failure must not stop the others
            reraise_real(exc)
            result[name] = exc
            continue
        per_round = settings.rep_ms / est
        reps[name] = int(min(settings.max_reps, max(settings.min_reps, per_round)))
        result[name] = []
    names = list(reps)
    for number, order in enumerate(rotations(len(names), settings.rounds), 1):
        for i in order:
            name = names[i]
            samples = result[name]
            if isinstance(samples, BaseException):
                continue
            try:
                watch.step(name, f"timed round {number} of {settings.rounds}")
                samples.extend(one_round(fns[name], reps[name]))
                watch.after(name)
            except BaseException as exc:
                reraise_real(exc)
                result[name] = exc
    return result


def bring_to_steady_state(device: torch.device, seconds: float) -> None:
    """Keep the GPU busy with large bf16 products so clocks settle at the power cap before timing.

    The first kernels after idle run at full boost, several percent faster than the card sustains.
    """
    if device.type != "cuda" or seconds <= 0:
        return
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(10):
            torch.matmul(a, b)
        torch.cuda.synchronize(device)
    del a, b


def make_timer(settings: TimingSettings, device: torch.device) -> CpuTimer | CudaEventTimer:
    return CudaEventTimer(settings, device) if device.type == "cuda" else CpuTimer(settings)
