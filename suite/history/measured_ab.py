"""A paired A/B measured here by tierbench's own runner, in one process: two providers, or two versions of a
plugin's provider, on the same cases, round after round under one timer.

A round is one `Measurer.measure` of a case with both sides among its providers: each side is checked against
the case's reference on its seeded inputs, then the correct ones are timed in the timer's own rotating turns
(tierbench.timing.interleaved); each side's median over the round is one half of a pair. The base side is
listed first in even rounds and the head side in odd ones, so drift through the session hits both alike, as
suite/history/ab.py alternates two commits' asv runs. The verdict is the A/B rule on the per-round ratios
(stats.round_medians): `confirmed` slower when the (1 - alpha) interval of head / base lies above 1 and the
estimate is past the floor; the rounds measure their own noise, so no history is needed.

A side that is not timed here (skipped: Triton's kernels under its CPU interpreter are checked, never timed;
incorrect; failed) ends its pair after its first round, with the reason.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..text import plain
from .asvtool import AsvError
from .compare import Report, Row, ab_state, sort_rows
from .stats import Settings, Verdict, median, round_medians


class ABError(AsvError):
    """Input that cannot make an A/B (overrides that do not compose, no case both sides run): exit 2."""


def case_title(case: Any) -> str:
    """A case as a report row names it: op, shape label, dtype and pass."""
    parts = (case.op, case.label, case.params.get("dtype", ""), case.params.get("mode", "fwd"))
    return plain(" ".join(str(p) for p in parts if p)).replace("`", "'")


@dataclass(frozen=True)
class Pair:
    """One row of the A/B: the base and head providers of one case (an op object the runner checks by)."""

    key: str
    case: Any
    op: Any
    base: Any
    head: Any


@dataclass
class Halves:
    """Per-round medians (seconds) of both sides, or the row that ended the pair."""

    base: list[float] = field(default_factory=list)
    head: list[float] = field(default_factory=list)
    stopped: Row | None = None


def stop_row(key: str, base: Any, head: Any) -> Row | None:
    """The row of a pair one of whose sides gave no timing this round (its record says why), else None."""
    for side, record in (("base", base), ("head", head)):
        if record is None:
            return Row(key, "failed", note=f"the {side} side was not measured")
        if record.status != "ok" or not record.samples_ms:
            state = "skipped" if record.status == "skipped" else "failed"
            return Row(key, state, note=f"{record.status} at the {side}: {plain(record.reason)}")
    return None


def measure_pairs(
    pairs: list[Pair],
    measure: Callable[[Any], Iterable[Any]],
    rounds: int,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> dict[str, Halves]:
    """`rounds` rounds of every pair; `measure(PlannedCase)` is a Measurer's. The pairs of one case share its
    rounds (one measure of the case with all their providers)."""
    from ..measure.plan import PlannedCase

    by_case: dict[str, list[Pair]] = {}
    for pair in pairs:
        by_case.setdefault(pair.case.case_id, []).append(pair)
    out = {pair.key: Halves() for pair in pairs}
    for i in range(rounds):
        first = "base" if i % 2 == 0 else "head"
        for group in by_case.values():
            live = [p for p in group if out[p.key].stopped is None]
            if not live:
                continue
            bases, heads = [p.base for p in live], [p.head for p in live]
            order = tuple(bases + heads if first == "base" else heads + bases)
            say(f"tierbench compare: round {i + 1}/{rounds}, {case_title(live[0].case)} ({first} first)")
            records = {r.provider: r for r in measure(PlannedCase(live[0].case, live[0].op, order))}
            for p in live:
                b, h = records.get(p.base.name), records.get(p.head.name)
                stopped = stop_row(p.key, b, h)
                if stopped is not None:
                    out[p.key].stopped = stopped
                    continue
                out[p.key].base.append(median(b.samples_ms) * 1e-3)
                out[p.key].head.append(median(h.samples_ms) * 1e-3)
    return out


def fresh_state(v: Verdict) -> str:
    """A row's state from an A/B that nothing nominated: an estimate past the floor whose interval still holds
    1 is `suspected` where it is slower and `unjudged` where it is faster (never a claim either way)."""
    if v.verdict == "ambiguous":
        return "suspected" if math.isfinite(v.ratio) and v.ratio > 1 and math.isfinite(v.ci_low) else "unjudged"
    return ab_state(v)


def verdict_rows(pairs: list[Pair], halves: dict[str, Halves], settings: Settings) -> list[Row]:
    """Each pair's paired verdict over its rounds (or the row that ended it), worst news first."""
    rows = []
    for pair in pairs:
        h = halves[pair.key]
        if h.stopped is not None:
            rows.append(h.stopped)
            continue
        v = round_medians(h.base, h.head, settings)
        rows.append(Row(pair.key, fresh_state(v), ab=v, note=v.reason))
    sort_rows(rows)
    return rows


