"""Two versions of a plugin in one process, side by side, so one timer can measure both A/B.

A version is a folder (a `pip install --target` folder, an unpacked source tree, a checkout) or a module file;
its plugin modules are named by `--plugin`, else by the `tierbench.plugins` entry points its distribution
declares (installed: its dist-info; a source tree: its pyproject.toml). Each version is imported with its folder
first on the path and every module of the same top-level name set aside, then its modules are taken out of
`sys.modules` again: the objects stay alive (its providers hold them), and the other version's import finds
the files of its own folder. A plugin that imports its own modules lazily (inside a function, at call time)
would find neither version then, and fails its check with that error.

Each version is named by what it is: its distribution's name and version, the VCS commit pip recorded or the
checkout's HEAD, and a hash of the source of the modules it loaded (suite/benchmarks/identity.py's digest).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from ..benchmarks.identity import digest
from ..measure import provenance
from ..plugins import ENTRY_POINT_GROUP, PluginError
from ..text import plain
from .asvtool import AsvError, git
from .measured_ab import ABError, Pair, case_title

try:  # Python 3.11+; on 3.10 a source tree's plugin is named with --plugin
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    tomllib = None  # type: ignore[assignment]


@dataclass
class PluginVersion:
    given: str  # as the command line named it
    folder: Path  # what went first on the path
    modules: tuple[str, ...]  # the plugin modules named
    catalog: Any  # the catalog with this version's plugin (and no installed ones)
    sources: dict[str, str]  # module name -> source of every module this version's import loaded from its folder
    identity: str = ""  # what it is, in words
    label: str = ""  # short, for a report's title

    @property
    def providers(self) -> list[Any]:
        return list(self.catalog.plugin_providers)


def folder_and_modules(given: str, plugin: str | None) -> tuple[Path, tuple[str, ...]]:
    """The folder to import from and the plugin modules, from a folder or a module file; ABError otherwise."""
    path = Path(given)
    if path.is_file() and path.suffix == ".py":
        return path.resolve().parent, (plugin or path.stem,)
    if not path.is_dir():
        raise ABError(
            f"--plugin-versions {plain(given)}: neither a folder nor a module file (.py); give a folder the plugin "
            "imports from (pip install --target FOLDER, a source tree, a checkout) or its module's file"
        )
    folder = path.resolve()
    if plugin:
        return folder, (plugin,)
    found = declared_plugins(folder)
    if not found:
        raise ABError(
            f"--plugin-versions {plain(given)}: no distribution there declares a '{ENTRY_POINT_GROUP}' entry point "
            "(nor does a pyproject.toml); name the plugin module with --plugin MODULE"
        )
    return folder, found


def declared_plugins(folder: Path) -> tuple[str, ...]:
    """Plugin modules declared in a folder: its installed distributions' entry points, or its pyproject.toml's."""
    names = [
        ep.value.split(":")[0]
        for dist in metadata.distributions(path=[str(folder)])
        for ep in dist.entry_points
        if ep.group == ENTRY_POINT_GROUP
    ]
    pyproject = folder / "pyproject.toml"
    if not names and tomllib is not None and pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            data = {}
        points = ((data.get("project") or {}).get("entry-points") or {}).get(ENTRY_POINT_GROUP) or {}
        names = [str(v).split(":")[0] for v in points.values()]
    return tuple(dict.fromkeys(names))


def _top_names(folder: Path, modules: tuple[str, ...]) -> set[str]:
    """Top-level module names of the plugin's version in a folder, each imported afresh from it: the files of
    the distributions there that declare a plugin (a `pip install --target` folder may also hold the plugin's
    dependencies, torch among them, which must stay the ones this process runs), else the folder's .py files
    and packages (a source tree). Never tierbench: the one measuring both versions stays."""
    names = {m.split(".")[0] for m in modules}
    plugin_dists = [
        dist
        for dist in metadata.distributions(path=[str(folder)])
        if any(ep.group == ENTRY_POINT_GROUP for ep in dist.entry_points)
    ]
    files = [f for dist in plugin_dists for f in dist.files or ()]
    if files:
        for file in files:
            top = file.parts[0] if file.parts else ""
            if len(file.parts) == 1 and top.endswith(".py"):
                names.add(top[: -len(".py")])
            elif len(file.parts) > 1 and top.isidentifier() and top != "__pycache__":  # a package, no dist-info
                names.add(top)
    else:
        for entry in folder.iterdir() if folder.is_dir() else ():
            if entry.suffix == ".py":
                names.add(entry.stem)
            elif entry.is_dir() and (entry / "__init__.py").is_file():
                names.add(entry.name)
    names.discard("tierbench")
    return names


def _within(module: ModuleType, folder: Path) -> bool:
    path = getattr(module, "__file__", None)
    try:
        return bool(path) and Path(path).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def load_pair(old: str, new: str, plugin: str | None = None) -> tuple[PluginVersion, PluginVersion]:
    """(base, head): the head version imported first and set aside, then the base version, which stays in
    `sys.modules`: the config is composed from its families (their schemas' type hints are read there)."""
    for given in (old, new):  # both checked before either is imported
        folder_and_modules(given, plugin)
    head = load(new, plugin)
    base = load(old, plugin, keep=True)
    base.label, head.label = labels(base, head)
    return base, head


def load(given: str, plugin: str | None = None, keep: bool = False) -> PluginVersion:
    """One version's catalog, built with its folder first on the path; its modules are taken out of
    `sys.modules` after (those of the same names restored) unless `keep`."""
    from ..catalog import build

    folder, modules = folder_and_modules(given, plugin)
    tops = _top_names(folder, modules)
    aside = {n: m for n, m in sys.modules.items() if n.split(".")[0] in tops}
    for name in aside:
        del sys.modules[name]
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    before = set(sys.modules)
    home = os.getcwd()
    os.chdir(folder)  # a plugin is imported from the current folder first: here, that is this version's
    try:
        catalog = build(modules, entry_points=False)
    except PluginError as exc:
        raise ABError(f"--plugin-versions {plain(given)}: {exc}") from None
    finally:
        os.chdir(home)
        sys.path.remove(str(folder))
        loaded = {n: m for n in set(sys.modules) - before if _within(m := sys.modules[n], folder)}
        if not keep:
            for name in loaded:
                del sys.modules[name]
            sys.modules.update(aside)
    sources = {}
    for name, module in sorted(loaded.items()):
        try:
            sources[name] = Path(module.__file__).read_text(encoding="utf-8", errors="replace")
        except OSError:
            sources[name] = ""
    outside = [m for m in modules if m not in loaded]
    if outside:
        raise ABError(
            f"--plugin-versions {plain(given)}: the plugin {', '.join(outside)} was not imported from {folder} "
            "(another install shadows it, or it is not there)"
        )
    version = PluginVersion(given, folder, modules, catalog, sources)
    version.identity = identify(version)
    return version


def identify(version: PluginVersion) -> str:
    """Its distributions (name version, the VCS commit pip recorded), the checkout's HEAD where the folder is in
    one, and the digest of the source it loaded."""
    parts = [
        part.replace("==", " ")
        for dist in metadata.distributions(path=[str(version.folder)])
        for part in distribution_identity_of(dist)
    ]
    head = checkout_head(version.folder)
    if head:
        parts.append(head)
    parts.append(f"source {digest(version.sources)[:12]} ({', '.join(sorted(version.sources)) or 'no module'})")
    return plain("; ".join(parts))


def checkout_head(folder: Path) -> str:
    """'build of commit SHA' for an offline build (its BUILD_COMMIT file), else 'checkout NAME at SHA' (and
    whether its tracked files changed) where the folder is part of a git checkout (not a folder it ignores)."""
    marker = folder / provenance.BUILD_COMMIT_FILE
    if marker.is_file():
        return f"build of commit {marker.read_text().strip()[:12]}"
    top = provenance.git_top(folder)
    if top is None:
        return ""
    try:
        git(["check-ignore", "--quiet", str(folder)], top)
        return ""  # exit 0: the checkout ignores the folder (a build or a virtualenv inside it)
    except AsvError:
        pass
    try:
        head = git(["rev-parse", "HEAD"], top).strip()
        dirty = git(["status", "--porcelain", "--untracked-files=no"], top).strip()
    except AsvError:
        return ""
    return f"checkout {top.name} at {head[:12]}" + (" with uncommitted changes" if dirty else "")


def distribution_identity_of(dist: metadata.Distribution) -> tuple[str, ...]:
    """(name==version, the VCS commit pip recorded) of a distribution found in a folder, not on the path."""
    out = [f"{dist.metadata['Name']}=={dist.version}"]
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except (ValueError, OSError):
        direct = {}
    commit = (direct.get("vcs_info") or {}).get("commit_id") if isinstance(direct, dict) else None
    if commit:
        out.append(f"commit {commit}")
    return tuple(out)


def labels(base: PluginVersion, head: PluginVersion) -> tuple[str, str]:
    """Short names of the two versions: their folders' names, or their source digests where those agree."""
    a, b = plain(base.folder.name), plain(head.folder.name)
    if a == b:
        a, b = f"{a} ({digest(base.sources)[:8]})", f"{b} ({digest(head.sources)[:8]})"
    return a, b


def version_pairs(planned: list[Any], base: PluginVersion, head: PluginVersion) -> tuple[list[Pair], list[str]]:
    """Per planned case (the base version's plan) and per provider of the plugin in it: the base version's
    provider against the head version's of the same name and op, renamed `name@base` and `name@head` so one
    timer holds both. Also the providers only one version has."""
    mine = {(p.op, p.name) for p in base.providers}
    theirs = {(p.op, p.name): p for p in head.providers}
    pairs, unmatched = [], []
    for pc in planned:
        for provider in pc.providers:
            if (provider.op, provider.name) not in mine:
                continue
            other = theirs.get((provider.op, provider.name))
            if other is None:
                unmatched.append(f"{provider.name} ({provider.op}): not in {head.label}")
                continue
            key = f"{case_title(pc.case)} · {plain(provider.name)}"
            pairs.append(
                Pair(
                    key,
                    pc.case,
                    pc.op,
                    dataclasses.replace(provider, name=f"{provider.name}@base"),
                    dataclasses.replace(_with_rule(other, pc.op), name=f"{provider.name}@head"),
                )
            )
    for op, name in sorted(set(theirs) - mine):
        unmatched.append(f"{name} ({op}): only in {head.label}")
    return pairs, sorted(set(unmatched))


def _with_rule(provider: Any, op: Any) -> Any:
    from ..providers.base import with_op_rule

    return with_op_rule(provider, op)
