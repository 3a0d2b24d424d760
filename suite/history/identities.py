"""Which code state each of the project's series ran at each commit: the code identity of its provider
(suite/benchmarks/identity.py), read from git, so sessions of commits that left that code alone share a history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..benchmarks.identity import GitSource, code_identity
from . import keys
from .keys import asv_name


class SeriesIdentities:
    """(asv key, commit) -> the code identity of that series' provider at that commit; the commit itself where
    the provider, its op or its entry module cannot be found (no history shared with other commits)."""

    def __init__(self, repo: Path, catalog: Any = None, plugins: tuple[str, ...] = ()):
        self.repo = repo
        self._catalog = catalog
        self._plugins = plugins
        self._sources: dict[str, GitSource] = {}
        self._cache: dict[tuple[str, str, str], str] = {}
        self._found: dict[str, tuple[Any, Any] | None] = {}

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            from ..catalog import build

            self._catalog = build(self._plugins)
        return self._catalog

    def provider_and_op(self, key: str) -> tuple[Any, Any] | None:
        """The catalog's provider and op of an asv series name, or None."""
        if key not in self._found:
            self._found[key] = self._find(key)
        return self._found[key]

    def _find(self, key: str) -> tuple[Any, Any] | None:
        parts = keys.parse(key)
        if parts is None:
            return None
        ops = self.catalog.ops
        first = parts.label.split(" ", 1)[0]
        op_name = first if first in ops else parts.family
        if op_name not in ops:
            return None
        for provider in self.catalog.providers():
            if provider.op == op_name and asv_name(provider.name) == parts.provider:
                return provider, ops[op_name]
        return None

    def __call__(self, key: str, commit: str) -> str:
        found = self.provider_and_op(key)
        if found is None:
            return commit
        provider, op = found
        cache_key = (provider.name, op.name, commit)
        if cache_key not in self._cache:
            source = self._sources.setdefault(commit, GitSource(self.repo, commit))
            identity = code_identity(provider, op, source)
            self._cache[cache_key] = f"{provider.name}@{identity}" if identity else commit
        return self._cache[cache_key]
