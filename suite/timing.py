"""One way to time every provider, whatever its tier.

GPU: CUDA events around each repetition, the L2 cache flushed before each one, warm-up by time, and the
providers of a case taking turns across rounds so that clock and power drift hits all of them alike.
CPU: the same schedule with a plain monotonic clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# Fallback flush size when the device does not report its L2 (bytes): larger than any current GPU's L2.
_DEFAULT_FLUSH_BYTES = 256 << 20


@dataclass(frozen=True)
class TimingSettings:
    warmup_ms: float = 25.0
    rep_ms: float = 40.0
    rounds: int = 5
    min_reps: int = 5
    max_reps: int = 500
    flush_l2: bool = True
    steady_state_s: float = 3.0
    cuda_graph: bool = True

    @classmethod
    def from_config(cls, conf: Any) -> TimingSettings:
        return cls(**{k: getattr(conf, k) for k in cls.__dataclass_fields__})


Samples = dict[str, list[float] | BaseException]


# CPU caches are flushed by writing a buffer larger than any last-level cache before each repetition.
_CPU_FLUSH_BYTES = 64 << 20


class CpuTimer:
    """Host clock around each call; for CPU providers only (GPU work would need a sync to be honest)."""

    kind = "cpu-clock"

    def __init__(self, settings: TimingSettings) -> None:
        self.settings = settings
        self.kinds: dict[str, str] = {}
        self._flush = torch.empty(_CPU_FLUSH_BYTES, dtype=torch.int8) if settings.flush_l2 else None

    def _flush_caches(self) -> None:
        if self._flush is not None:
            self._flush.zero_()

    def _now_ms(self) -> float:
        return time.perf_counter() * 1e3

    def _per_call_ms(self, fn: Callable[[], Any]) -> float:
        start, calls = self._now_ms(), 0
        while True:
            fn()
            calls += 1
            elapsed = self._now_ms() - start
            if elapsed >= self.settings.warmup_ms:
                return elapsed / calls

    def _round(self, fn: Callable[[], Any], reps: int) -> list[float]:
        out = []
        for _ in range(reps):
            self._flush_caches()
            start = self._now_ms()
            fn()
            out.append(self._now_ms() - start)
        return out

    def measure(self, fns: dict[str, Callable[[], Any]]) -> Samples:
        self.kinds = dict.fromkeys(fns, self.kind)
        return _interleaved(fns, self.settings, self._per_call_ms, self._round)


class CudaEventTimer:
    """CUDA events per repetition with the L2 flushed in between, so every rep starts from device memory."""

    kind = "cuda-events"

    def __init__(self, settings: TimingSettings, device: torch.device) -> None:
        self.settings = settings
        self.device = device
        self.kinds: dict[str, str] = {}  # per provider of the last measure(): "cuda-events[+graph]"
        self._flush: torch.Tensor | None = None
        if settings.flush_l2:
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or _DEFAULT_FLUSH_BYTES
            self._flush = torch.empty(2 * l2, dtype=torch.int8, device=device)

    def _flush_l2(self) -> None:
        if self._flush is not None:
            self._flush.zero_()

    def _per_call_ms(self, fn: Callable[[], Any]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        torch.cuda.synchronize(self.device)
        calls, total_ms = 0, 0.0
        while total_ms < self.settings.warmup_ms:
            batch = max(1, calls)  # doubling batches: few syncs for fast kernels, one call for slow ones
            start.record()
            for _ in range(batch):
                self._flush_l2()
                fn()
            end.record()
            end.synchronize()
            total_ms += start.elapsed_time(end)
            calls += batch
        return total_ms / calls

    def _round(self, fn: Callable[[], Any], reps: int) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            self._flush_l2()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize(self.device)
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def measure(self, fns: dict[str, Callable[[], Any]]) -> Samples:
        self.kinds = {}
        replays = {}
        for name, fn in fns.items():
            replays[name] = self._as_graph(fn) if self.settings.cuda_graph else None
            self.kinds[name] = self.kind + ("+graph" if replays[name] else "")
        try:
            return _interleaved(
                {n: replays[n] or fn for n, fn in fns.items()}, self.settings, self._per_call_ms, self._round
            )
        finally:
            del replays  # frees the graphs' memory pools with the case

    def _as_graph(self, fn: Callable[[], Any]) -> Callable[[], Any] | None:
        """fn captured in a CUDA graph, or None where it cannot be captured (it syncs, or allocates oddly).

        Replaying a graph removes the host's launch path (Python, autotuner dispatch) from the timed region,
        as a serving stack running under CUDA graphs would; the kernels themselves are unchanged.
        """
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                fn()  # libraries set up handles and workspaces outside the capture
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
            torch.cuda.synchronize(self.device)
        except Exception:  # noqa: BLE001 - not capturable: timed by plain launches, and the record says so
            torch.cuda.synchronize(self.device)
            return None
        return graph.replay


def _interleaved(
    fns: dict[str, Callable[[], Any]],
    settings: TimingSettings,
    per_call_ms: Callable[[Callable[[], Any]], float],
    one_round: Callable[[Callable[[], Any], int], list[float]],
) -> Samples:
    """Warm each provider up by time, then run `rounds` rounds in which every provider takes a turn.

    The order rotates each round so that no provider always runs first (right after another's load).
    A provider that raises is dropped from later rounds and reported by its exception.
    """
    result: Samples = {}
    reps: dict[str, int] = {}
    for name, fn in fns.items():
        try:
            est = max(per_call_ms(fn), 1e-6)
        except Exception as exc:  # noqa: BLE001 - one provider's failure must not stop the others
            result[name] = exc
            continue
        per_round = settings.rep_ms / est
        reps[name] = int(min(settings.max_reps, max(settings.min_reps, per_round)))
        result[name] = []
    names = list(reps)
    for r in range(settings.rounds):
        order = names[r % len(names) :] + names[: r % len(names)] if names else []
        for name in order:
            samples = result[name]
            if isinstance(samples, BaseException):
                continue
            try:
                samples.extend(one_round(fns[name], reps[name]))
            except Exception as exc:  # noqa: BLE001
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
