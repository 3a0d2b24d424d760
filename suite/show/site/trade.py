"""A view's trade panel (presentation.TradePanel): one provider beside others, the trade stated in numbers.

Attention's declares the recomputation trade: SDPA's math backend keeps the N x N probabilities P from its
forward for its backward (four products, nothing recomputed); the flash-style providers keep each query
row's log-sum-exp only and recompute P tile by tile in the backward (five products, seven in a two-pass
kernel). Per pass, the panel draws time, executed FLOPs and peak memory against the panel's x for the
reference and its contenders, and states the trade in numbers at the largest x both measured. Built from
records alone (their `executed_flops`, else the work model's `flops`), like the rest of the site; which op,
providers and parameters, and what to call them, the panel says.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ...store.reading import timed
from ...store.records import Measurement
from ..panels import TradePanel
from . import charts, model
from .charts import Axis

MODES = ("fwd", "bwd", "fwd_bwd")
MODE_NAMES = {"fwd": "forward", "bwd": "backward alone", "fwd_bwd": "forward and backward"}
LARGEST = "largest"  # a `prefer` value: the slice with the largest number there
# A field of a slice label: `{name}`, a parameter of the slice, replaced by its value and nothing else (a
# label comes from run.json: no format spec, conversion or attribute is ever applied).
_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Trade:
    """One pass at one x: the fastest contender against the reference provider."""

    mode: str
    x: int
    contender: str
    flops_ratio: float  # the contender's executed FLOPs / the reference's
    speedup: float  # the reference's median / the contender's
    memory_ratio: float | None  # the reference's peak memory / the contender's; None where either is unmeasured
    reference: str
    x_symbol: str

    def sentence(self, where: str) -> str:
        change = self.flops_ratio - 1.0
        if abs(change) < 0.005:
            flops = f"executes the same FLOPs as {self.reference}"
        else:
            more = "more" if change > 0 else "fewer"
            flops = f"executes {100 * abs(change):.0f}% {more} FLOPs than {self.reference}"
        speed = f"runs {self.speedup:.2f}× faster" if self.speedup >= 1 else f"runs {1 / self.speedup:.2f}× slower"
        if self.memory_ratio is None:
            memory = "peak memory is not measured on this device"
        elif self.memory_ratio >= 1:
            memory = f"needs {self.memory_ratio:.1f}× less peak memory"
        else:
            memory = f"needs {1 / self.memory_ratio:.1f}× more peak memory"
        mode = MODE_NAMES[self.mode]
        return f"{mode}, {self.x_symbol} = {self.x} ({where}): {self.contender} {flops}, {speed}; {memory}."


@dataclass
class Panel:
    spec: TradePanel
    slice: str  # which cases, e.g. "bf16 · head_dim=128 · non-causal"
    modes: list[dict[str, Any]] = field(default_factory=list)  # per pass: name, sentence, three charts


def executed(r: Measurement) -> float | None:
    """The FLOPs the provider executed: what it declared, else the work model's count."""
    return r.executed_flops if r.executed_flops is not None else r.flops


def _candidates(records: list[Measurement], spec: TradePanel) -> list[Measurement]:
    names = {spec.reference, *spec.contenders}
    return [r for r in records if r.op == spec.op and r.provider in names and timed(r)]


def _slice_of(r: Measurement, spec: TradePanel) -> tuple[Any, ...]:
    return tuple(r.case.get(k) for k in spec.slice)


def slice_name(key: tuple[Any, ...], spec: TradePanel) -> str:
    """A slice in words: each of the panel's label parts whose values are all present, a flag as its name or
    non-<name>."""
    values = {k: (k if v else f"non-{k}") if isinstance(v, bool) else v for k, v in zip(spec.slice, key)}
    shown = []
    for part in spec.slice_label:
        if all(values.get(name) is not None for name in _FIELD.findall(part)):
            shown.append(_FIELD.sub(lambda m: str(values[m.group(1)]), part))
    return " · ".join(shown)


