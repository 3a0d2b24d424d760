"""Builds asv benchmark classes from the same Hydra config, plan, runner and timer as `tierbench run`.

One class per op family, or per part of one (`where`: attention's causal and non-causal cases are two
classes, so each keeps a history series of its own). Its `setup_cache` (one process per class) measures its
cases (_measure.py); each provider is one `track_<provider>` method whose params are only the cases it can
run here (_table.py, from the plan of _cases.py), so asv never starts a process for a combination that does
not apply. A family that needs no more than its cases and providers declares its class in one line,
`Decode = family_class("decode", __name__)`, in a module named after it (benchmarks/decode.py).

The other modules, one job each: _settings.py (what the environment asks for), _cases.py (the plan and each
class's cases), _table.py (what asv needs at import), _measure.py (the setup_cache's measurements) and
_guard.py (an offline history run measures one build).
"""

from __future__ import annotations

import re
from typing import Any

from ._measure import measure_family
from ._settings import TIMEOUT_S
from ._table import family_table


def method_name(provider: str) -> str:
    """asv benchmark method of a provider: `track_` plus the name with every non-identifier char as `_`."""
    return "track_" + re.sub(r"\W", "_", provider)


class FamilyBenchmark:
    """Base of the per-family classes; `finish_class` adds one track method per provider."""

    family = ""
    # Only the family's cases whose parameters (and `op`, the op's name) hold these values; all when empty.
    where: dict[str, Any] = {}
    unit = "seconds"
    param_names = ["case"]
    timeout = TIMEOUT_S
    version = ""


def _track(provider: str, labels: list[str]):
    def track(self: FamilyBenchmark, cache: dict[tuple[str, str], dict[str, Any]], label: str) -> dict:
        from asv_runner.benchmarks.mark import SkipNotImplemented

        entry = cache.get((label, provider))
        if entry is None:
            raise RuntimeError(f"{provider} on {label}: not measured (the setup_cache plan differs)")
        if entry["status"] == "skipped":
            raise SkipNotImplemented(entry["reason"])
        if entry["status"] != "ok":
            raise RuntimeError(f"{provider} on {label}: {entry['status']}: {entry['reason']}")
        return {"samples": entry["samples_s"], "number": 1}

    track.__name__ = method_name(provider)
    track.params = [labels]
    track.param_names = ["case"]
    return track


def finish_class(cls: type[FamilyBenchmark]) -> type[FamilyBenchmark]:
    """Set the version and add `track_<provider>` for each provider of the catalog (built-in or a plugin's)
    with runnable cases here: a provider that joins the catalog joins the history, with no list to edit, and
    the series of the others keep their names and versions (a version is the cases', not the providers')."""
    table = family_table(cls.family, cls.where)
    cls.version = table.version
    for provider, labels in table.labels.items():
        name = method_name(provider)
        if hasattr(cls, name):
            raise ValueError(f"{cls.__name__}: two providers map to the method {name}")
        setattr(cls, name, _track(provider, labels))
    return cls


def class_name(family: str) -> str:
    """The class `family_class` names a family's (`decode` -> `Decode`, `my_ops` -> `MyOps`)."""
    return "".join(part[:1].upper() + part[1:] for part in family.split("_"))


# The modules that declared a class through family_class: one each, see there.
_DECLARED: dict[str, str] = {}


def family_class(family: str, module: str) -> type[FamilyBenchmark]:
    """The asv class of every case of a family, for the module `module` (pass `__name__`): named after the
    family (class_name), so asv names its series `<module>.<Class>.track_<provider>`.

    asv keys a class's setup_cache by its function's module and first source line. Every class made here
    shares that line (the `def` below), so its function is given the declaring module, and each module may
    declare one class: two would share one cache, the second family measured as the first.
    """
    if _DECLARED.get(module, family) != family:  # the same declaration again: a module imported anew
        raise ValueError(
            f"{module} declares a second family class ({family!r}, after {_DECLARED[module]!r}): asv would give "
            "both one setup_cache; declare each family's class in a module of its own"
        )
    _DECLARED[module] = family
    name = class_name(family)

    def setup_cache(self: FamilyBenchmark) -> dict[tuple[str, str], dict[str, Any]]:
        return measure_family(self.family, self.where)

    setup_cache.__module__ = module
    setup_cache.__qualname__ = f"{name}.setup_cache"
    namespace = {"family": family, "setup_cache": setup_cache, "__module__": module, "__qualname__": name}
    namespace["__doc__"] = f"asv series of the {family} family's cases, one track method per provider."
    return finish_class(type(name, (FamilyBenchmark,), namespace))
