"""The op families tierbench ships: every module of this package that defines a `FAMILY`.

Adding a family is adding a module (see base.py); nothing else lists it. Plugins add theirs through the
catalog (suite/catalog.py).
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Case, Family, Op, View, WorkModel


def builtin_families() -> list[Family]:
    """The families of this package's modules, in their declared order."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "base" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        family = getattr(module, "FAMILY", None)
        if isinstance(family, Family):
            found.append(family)
    return sorted(found, key=lambda f: (f.order, f.name))


__all__ = ["Case", "Family", "Op", "View", "WorkModel", "builtin_families"]
