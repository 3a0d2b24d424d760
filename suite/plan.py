"""From a config to the work: which cases, and which providers of which tiers apply to each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .ops import OPS, Case, cases_from_config
from .ops.base import choice_name
from .providers import all_providers
from .providers.base import Provider


class PlanError(ValueError):
    """A config that names something that does not exist; the message lists what does."""


@dataclass(frozen=True)
class PlannedCase:
    case: Case
    providers: tuple[Provider, ...]


def resolve_device(choice: Any) -> torch.device:
    name = choice_name(choice)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise PlanError("device=cuda but no CUDA GPU is visible to PyTorch; use device=auto or device=cpu")
    if name not in ("cuda", "cpu"):
        raise PlanError(f"device={name!r} is not one of: auto, cuda, cpu")
    return torch.device(name)


def select_providers(cfg: Any) -> list[Provider]:
    compile_modes = [choice_name(m) for m in cfg.compiler.modes]
    candidates = all_providers(compile_modes, dynamic=bool(cfg.compiler.dynamic))
    tiers = {choice_name(t) for t in cfg.tiers}
    chosen = [p for p in candidates if p.tier in tiers]
    wanted = list(cfg.providers)
    if wanted:
        known = sorted({p.name for p in candidates})
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise PlanError(f"providers={unknown} not known; valid choices: {', '.join(known)}")
        chosen = [p for p in chosen if p.name in wanted]
    return chosen


def make_plan(cfg: Any) -> list[PlannedCase]:
    providers = select_providers(cfg)
    plan = []
    for case in cases_from_config(cfg):
        if case.op not in OPS:
            raise PlanError(f"op {case.op!r} has no definition; known ops: {', '.join(OPS)}")
        plan.append(PlannedCase(case, tuple(p for p in providers if p.op == case.op)))
    return plan