def trade(records: list[Measurement], mode: str, spec: TradePanel) -> Trade | None:
    """At the largest x where the reference and a contender were both timed in this pass (records of one
    slice), the fastest contender against the reference."""
    by_x: dict[int, dict[str, Measurement]] = {}
    for r in records:
        if r.mode == mode:
            by_x.setdefault(int(r.case[spec.x]), {})[r.provider] = r
    for x in sorted(by_x, reverse=True):
        found = by_x[x]
        contenders = [found[name] for name in spec.contenders if name in found]
        if spec.reference not in found or not contenders:
            continue
        ref, best = found[spec.reference], min(contenders, key=lambda r: r.median_ms)
        ref_flops, best_flops = executed(ref), executed(best)
        if not ref_flops or not best_flops:
            continue
        memory = ref.peak_mem_bytes / best.peak_mem_bytes if ref.peak_mem_bytes and best.peak_mem_bytes else None
        return Trade(
            mode, x, best.provider, best_flops / ref_flops, ref.median_ms / best.median_ms, memory, spec.reference,
            spec.x_symbol,
        )  # fmt: skip
    return None


def _preference(value: Any, wanted: Any) -> Any:
    if wanted == LARGEST:
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
    return value == wanted


def _choose_slice(records: list[Measurement], spec: TradePanel) -> tuple[Any, ...] | None:
    """The slice with the most (pass, x) points comparing the reference with a contender; ties: one with a
    backward, then the panel's preferences in order."""
    slices: OrderedDict[tuple[Any, ...], list[Measurement]] = OrderedDict()
    for r in records:
        slices.setdefault(_slice_of(r, spec), []).append(r)
    contenders = set(spec.contenders)

    def score(key: tuple[Any, ...]) -> tuple[Any, ...]:
        recs = slices[key]
        points = {
            (r.mode, r.case[spec.x])
            for r in recs
            if r.provider == spec.reference
            and any(o.provider in contenders and o.mode == r.mode and o.case[spec.x] == r.case[spec.x] for o in recs)
        }
        has_backward = any(mode != "fwd" for mode, _ in points)
        values = dict(zip(spec.slice, key))
        return (bool(points), has_backward, len(points), *(_preference(values.get(k), v) for k, v in spec.prefer))

    best = max(slices, key=score, default=None)
    return best if best is not None and score(best)[0] else None


def panel(
    records: list[Measurement], spec: TradePanel, styles: dict[str, model.Style], hovers: model.RecordHovers
) -> Panel | None:
    """The panel of a family page's records, or None where no pass has the reference and a contender both
    timed. `styles` and `hovers` are the page's (the same marks, one hover table)."""
    found = _candidates(records, spec)
    key = _choose_slice(found, spec)
    if key is None:
        return None
    chosen = [r for r in found if _slice_of(r, spec) == key]
    where = slice_name(key, spec)
    out = Panel(spec, where)
    x = Axis(spec.x_label, log=True, at_data=True)
    for mode in MODES:
        recs = [r for r in chosen if r.mode == mode]
        if not recs:
            continue
        time: OrderedDict[str, list[model.Point]] = OrderedDict()
        flops: OrderedDict[str, list[model.Point]] = OrderedDict()
        memory: OrderedDict[str, list[model.Point]] = OrderedDict()
        for r in sorted(recs, key=lambda r: (r.provider, r.x)):
            at = float(r.case[spec.x])
            time.setdefault(r.provider, []).append(model.Point(at, r.median_ms, r.key, line=r.run_id))
            if executed(r):
                flops.setdefault(r.provider, []).append(model.Point(at, executed(r) / 1e9, r.key, line=r.run_id))
            if r.peak_mem_bytes:
                mib = r.peak_mem_bytes / 2**20
                memory.setdefault(r.provider, []).append(model.Point(at, mib, r.key, line=r.run_id))
        memory, memory_unit = charts.readable_memory(memory)
        found_trade = trade(chosen, mode, spec)
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
