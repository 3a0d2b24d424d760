"""From a config to the work: which cases, and which providers of which tiers apply to each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from tierbench.timing import TimingSettings

from ..catalog import Catalog
from ..ops.base import Case, Op, choice_name
from ..providers.base import Provider

# A week: a longer limit is no limit, and a wrong unit more likely than a measurement that long.
MAX_TIME_LIMIT_S = 7 * 24 * 3600.0


class PlanError(ValueError):
    """A config that names something that does not exist, or a value that cannot work; the message says
    which key and what is valid."""


@dataclass(frozen=True)
class PlannedCase:
    case: Case
    op: Op
    providers: tuple[Provider, ...]
    # A part of a composite op's case (a model block's matmul), planned for it rather than by its own
    # family's section: the composite's case id.
    part_of: str = ""


def resolve_device(choice: Any) -> torch.device:
    name = choice_name(choice)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise PlanError("device=cuda but no CUDA GPU is visible to PyTorch; use device=auto or device=cpu")
    if name not in ("cuda", "cpu"):
        raise PlanError(f"device={name!r} is not one of: auto, cuda, cpu")
    return torch.device(name)


def timing_settings(conf: Any) -> TimingSettings:
    """The timing section as the timers read it (the schema's own dataclass)."""
    if isinstance(conf, TimingSettings):
        return conf
    return TimingSettings(**{name: conf[name] for name in TimingSettings.__dataclass_fields__})


def problems(cfg: Any, catalog: Catalog) -> list[str]:
    """Every value of the config that cannot work, each naming its key; [] when the config is usable."""
    out = timing_settings(cfg.timing).problems()
    limit = cfg.get("time_limit_s", 1.0)
    if not 0 < limit <= MAX_TIME_LIMIT_S:  # also refuses NaN
        out.append(f"time_limit_s={limit} is outside (0, {MAX_TIME_LIMIT_S:g}] seconds per measurement")
    for family in catalog.families:
        section = cfg[family.name]
        if section.enabled:
            out += family.validate(section)
    return out


def select_providers(cfg: Any, catalog: Catalog) -> list[Provider]:
    compile_modes = [choice_name(m) for m in cfg.compiler.modes]
    candidates = catalog.providers(compile_modes, dynamic=bool(cfg.compiler.dynamic))
    tiers = list(cfg.tiers) or list(catalog.tiers)
    unknown_tiers = [t for t in tiers if t not in catalog.tiers]
    if unknown_tiers:
        raise PlanError(f"tiers={unknown_tiers} not known; valid choices: {', '.join(catalog.tiers)}")
    chosen = [p for p in candidates if p.tier in tiers]
    wanted = list(cfg.providers)
    if wanted:
        known = sorted({p.name for p in candidates})
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise PlanError(f"providers={unknown} not known; valid choices: {', '.join(known)}")
        outside = sorted({p.name for p in candidates if p.name in wanted} - {p.name for p in chosen})
        if outside:
            raise PlanError(f"providers={outside} are not in the selected tiers={tiers}")
        chosen = [p for p in chosen if p.name in wanted]
    return chosen


def cases_from_config(cfg: Any, catalog: Catalog) -> list[tuple[Case, Op]]:
    """Every case the config asks for, in a stable order (planned_cases without who asked)."""
    return [(case, op) for case, op, _ in planned_cases(cfg, catalog)]


def planned_cases(cfg: Any, catalog: Catalog) -> list[tuple[Case, Op, str]]:
    """Every case the config asks for, in a stable order: family, then the family's own order; a composite
    op's parts (cases of other families' ops) right before it. A case asked for twice is planned once.
    Each entry: (case, op, the composite it was planned for or "")."""
    out: list[tuple[Case, Op, str]] = []
    seen: set[str] = set()

    def add(case: Case, op: Op, part_of: str = "") -> None:
        if case.case_id not in seen:
            seen.add(case.case_id)
            out.append((case, op, part_of))

    for family in catalog.families:
        section = cfg[family.name]
        if not section.enabled:
            continue
        ops = {op.name: op for op in family.ops}
        for case in family.cases(section):
            if case.op not in ops:
                raise PlanError(f"family {family.name} made a case of op {case.op!r}; its ops: {', '.join(ops)}")
            op = ops[case.op]
            for part in op.parts(case) if op.parts else ():
                if part.case.op not in catalog.ops:
                    raise PlanError(f"{op.name}'s part {part.name} is of op {part.case.op!r}, which no family has")
                add(part.case, catalog.ops[part.case.op], case.case_id)
            add(case, op)
    return out


def check_resume(value: Any) -> None:
    """resume= given but empty is no run to finish (and no reason to start a fresh one): refused."""
    if value is not None and not str(value).strip():
        raise PlanError(
            "resume is empty: give the run (or sweep) to finish, by its id under results_dir or its folder; "
            "leave resume out to start a new run"
        )


def nothing_planned(plan: list[PlannedCase], cfg: Any, catalog: Catalog) -> str:
    """Why a plan measures nothing, naming what the config left out; '' when it measures something."""
    if any(pc.providers for pc in plan):
        return ""
    enabled = [f.name for f in catalog.families if cfg[f.name].enabled]
    if not enabled:
        return "every op family is disabled, so there is nothing to measure; enable one of: " + ", ".join(
            f"{f.name}.enabled=true" for f in catalog.families
        )
    if not plan:
        example = " (decode: ragged lengths need batches above 1)" if "decode" in enabled else ""
        return (
            f"the enabled families ({', '.join(enabled)}) make no case from these values{example}; nothing to measure"
        )
    return (
        f"no selected provider applies to the {len(plan)} cases of {', '.join(enabled)} "
        f"(tiers={list(cfg.tiers) or 'all'}, providers={list(cfg.providers) or 'all'}); nothing to measure"
    )


def make_plan(cfg: Any, catalog: Catalog) -> list[PlannedCase]:
    found = problems(cfg, catalog)
    if found:
        raise PlanError("; ".join(found))
    providers = select_providers(cfg, catalog)
    return [
        PlannedCase(case, op, tuple(p for p in providers if p.op == case.op), part_of)
        for case, op, part_of in planned_cases(cfg, catalog)
    ]
