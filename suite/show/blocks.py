"""The model view: which op of a model's block to move down the ladder, and what it buys end to end.

Built from ordinary records and run.json's compositions (each composite case's parts, by case id), torch-free,
for `summary`, the site and `export`. Per block (a model in one phase):

- each part's time under each strategy: `eager` and `compile` run each part's eager formula (the compiled
  whole compiles it) or, where the block's formula calls the op's baseline instead (attention's SDPA), that
  baseline's record; `best-mix` the provider its record names per part (`composed`);
- each part's share of the eager block: its eager time over the sum of the eager parts (the shares add up to
  one: the measured parts), its fastest correct provider and tier, and what moving only that part from eager
  to its fastest buys end to end (Amdahl: the saving over the measured eager block, which still pays for
  everything else);
- the moves ranked by what they save, each with the block's predicted time once it and the ones above it
  are made;
- per strategy the measured block, the sum of its parts and their ratio (how well the parts predict the
  whole: below one, the whole is faster than its parts, which cross-op fusion or a warm cache makes so;
  above one, glue the parts do not contain: reshapes, the KV-cache write, launches), and its peak memory;
- whether compiling the whole block beats the best mix of single ops, and by how much.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..store.reading import fastest, timed
from ..store.records import Measurement
from .presentation import Presentation

STRATEGIES = ("eager", "compile", "best-mix")
# The roofline's phases: prefill (compute-bound) beside decode (bandwidth-bound).
ROOFLINE_PHASES = ("prefill", "decode")


@dataclass
class PartRow:
    name: str
    op: str
    case_id: str
    label: str
    records: list[Measurement]
    strategies: dict[str, Measurement | None]  # strategy -> the part's record under it
    fastest: Measurement | None
    share: float | None = None  # of the eager parts' sum
    saving_ms: float | None = None  # eager - fastest
    gain: float | None = None  # saving over the measured eager block (or the parts' sum where none)
    speedup: float | None = None  # the block's time before over after the move

    @property
    def eager_ms(self) -> float | None:
        r = self.strategies.get("eager")
        return r.median_ms if timed(r) else None

    @property
    def failed(self) -> list[Measurement]:
        """Providers of this part that ran and were wrong or failed (never ranked, never in a mix)."""
        return [r for r in self.records if r.status in ("incorrect", "error", "oom")]


@dataclass
class StrategyRow:
    name: str
    record: Measurement | None  # the whole block's record
    parts_ms: float | None  # the sum of its parts' times (None where one is missing)
    missing: list[str] = field(default_factory=list)  # parts without a timed record

    @property
    def measured_ms(self) -> float | None:
        return self.record.median_ms if timed(self.record) else None

    @property
    def ratio(self) -> float | None:
        """The measured block over the sum of its parts."""
        return self.measured_ms / self.parts_ms if self.measured_ms and self.parts_ms else None

    @property
    def peak_mem_bytes(self) -> int | None:
        return self.record.peak_mem_bytes if self.record is not None else None


@dataclass
class Move:
    part: PartRow
    predicted_ms: float  # the block once this move and those ranked above it are made


@dataclass
class BlockView:
    case_id: str
    model: str
    phase: str
    label: str
    dtype: str
    mode: str
    parts: list[PartRow]
    strategies: dict[str, StrategyRow]
    base_ms: float | None  # what the moves start from: the measured eager block, else its parts' sum
    base_measured: bool
    moves: list[Move]

    @property
    def headline(self) -> str:
        """One line: the biggest move and what it buys."""
        if not self.moves:
            return "no part has a faster correct provider than its eager one"
        top = self.moves[0].part
        return (
            f"{top.name} ({_pct(top.share)} of the eager parts) to {top.fastest.provider} ({top.fastest.tier}): "
            f"{_x(top.speedup)} end to end"
        )

    def compile_vs_mix(self) -> str | None:
        """Whether compiling the whole block beats the best mix of single ops (both measured), in a sentence."""
        whole = self.strategies["compile"].measured_ms
        mix = self.strategies["best-mix"].measured_ms
        if not whole or not mix:
            return None
        if whole < mix:
            return (
                f"compiling the whole block ({_ms(whole)}) beats the best mix of single ops ({_ms(mix)}) by "
                f"{mix / whole:.2f}×: fusion across ops that no single op's provider can do"
            )
        return (
            f"the best mix of single ops ({_ms(mix)}) beats compiling the whole block ({_ms(whole)}) by "
            f"{whole / mix:.2f}×"
        )


def _pct(v: float | None) -> str:
    return f"{100 * v:.1f}%" if v is not None else "–"


def _x(v: float | None) -> str:
    return f"{v:.3f}×" if v is not None else "–"


def _ms(v: float) -> str:
    return f"{v:.4g} ms"


def _strategy_record(part: dict[str, Any], records: list[Measurement], strategy: str, block: Measurement | None,
                     shown: Presentation) -> Measurement | None:  # fmt: skip
    """The part's record that the block's strategy corresponds to."""
    by_provider = {r.provider: r for r in records}
    if strategy == "best-mix":
        chosen = block.composed.get(part["name"]) if block is not None else None
        return by_provider.get(chosen) if chosen else None
    if part.get("in_whole") == "baseline":
        return shown.baseline(records)
    return by_provider.get("eager" if strategy == "eager" else "compile")


def block_view(
    case_id: str, composition: dict[str, Any], by_case: dict[str, list[Measurement]], shown: Presentation
) -> BlockView | None:
    """The view of one composite case, or None where no record of the block itself is at hand."""
    blocks = {r.provider: r for r in by_case.get(case_id, [])}
    if not blocks:
        return None
    first = next(iter(blocks.values()))
    parts: list[PartRow] = []
    for part in composition.get("parts", []):
        if not isinstance(part, dict) or not isinstance(part.get("case_id"), str):
            continue
        records = by_case.get(part["case_id"], [])
        per = {s: _strategy_record(part, records, s, blocks.get(s), shown) for s in STRATEGIES}
        quickest = fastest(records)
        label = records[0].label if records else part["case_id"]
        parts.append(
            PartRow(
                str(part.get("name", "?")), str(part.get("op", "?")), part["case_id"], label, records, per, quickest
            )
        )
    strategies = {}
    for s in STRATEGIES:
        times = {p.name: p.strategies[s] for p in parts}
        missing = [name for name, r in times.items() if not timed(r)]
        total = sum(r.median_ms for r in times.values() if timed(r)) if parts and not missing else None
        strategies[s] = StrategyRow(s, blocks.get(s), total, missing)
    eager_sum = strategies["eager"].parts_ms
    for p in parts:
        if p.eager_ms is not None and eager_sum:
            p.share = p.eager_ms / eager_sum
    measured = strategies["eager"].measured_ms
    base = measured or eager_sum
    moves = []
    if base:
        for p in parts:
            if p.eager_ms is None or p.fastest is None:
                continue
            p.saving_ms = max(0.0, p.eager_ms - p.fastest.median_ms)
            p.gain = p.saving_ms / base
            p.speedup = base / (base - p.saving_ms) if base > p.saving_ms else None
        left = base
        for p in sorted((p for p in parts if p.saving_ms), key=lambda p: -p.saving_ms):
            left -= p.saving_ms
            moves.append(Move(p, left))
    case = first.case
    return BlockView(
        case_id,
        str(case.get("model", "")),
        str(case.get("phase", "")),
        first.label,
        str(case.get("dtype", "")),
        first.mode,
        parts,
        strategies,
        base,
        bool(measured),
        moves,
    )


def views(records: list[Measurement], shown: Presentation) -> list[BlockView]:
    """Every composite case of these records that run.json describes, in the records' order."""
    by_case: dict[str, list[Measurement]] = OrderedDict()
    for r in records:
        by_case.setdefault(r.case_id, []).append(r)
    out = []
    for case_id in by_case:
        composition = shown.compositions.get(case_id)
        if isinstance(composition, dict):
            view = block_view(case_id, composition, by_case, shown)
            if view is not None:
                out.append(view)
    return out


def by_model(blocks: list[BlockView]) -> OrderedDict[str, list[BlockView]]:
    """The blocks per model, phases in the order prefill, decode, training."""
    order = {"prefill": 0, "decode": 1, "training": 2}
    out: OrderedDict[str, list[BlockView]] = OrderedDict()
    for b in blocks:
        out.setdefault(b.model, []).append(b)
    for phases in out.values():
        phases.sort(key=lambda b: (order.get(b.phase, 3), b.label))
    return out


def part_of(shown: Presentation) -> dict[str, tuple[str, str, str]]:
    """Each part's case id -> (model, phase, part) of the first block that has it (for export's columns)."""
    out: dict[str, tuple[str, str, str]] = {}
    for composition in shown.compositions.values():
        if not isinstance(composition, dict):
            continue
        params = composition.get("params") if isinstance(composition.get("params"), dict) else {}
        model, phase = str(params.get("model", "")), str(params.get("phase", ""))
        for part in composition.get("parts", []):
            if isinstance(part, dict) and isinstance(part.get("case_id"), str):
                out.setdefault(part["case_id"], (model, phase, str(part.get("name", ""))))
    return out
