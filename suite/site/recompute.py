"""The attention page's recomputation panel: the textbook attention beside the flash-style providers.

SDPA's math backend keeps the N x N probabilities P from its forward for its backward (four products,
nothing recomputed); the flash-style providers keep each query row's log-sum-exp only and recompute P tile
by tile in the backward (five products, seven in a two-pass kernel). Per pass, the panel draws time,
executed FLOPs and peak memory against sequence length for both, and states the trade in numbers at the
largest sequence length both measured. Built from records alone (their `executed_flops`, else the work
model's `flops`), like the rest of the site.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..reading import timed
from ..records import Measurement
from . import charts, model
from .charts import Axis

MATH = "sdpa-math"
FLASH = ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "flash-attn-2", "flash-attn-3", "flash-attn-4", "triton")
MODES = ("fwd", "bwd", "fwd_bwd")
MODE_NAMES = {"fwd": "forward", "bwd": "backward alone", "fwd_bwd": "forward and backward"}
# The parameters that pick one slice of the attention cases; the panel shows one, the sequence varying.
# The head layout is among them: a grouped-query case at the same length is other work, not another point.
SLICE = ("dtype", "head_dim", "causal", "heads", "kv_heads")


@dataclass(frozen=True)
class Trade:
    """One pass at one sequence length: a flash-style provider against the math backend."""

    mode: str
    seq: int
    flash: str
    flops_ratio: float  # flash's executed FLOPs / math's
    speedup: float  # math's median / flash's
    memory_ratio: float | None  # math's peak memory / flash's; None where either is unmeasured

    def sentence(self, where: str) -> str:
        change = self.flops_ratio - 1.0
        if abs(change) < 0.005:
            flops = f"executes the same FLOPs as {MATH}"
        else:
            flops = f"executes {100 * abs(change):.0f}% {'more' if change > 0 else 'fewer'} FLOPs than {MATH}"
        speed = f"runs {self.speedup:.2f}× faster" if self.speedup >= 1 else f"runs {1 / self.speedup:.2f}× slower"
        if self.memory_ratio is None:
            memory = "peak memory is not measured on this device"
        elif self.memory_ratio >= 1:
            memory = f"needs {self.memory_ratio:.1f}× less peak memory"
        else:
            memory = f"needs {1 / self.memory_ratio:.1f}× more peak memory"
        return f"{MODE_NAMES[self.mode]}, S = {self.seq} ({where}): {self.flash} {flops}, {speed}; {memory}."


@dataclass
class Panel:
    slice: str  # which cases, e.g. "bf16 · head_dim=128 · non-causal"
    modes: list[dict[str, Any]] = field(default_factory=list)  # per pass: name, sentence, three charts


def executed(r: Measurement) -> float | None:
    """The FLOPs the provider executed: what it declared, else the work model's count."""
    return r.executed_flops if r.executed_flops is not None else r.flops


def _candidates(records: list[Measurement]) -> list[Measurement]:
    names = {MATH, *FLASH}
    return [r for r in records if r.op == "attention" and r.provider in names and timed(r)]


def _slice_of(r: Measurement) -> tuple[Any, ...]:
    return tuple(r.case.get(k) for k in SLICE)


def _slice_name(key: tuple[Any, ...]) -> str:
    dtype, head_dim, causal, heads, kv_heads = key
    layout = f" · {heads}/{kv_heads} heads" if kv_heads is not None else ""
    return f"{dtype} · head_dim={head_dim} · {'causal' if causal else 'non-causal'}{layout}"


