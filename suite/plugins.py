"""Plugins: a user's module or installed package that adds ops, providers and tiers without touching tierbench.

A plugin is a Python module with any of:
    FAMILIES: list[Family]     op families of its own (their config section is `<family>.*`)
    PROVIDERS: list[Provider]  providers of its own or of built-in ops (tierbench.suite.ops.norm.RMS_NORM ...)
    TIERS: list[Tier]          tiers of its own, if its providers do not join the built-in ones
It is loaded by name from `plugins=[my_pkg.bench]` (importable from the current folder too) and from the
`tierbench.plugins` entry-point group of installed distributions. Everything goes through the same records
as the built-in ones; a plugin that cannot be loaded is a clear error naming it, never a silent drop.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from .ops.base import Family
from .providers.base import Provider
from .tiers import Tier

ENTRY_POINT_GROUP = "tierbench.plugins"


class PluginError(ValueError):
    """A plugin that cannot be used; the message names it and says why."""


@dataclass(frozen=True)
class Plugin:
    name: str  # the module's name, as given or as its entry point names it
    families: tuple[Family, ...] = ()
    providers: tuple[Provider, ...] = ()
    tiers: tuple[Tier, ...] = field(default_factory=tuple)


def _items(module: ModuleType, attribute: str, kind: type, name: str) -> tuple:
    value = getattr(module, attribute, ())
    if callable(value):
        try:
            value = value()
        except SystemExit as exc:
            raise PluginError(f"plugin {name!r}: {attribute}() called sys.exit({exc.code!r})") from None
        except Exception as exc:  # noqa: BLE001 - whatever a plugin raises, the message names the plugin
            raise PluginError(f"plugin {name!r}: {attribute}() failed: {type(exc).__name__}: {exc}") from None
    try:
        items = tuple(value)
    except TypeError:
        raise PluginError(f"plugin {name!r}: {attribute} must be a list of {kind.__name__}, got {value!r}") from None
    wrong = [item for item in items if not isinstance(item, kind)]
    if wrong:
        raise PluginError(f"plugin {name!r}: {attribute} holds {wrong[0]!r}, which is not a {kind.__name__}")
    return items


def from_module(module: ModuleType, name: str) -> Plugin:
    plugin = Plugin(
        name,
        _items(module, "FAMILIES", Family, name),
        _items(module, "PROVIDERS", Provider, name),
        _items(module, "TIERS", Tier, name),
    )
    if not (plugin.families or plugin.providers or plugin.tiers):
        raise PluginError(f"plugin {name!r} ({module.__file__}) defines none of FAMILIES, PROVIDERS, TIERS")
    return plugin


def _import(name: str) -> ModuleType:
    cwd = str(Path.cwd())
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)  # a plugin in the current folder needs no install
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise PluginError(
                f"plugin {name!r}: no module named {exc.name!r} (looked in the current folder {cwd} and the "
                "installed packages)"
            ) from None
        raise PluginError(f"plugin {name!r} failed at import: {type(exc).__name__}: {exc}") from None
    except SystemExit as exc:  # sys.exit at import would end the command, silently, with its code
        raise PluginError(f"plugin {name!r} called sys.exit({exc.code!r}) at import") from None
    except Exception as exc:  # noqa: BLE001 - whatever a plugin raises, the message names the plugin
        raise PluginError(f"plugin {name!r} failed at import: {type(exc).__name__}: {exc}") from None
    finally:
        if added:
            sys.path.remove(cwd)


def entry_point_names() -> list[str]:
    """Modules that installed distributions register under the `tierbench.plugins` group."""
    return sorted({ep.value.split(":")[0] for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)})


def load(names: Iterable[str], entry_points: bool = True) -> list[Plugin]:
    """The named plugins and, with `entry_points`, every installed one; each module once."""
    wanted = list(dict.fromkeys([*(entry_point_names() if entry_points else []), *names]))
    for name in wanted:
        if not isinstance(name, str) or not name.strip() or any(not part.isidentifier() for part in name.split(".")):
            raise PluginError(f"plugin {name!r} is not a module name (like my_package.bench)")
    return [from_module(_import(name), name) for name in wanted]