@dataclass(frozen=True)
class Sides:
    """What the report says was compared."""

    base: str  # short labels, for the title
    head: str
    base_full: str  # what each side is, in full
    head_full: str
    what: str


def run(pairs: list[Pair], measurer: Any, rounds: int, settings: Settings, sides: Sides, machine: str) -> Report:
    """Measure the pairs A/B here and judge them; the report names both sides."""
    start = time.monotonic()
    halves = measure_pairs(pairs, measurer.measure, rounds)
    seconds = time.monotonic() - start
    report = Report(
        sides.base,
        sides.head,
        machine,
        settings,
        "paired A/B",
        f"measured by the rounds themselves ({rounds} rounds of tierbench's runner in one process, {seconds:.0f} s)",
        own_providers=(),
        base_commit=sides.base_full,
        head_commit=sides.head_full,
    )
    report.what = sides.what
    report.rows = verdict_rows(pairs, halves, settings)
    return report


# -- the cases: tierbench run's config and plan ------------------------------------------------------------


def compose(overrides: list[str], catalog: Any) -> Any:
    """The run config `tierbench run OVERRIDES` would compose (Hydra's compose API), its keys checked first."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from ..commands.config_keys import UnknownKey, check_overrides
    from ..commands.run_command import conf_dir
    from ..config import register_configs

    schema = register_configs(catalog.families)
    try:
        check_overrides(overrides, schema, Path(conf_dir()))
    except UnknownKey as exc:
        raise ABError(str(exc)) from None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        raise ABError(f"the overrides {' '.join(overrides)} do not compose: {exc}") from None
    finally:
        GlobalHydra.instance().clear()


def plan(overrides: list[str], catalog: Any) -> tuple[Any, Any, list[Any]]:
    """(config, device, planned cases) of the overrides, as `tierbench run` plans them; a composite op's parts
    are left out (its best mix is no provider to compare)."""
    from ..measure.plan import PlanError, make_plan, resolve_device

    cfg = compose(overrides, catalog)
    try:
        device = resolve_device(cfg.device)
        planned = make_plan(cfg, catalog)
    except PlanError as exc:
        raise ABError(str(exc)) from None
    return cfg, device, [pc for pc in planned if not pc.part_of]


def open_measurer(cfg: Any, device: Any, tiers: dict[str, Any], workdir: Path) -> Any:
    """The session `tierbench run` measures in (ceilings, steady state, one timer), in this process."""
    from ..measure.plan import timing_settings
    from ..measure.session import Measurer

    return Measurer.open(
        device,
        timing_settings(cfg.timing),
        cfg.get("ceilings_dir") or None,
        run_id="ab",
        run_dir=workdir,
        seed=int(cfg.seed),
        suite=str(cfg.suite),
        tiers=tiers,
    )


def machine_of(measurer: Any) -> str:
    env = measurer.ctx.env
    return plain(str(env.get("device_name") or env.get("device_type") or "this machine"))


def provider_pairs(planned: list[Any], base: str, head: str) -> list[Pair]:
    """Per planned case that both providers run: one pair, named by the case."""
    pairs = []
    for pc in planned:
        found = {p.name: p for p in pc.providers if p.from_results is None}
        if base in found and head in found:
            pairs.append(Pair(case_title(pc.case), pc.case, pc.op, found[base], found[head]))
    return pairs
