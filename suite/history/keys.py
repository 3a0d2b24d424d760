"""asv benchmark names of tierbench's suite, taken apart: `module.Class.track_provider(params)`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

_KEY = re.compile(r"^(?P<cls>(?P<family>[^.]+)\.[^.]+)\.track_(?P<provider>\w+)(?P<params>\(.*\))?$")


class Key(NamedTuple):
    family: str  # the benchmark module: the op family (matmul, norm...), or `plugins`
    cls: str  # module.Class: one history class (e.g. matmul.Matmul)
    provider: str  # the provider's asv name (non-identifier characters as `_`)
    params: str  # "('label')" or ""

    @property
    def label(self) -> str:
        """The case label: the one parameter's value without its quotes."""
        return self.params[1:-1].strip("'\"") if self.params else ""

    def with_provider(self, provider: str) -> str:
        """The name of another provider's series of the same class and case."""
        return f"{self.cls}.track_{provider}{self.params}"


def asv_name(provider: str) -> str:
    """A provider's name as asv's method names carry it (non-identifier characters as `_`)."""
    return re.sub(r"\W", "_", provider)


def parse(key: str) -> Key | None:
    m = _KEY.match(key)
    return Key(m["family"], m["cls"], m["provider"], m["params"] or "") if m else None


def family_of(key: str) -> str:
    """The op family of an asv name `module.Class.track_provider(params)`: its module (matmul, norm...)."""
    return key.split(".", 1)[0]


def class_of(key: str) -> str:
    """The history class of an asv name (`module.Class`), or the name itself when it is not one of ours."""
    parts = parse(key)
    return parts.cls if parts else key


def exact_bench(names: Iterable[str]) -> str:
    """An asv --bench regex that selects exactly these series keys."""
    return "^(" + "|".join(re.escape(n) for n in sorted(names)) + ")$"
