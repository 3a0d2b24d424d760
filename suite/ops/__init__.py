"""The op families tierbench ships: every module of this package that defines a `FAMILY`.

Adding a family is adding a module (see base.py); nothing else lists it. Plugins add theirs through the
catalog (suite/catalog.py).
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Case, Family, FamilySuite, Op, View, WorkModel


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


def builtin_op(name: str) -> Op:
    """The built-in op of that name (`layer_norm`, `rms_norm`, `matmul`, ...), for a plugin's provider of it:
    `call_provider("my-layernorm", "mine", builtin_op("layer_norm"), my_layer_norm)`. docs/plugins.md lists
    every op's signature."""
    ops = {op.name: op for family in builtin_families() for op in family.ops}
    if name not in ops:
        raise ValueError(f"no built-in op {name!r}; valid choices: {', '.join(ops)}")
    return ops[name]


__all__ = ["Case", "Family", "FamilySuite", "Op", "View", "WorkModel", "builtin_families", "builtin_op"]
