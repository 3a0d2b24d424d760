"""Shards balanced by expected cost, not by count.

A case costs what measuring it takes: per provider, preparation and the check, the warm-up, and the
timer's rounds of repetitions (sized to a time budget, bounded by min_reps and max_reps). Where an earlier
run on this device type measured the (case, provider), its own figures stand (preparation plus the sum of
its samples); else the work model against the device's ceilings (the cached ones, or nominal ones). The
cases are then dealt costliest first, each to the shard with the least expected time so far.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from tierbench.timing import TimingSettings

from ..store.records import Measurement

# Rough ceilings where none are cached for the device yet: only the ratio of cases' costs matters here.
NOMINAL = {"cuda": (400.0, 3000.0), "cpu": (0.2, 10.0)}  # TFLOP/s, GB/s
# What the timer's cache flush writes before each repetition (bytes), as tierbench.timing sizes it.
FLUSH_BYTES = {"cuda": 256 << 20, "cpu": 64 << 20}
PREPARE_S = 0.5  # preparation, first call and check of one provider, where no earlier run tells
LAUNCH_MS = 0.005  # no call is faster than a launch


def provider_seconds(
    flops: float,
    min_bytes: float,
    timing: TimingSettings,
    peak_tflops: float,
    copy_gbps: float,
    device_type: str = "cuda",
) -> float:
    """Expected seconds to check and time one provider of a case, from the work model."""
    call_ms = max(flops / (peak_tflops * 1e12), min_bytes / (copy_gbps * 1e9)) * 1e3
    call_ms = max(call_ms, LAUNCH_MS)
    flush_ms = FLUSH_BYTES.get(device_type, 0) / (copy_gbps * 1e9) * 1e3 if timing.flush_l2 else 0.0
    reps = min(timing.max_reps, max(timing.min_reps, timing.rep_ms / call_ms))
    timed_ms = timing.warmup_ms + timing.rounds * reps * (call_ms + flush_ms)
    return PREPARE_S + 2 * call_ms / 1e3 + timed_ms / 1e3


def measured_seconds(record: Measurement, timing: TimingSettings) -> float:
    """What a measurement took in an earlier run: its preparation and every timed sample."""
    timed = sum(record.samples_ms) + (timing.warmup_ms if record.samples_ms else 0.0)
    return (record.prepare_s or 0.0) + timed / 1e3


def earlier_costs(records: Iterable[Measurement], device_name: str, timing: TimingSettings) -> dict[Any, float]:
    """Per (case_id, provider), the newest earlier record's cost on a device of this name."""
    newest: dict[Any, Measurement] = {}
    for r in records:
        if r.env.get("device_name") == device_name and (r.key not in newest or r.time > newest[r.key].time):
            newest[r.key] = r
    return {key: measured_seconds(r, timing) for key, r in newest.items() if r.status != "skipped" or r.prepare_s}


def case_cost(
    case_id: str,
    providers: list[str],
    work: Any,
    timing: TimingSettings,
    ceilings: tuple[float, float],
    device_type: str,
    earlier: dict[Any, float],
) -> float:
    """Expected seconds for the providers of one case (work: its op's work model, flops and min_bytes)."""
    peak, copy = ceilings
    total = 0.0
    for name in providers:
        known = earlier.get((case_id, name))
        if known is None:
            known = provider_seconds(work.flops, work.min_bytes, timing, peak, copy, device_type)
        total += known
    return total


def assign(costs: list[float], count: int) -> list[int]:
    """The shard of each item: costliest first, each into the shard with the least total so far (ties: the
    lower shard). Deterministic for the same costs."""
    if count < 1:
        raise ValueError(f"count={count}: at least one shard")
    heap = [(0.0, shard) for shard in range(count)]
    out = [0] * len(costs)
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        total, shard = heapq.heappop(heap)
        out[i] = shard
        heapq.heappush(heap, (total + costs[i], shard))
    return out


def totals(costs: list[float], shards: list[int], count: int) -> list[float]:
    out = [0.0] * count
    for cost, shard in zip(costs, shards):
        out[shard] += cost
    return out


def together(shards: list[int], case_ids: list[str], groups: dict[str, list[str]]) -> list[int]:
    """The deal with each group's members moved to its leader's shard (a composite's parts to the composite's),
    where both are dealt; the rest as dealt."""
    where = {case_id: i for i, case_id in enumerate(case_ids)}
    out = list(shards)
    for leader, members in groups.items():
        if leader in where:
            for member in members:
                if member in where:
                    out[where[member]] = out[where[leader]]
    return out
