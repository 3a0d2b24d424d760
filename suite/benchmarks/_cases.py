"""Which cases and providers the asv suite measures: the catalog, config and plan of `tierbench run` with the
environment's overrides, and which of the planned cases each class takes (its family, its `where`)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ._guard import check_build
from ._settings import conf_dir, decide_interpreter, overrides

# The family name of the class that measures every family the plugins add (benchmarks/plugins.py).
PLUGINS = "plugins"
# What a case parameter is when a build's cases lack it: builds from before the passes measured the forward.
PARAM_DEFAULTS = {"mode": "fwd"}


def case_label(case: Any, with_op: bool = False) -> str:
    """A case's asv parameter value: op (when the family has several, or `with_op`), shape label, dtype, mode."""
    parts = [] if case.op == case.family and not with_op else [case.op]
    return " ".join([*parts, case.label, case.params["dtype"], case.params.get("mode", "fwd")])


@functools.lru_cache(maxsize=1)
def catalog() -> Any:
    """The catalog of `tierbench run`: built-in families and providers, and the plugins the overrides name."""
    from tierbench.suite.catalog import build
    from tierbench.suite.commands.run_command import plugin_names

    decide_interpreter()
    return build(plugin_names(overrides()))


@functools.lru_cache(maxsize=1)
def compose_config() -> Any:
    """The run config, composed by Hydra's compose API as `tierbench run` would with these overrides."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tierbench.suite.config import register_configs

    register_configs(catalog().families)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        return compose(config_name="config", overrides=overrides())


@functools.lru_cache(maxsize=1)
def planned_suite() -> tuple[Any, Any, list[tuple[Any, str, Any]]]:
    """(config, device, [(case, label, planned case of its runnable providers)]) of the whole asv suite here.

    A provider whose tier is not comparable here (Triton under its CPU interpreter) is measured as
    `tierbench run` measures it: checked, never timed; its benchmark is an asv skip that says so when its
    result is correct, and a failure naming the error when it is not."""
    from tierbench.suite.measure.plan import PlannedCase, make_plan, resolve_device

    cfg = compose_config()
    device = resolve_device(cfg.device)
    check_build()
    entries = []
    seen: dict[str, str] = {}
    for planned in make_plan(cfg, catalog()):
        case = planned.case
        label = case_label(case, with_op=case.family not in builtin_family_names())
        if label in seen and seen[label] != case.case_id:
            raise ValueError(f"two cases share the asv label {label!r}: {seen[label]} and {case.case_id}")
        seen[label] = case.case_id
        runnable = tuple(p for p in planned.providers if _available(p, case, device))
        # A build older than composite ops plans no parts (and its PlannedCase has no part_of).
        part_of = getattr(planned, "part_of", "")
        entries.append((case, label, PlannedCase(case, planned.op, runnable, *([part_of] if part_of else []))))
    return cfg, device, entries


def _available(provider: Any, case: Any, device: Any) -> bool:
    """The provider's own rule; a rule that raises leaves only that provider out (as `tierbench run` does)."""
    try:
        return provider.why_unavailable(case, device) is None
    except Exception:  # noqa: BLE001 - a broken rule must not take the whole suite down at import
        return False


def selection_name(family: str, where: Mapping[str, Any] | None = None) -> str:
    """Names a class's cases: the family, then each case parameter it is restricted to (`attention-causal-False`)."""
    return "-".join([family, *(f"{k}-{v}" for k, v in sorted((where or {}).items()))])


@functools.lru_cache(maxsize=1)
def builtin_family_names() -> frozenset[str]:
    from tierbench.suite.ops import builtin_families

    return frozenset(f.name for f in builtin_families())


def _in_family(case: Any, family: str) -> bool:
    return case.family not in builtin_family_names() if family == PLUGINS else case.family == family


def selects(case: Any, where: Mapping[str, Any] | None) -> bool:
    """Whether a case holds the `where` values: its parameters (a parameter its build lacks at its default),
    and `op` its op's name."""
    return all(
        (case.op if k == "op" else case.params.get(k, PARAM_DEFAULTS.get(k))) == v for k, v in (where or {}).items()
    )


def family_entries(family: str, where: Mapping[str, Any] | None = None) -> list[tuple[Any, str, Any]]:
    """The family's planned cases that hold the `where` values (PLUGINS: the plugins' families). A model
    block's parts are measured for its class (they make its best mix), never series of their own families'
    classes: a model named in the suite leaves those classes' cases and versions as they were."""
    return [
        e
        for e in planned_suite()[2]
        if not getattr(e[2], "part_of", "") and _in_family(e[0], family) and selects(e[0], where)
    ]


def part_entries(entries: list[tuple[Any, str, Any]]) -> list[tuple[Any, str, Any]]:
    """The planned parts of these entries' composite cases (measured first, tracked by no class)."""
    composites = [pc for _, _, pc in entries if getattr(pc.op, "parts", None)]
    wanted = {part.case.case_id for pc in composites for part in pc.op.parts(pc.case)}
    return [e for e in planned_suite()[2] if e[0].case_id in wanted]