def trade(records: list[Measurement], mode: str) -> Trade | None:
    """At the largest sequence length where the math backend and a flash-style provider were both timed in
    this pass (records of one slice), the fastest flash-style provider against the math backend."""
    by_seq: dict[int, dict[str, Measurement]] = {}
    for r in records:
        if r.mode == mode:
            by_seq.setdefault(int(r.case["seq"]), {})[r.provider] = r
    for seq in sorted(by_seq, reverse=True):
        found = by_seq[seq]
        flash = [found[name] for name in FLASH if name in found]
        if MATH not in found or not flash:
            continue
        math, best = found[MATH], min(flash, key=lambda r: r.median_ms)
        math_flops, best_flops = executed(math), executed(best)
        if not math_flops or not best_flops:
            continue
        memory = math.peak_mem_bytes / best.peak_mem_bytes if math.peak_mem_bytes and best.peak_mem_bytes else None
        return Trade(mode, seq, best.provider, best_flops / math_flops, math.median_ms / best.median_ms, memory)
    return None


def _choose_slice(records: list[Measurement]) -> tuple[Any, ...] | None:
    """The slice with the most (pass, sequence) points comparing the two; ties: one with a backward, then
    non-causal (where the FLOPs compare plainly), multi-head, the larger head_dim, bf16."""
    slices: OrderedDict[tuple[Any, ...], list[Measurement]] = OrderedDict()
    for r in records:
        slices.setdefault(_slice_of(r), []).append(r)

    def score(key: tuple[Any, ...]) -> tuple[Any, ...]:
        recs = slices[key]
        points = {
            (r.mode, r.case["seq"])
            for r in recs
            if r.provider == MATH
            and any(o.provider in FLASH and o.mode == r.mode and o.case["seq"] == r.case["seq"] for o in recs)
        }
        has_backward = any(mode != "fwd" for mode, _ in points)
        dtype, head_dim, causal, _, kv_heads = key
        return (bool(points), has_backward, len(points), not causal, kv_heads is None, head_dim or 0, dtype == "bf16")

    best = max(slices, key=score, default=None)
    return best if best is not None and score(best)[0] else None


def panel(records: list[Measurement], styles: dict[str, model.Style], hovers: model.RecordHovers) -> Panel | None:
    """The panel of a family page's records, or None where no pass has the math backend and a flash-style
    provider both timed. `styles` and `hovers` are the page's (the same marks, one hover table)."""
    found = _candidates(records)
    key = _choose_slice(found)
    if key is None:
        return None
    chosen = [r for r in found if _slice_of(r) == key]
    where = _slice_name(key)
    out = Panel(where)
    x = Axis("sequence length", log=True, at_data=True)
    for mode in MODES:
        recs = [r for r in chosen if r.mode == mode]
        if not recs:
            continue
        time: OrderedDict[str, list[model.Point]] = OrderedDict()
        flops: OrderedDict[str, list[model.Point]] = OrderedDict()
        memory: OrderedDict[str, list[model.Point]] = OrderedDict()
        for r in sorted(recs, key=lambda r: (r.provider, r.x)):
            seq = float(r.case["seq"])
            time.setdefault(r.provider, []).append(model.Point(seq, r.median_ms, r.key, line=r.run_id))
            if executed(r):
                flops.setdefault(r.provider, []).append(model.Point(seq, executed(r) / 1e9, r.key, line=r.run_id))
            if r.peak_mem_bytes:
                mib = r.peak_mem_bytes / 2**20
                memory.setdefault(r.provider, []).append(model.Point(seq, mib, r.key, line=r.run_id))
        memory, memory_unit = charts.readable_memory(memory)
        found_trade = trade(chosen, mode)
        out.modes.append(
            {
                "mode": mode,
                "name": MODE_NAMES[mode],
                "sentence": found_trade.sentence(where) if found_trade else None,
                "charts": [
                    charts.line_chart(time, styles, hovers, f"{mode}: time", x, Axis("median ms", log=True)),
                    charts.line_chart(flops, styles, hovers, f"{mode}: executed FLOPs", x, Axis("GFLOP", log=True)),
                    charts.line_chart(
                        memory, styles, hovers, f"{mode}: peak device memory", x, Axis(memory_unit, log=True)
                    ),
                ],
            }
        )
    return out
