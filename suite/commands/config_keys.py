"""Command-line overrides checked against the run's schema before Hydra composes anything.

Hydra answers a key that does not exist with advice to add it (`+atention.causal=true`), and a `+key=` it
then appends to the config, where nothing reads it: the run measures the whole suite with the typo saved
in config.yaml. The schema is closed, so here a key that is not in it, with or without `+`, is bad input:
the message names the closest keys that exist (exit 2 in `tierbench run`).
"""

from __future__ import annotations

import difflib
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints


class UnknownKey(ValueError):
    """An override names a key the schema does not have; the message names the closest ones."""


def schema_keys(schema: type) -> list[str]:
    """Every dotted key of a dataclass schema, sections and their leaves alike."""
    out: list[str] = []

    def walk(cls: type, prefix: str) -> None:
        hints = get_type_hints(cls)
        for f in fields(cls):
            key = f"{prefix}{f.name}"
            out.append(key)
            kind = hints.get(f.name)
            if isinstance(kind, type) and is_dataclass(kind):
                walk(kind, key + ".")

    walk(schema, "")
    return out


def config_groups(conf_dir: Path) -> set[str]:
    """The config groups of the config tree (suite, timing, ...): `group=option` picks one of their files."""
    return {str(p.relative_to(conf_dir)) for p in conf_dir.rglob("*") if p.is_dir() and not p.name.startswith("_")}


def _override_key(text: str) -> str | None:
    """The key an override sets (`a.b` of `+a.b=1`, `~a.b`, `a.b=1`), or None for something else."""
    if "=" not in text and not text.startswith("~"):
        return None
    key = text.split("=", 1)[0].lstrip("+~")
    return key or None


def check_overrides(argv: list[str], schema: type, conf_dir: Path) -> None:
    """Raise UnknownKey for the first override whose key is neither the schema's nor a config group's."""
    keys = schema_keys(schema)
    known = set(keys)
    groups = config_groups(conf_dir)
    for arg in argv:
        if arg.startswith("-"):
            continue
        key = _override_key(arg)
        if key is not None and key.split(".", 1)[0].split("/", 1)[0] == "hydra":
            continue  # Hydra's own settings and launchers (some from its plugins): Hydra checks them
        if key in groups:
            _check_option(key, arg.split("=", 1)[1] if "=" in arg else "", conf_dir)
            continue
        if key is None or key in known:
            continue
        if _within_free_value(key, schema):
            continue
        close = list(dict.fromkeys(difflib.get_close_matches(key, keys + sorted(groups), n=4, cutoff=0.6)))[:3]
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        where = key.rsplit(".", 1)[0] if "." in key else ""
        siblings = [k.rsplit(".", 1)[-1] for k in keys if "." in k and k.rsplit(".", 1)[0] == where]
        if not siblings:
            where = ""
            top = [k for k in keys if "." not in k] + sorted(g for g in groups if "/" not in g and g != "hydra")
            siblings = list(dict.fromkeys(top))
        listed = f" Keys of {where or 'the run'}: {', '.join(siblings)}." if siblings else ""
        raise UnknownKey(f"no config key {key!r}{hint}{listed} (`tierbench run --help` lists every key)")


def _within_free_value(key: str, schema: type) -> bool:
    """Whether `key` reaches inside a field typed Any or dict (its contents are the value's own)."""
    parts = key.split(".")
    cls: Any = schema
    for part in parts[:-1]:
        if not (isinstance(cls, type) and is_dataclass(cls)):
            return True
        hints = get_type_hints(cls)
        if part not in {f.name for f in fields(cls)}:
            return False
        cls = hints.get(part)
        if getattr(cls, "__origin__", None) is dict:
            return True
    return False


def _stored_options(group: str) -> set[str]:
    """Options of a group registered in code rather than as files: a plugin family's `suite=<family>`."""
    from hydra.core.config_store import ConfigStore

    try:
        return {name.removesuffix(".yaml") for name in ConfigStore.instance().list(group)}
    except OSError:  # no such group in the store
        return set()


def _check_option(group: str, value: str, conf_dir: Path) -> None:
    """A config group's value names files of that group (a comma-separated list in a sweep)."""
    if not value or any(c in value for c in "()[]{}$*"):
        return  # Hydra's sweep functions and interpolations: Hydra checks them
    options = sorted({p.stem for p in (conf_dir / group).glob("*.yaml")} | _stored_options(group))
    for choice in value.split(","):
        if choice and choice not in options:
            close = difflib.get_close_matches(choice, options, n=2, cutoff=0.5)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise UnknownKey(f"no {group} {choice!r}{hint} Valid choices of {group}: {', '.join(options)}.")
