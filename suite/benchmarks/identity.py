"""The code identity of a provider: what it executes, as a hash, so a series' history spans every commit that
left that code alone.

A series of the project's own code (the triton tier's, a plugin's own tier) restarts its noise history
whenever its code changes, and only then. "Its code" is the modules it executes: the module its call enters
(for the triton tier, the tierbench.kernels submodule that defines the op's kernel, e.g. kernels/norm.py for
rms_norm) and every module of the project that it imports, followed through the import statements of the
source itself (read with `ast`, so any commit can be read from git without importing it). A package's
`__init__` reached by an import is left out: it re-exports its submodules, and following it would make every
kernel depend on every other. The provider's adapter module (suite/providers/triton_tier.py) counts too,
without its imports (the harness's own modules are shared by every series, controls included, whose drift
the report shows).

A provider whose code lives outside this project (a plugin's) is identified by its distribution: its name,
version and, for an install from a VCS checkout, the commit pip recorded (PEP 610 direct_url.json), plus the
source of its entry module. `code_identity` is the one function to ask.

Torch-free: `history/compare` reads identities of old commits from git.
"""

from __future__ import annotations

import ast
import atexit
import functools
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

# The project's packages and their folders in a checkout (pyproject.toml's package-dir; a test holds them equal).
PACKAGE_DIRS = {
    "tierbench": "core",
    "tierbench.kernels": "kernels",
    "tierbench.suite": "suite",
    "tierbench.conf": "conf",
}
# Where each own-code tier's call enters, given the op: "package:name" is the submodule of `package` that
# defines `name` (resolved through the package's `from .module import name`, or, since tierbench.kernels
# gathers its modules' declarations, the module whose `EXPORTS` names it), a plain name a module.
TIER_ENTRIES: dict[str, Callable[[Any], tuple[str, ...]]] = {
    "triton": lambda op: (f"tierbench.kernels:{op.kernel}",) if op.kernel else (),
}


class Source(Protocol):
    """The text of the project's files at one state (a commit, a folder); None where a file does not exist."""

    def read(self, path: str) -> str | None: ...

    def names(self, folder: str) -> list[str]:
        """The names of the files directly in a folder, sorted; [] where it does not exist."""
        ...


class GitBlobs:
    """Files of any commit of one checkout, read through one `git cat-file --batch` process."""

    def __init__(self, repo: Path):
        self.repo = repo
        self._process: subprocess.Popen | None = None
        self._failed = False  # not a checkout, or no git: every read is None

    def _start(self) -> subprocess.Popen | None:
        if self._failed:
            return None
        if self._process is None or self._process.poll() is not None:
            try:
                self._process = subprocess.Popen(
                    ["git", "cat-file", "--batch"],
                    cwd=self.repo,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            except OSError:
                self._process = None
        return self._process

    def _object(self, commit: str, path: str) -> tuple[bytes, bytes] | None:
        """(type, content) of the object at commit:path, or None where there is none."""
        process = self._start()
        if process is None or "\n" in commit + path:
            return None
        try:
            process.stdin.write(f"{commit}:{path}\n".encode())
            process.stdin.flush()
            header = process.stdout.readline().split()
            if not header:  # the process ended: not a checkout
                raise ValueError("git cat-file ended")
            if len(header) != 3:
                return None  # "<name> missing"
            return header[1], process.stdout.read(int(header[2]) + 1)[:-1]  # the content, then a newline
        except (OSError, ValueError):
            self.close()
            self._failed = True
            return None

    def read(self, commit: str, path: str) -> str | None:
        found = self._object(commit, path)
        if found is None or found[0] != b"blob":
            return None
        return found[1].decode("utf-8", errors="replace")

    def names(self, commit: str, folder: str) -> list[str]:
        """The files directly in a folder at a commit (a tree's entries: `<mode> <name>\\0<20-byte id>`)."""
        found = self._object(commit, folder)
        if found is None or found[0] != b"tree":
            return []
        names, data, at = [], found[1], 0
        while at < len(data):
            end = data.index(b"\0", at)
            mode, _, name = data[at:end].partition(b" ")
            if not mode.startswith(b"4"):  # 40000: a folder
                names.append(name.decode("utf-8", errors="replace"))
            at = end + 21
        return sorted(names)

    def close(self) -> None:
        if self._process is not None:
            for stream in (self._process.stdin, self._process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass  # the process is gone: nothing to flush to
            self._process.wait()
            self._process = None


_BLOBS: dict[Path, GitBlobs] = {}


def git_blobs(repo: Path) -> GitBlobs:
    """The one reader of a checkout's commits in this process (closed at exit)."""
    key = Path(repo).resolve()
    if key not in _BLOBS:
        _BLOBS[key] = GitBlobs(key)
        if len(_BLOBS) == 1:
            atexit.register(lambda: [blobs.close() for blobs in _BLOBS.values()])
    return _BLOBS[key]


@dataclass
class GitSource:
    """Files of one commit of a git checkout (cached)."""

    repo: Path
    commit: str
    _cache: dict[str, str | None] = field(default_factory=dict)
    _listed: dict[str, list[str]] = field(default_factory=dict)

    def read(self, path: str) -> str | None:
        if path not in self._cache:
            self._cache[path] = git_blobs(self.repo).read(self.commit, path)
        return self._cache[path]

    def names(self, folder: str) -> list[str]:
        if folder not in self._listed:
            self._listed[folder] = git_blobs(self.repo).names(self.commit, folder)
        return self._listed[folder]


@dataclass(frozen=True)
class FolderSource:
    """Files of a checkout (or of the installed package's folders) on disk."""

    root: Path

    def read(self, path: str) -> str | None:
        try:
            return (self.root / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def names(self, folder: str) -> list[str]:
        try:
            return sorted(p.name for p in (self.root / folder).iterdir() if p.is_file())
        except OSError:
            return []


def module_file(source: Source, module: str) -> str | None:
    """The path of a project module in the source (its .py, or its package's __init__.py), or None."""
    for package in sorted(PACKAGE_DIRS, key=len, reverse=True):
        if module == package or module.startswith(package + "."):
            rest = module[len(package) :].lstrip(".")
            base = PACKAGE_DIRS[package] + ("/" + rest.replace(".", "/") if rest else "")
            for path in (base + ".py", base + "/__init__.py"):
                if source.read(path) is not None:
                    return path
            return None
    return None


def imported_names(text: str, module: str, is_package: bool) -> list[str]:
    """Dotted names a module's source imports: modules, and names within them (`from . import decode` may
    name a submodule), relative imports resolved against `module`; [] for a source that does not parse."""
    tree = _parsed(text)
    if tree is None:
        return []
    here = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here.split(".") if here else []
                parts = parts[: len(parts) - (node.level - 1)]
                root = ".".join(parts + ([node.module] if node.module else []))
            else:
                root = node.module or ""
            found.append(root)
            found += [f"{root}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name]


def _imports(text: str, module: str, is_package: bool) -> list[str]:
    """Dotted names of the project modules (and names within them) that a module's source imports."""
    return [
        name
        for name in imported_names(text, module, is_package)
        if name == "tierbench" or name.startswith("tierbench.")
    ]


def resolve_entry(source: Source, entry: str) -> str | None:
    """The module an entry names: `package:name` is the submodule whose import the package re-exports, or
    (a package that gathers its modules' declarations, as tierbench.kernels does) the submodule whose
    top-level `EXPORTS` dict has `name` as a key."""
    if ":" not in entry:
        return entry
    package, name = entry.split(":", 1)
    path = module_file(source, package)
    tree = _parsed(source.read(path)) if path else None
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            if node.level == 1 and node.module:
                return f"{package}.{node.module}"
            if node.level == 0 and node.module:
                return node.module
    folder = path.rpartition("/")[0]
    for file in source.names(folder):
        if file.endswith(".py") and not file.startswith("_") and name in _exports(source.read(f"{folder}/{file}")):
            return f"{package}.{file[:-3]}"
    return None


def _parsed(text: str | None) -> ast.Module | None:
    try:
        return ast.parse(text) if text is not None else None
    except SyntaxError:
        return None


def _exports(text: str | None) -> set[str]:
    """The string keys of a module's top-level `EXPORTS = {...}` (annotated or not)."""
    tree = _parsed(text)
    for node in tree.body if tree else ():
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else getattr(node, "target", None)
        )
        if isinstance(target, ast.Name) and target.id == "EXPORTS" and isinstance(node.value, ast.Dict):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return set()


def module_closure(source: Source, entries: tuple[str, ...]) -> dict[str, str]:
    """{path: text} of the entry modules and every project module they import, transitively; a package's
    __init__ counts only where it is an entry itself."""
    found: dict[str, str] = {}
    todo = list(entries)
    entry_set = set(entries)
    while todo:
        module = todo.pop()
        path = module_file(source, module)
        if path is None or path in found:
            continue
        is_package = path.endswith("__init__.py")
        if is_package and module not in entry_set:
            continue
        text = source.read(path) or ""
        found[path] = text
        todo += _imports(text, module, is_package)
    return found


def digest(files: dict[str, str], extra: tuple[str, ...] = ()) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    for item in extra:
        h.update(item.encode() + b"\0")
    return h.hexdigest()[:16]


@functools.cache
def distribution_of(module: str) -> str | None:
    """The installed distribution that provides a top-level module, or None."""
    top = module.split(".", 1)[0]
    names = metadata.packages_distributions().get(top) or []
    return names[0] if names else None


def distribution_identity(name: str) -> tuple[str, ...]:
    """(name==version, vcs commit if pip recorded one) of an installed distribution, or why it has none."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return (f"{name}: not installed",)
    out = [f"{name}=={dist.version}"]
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except (json.JSONDecodeError, OSError):
        direct = {}
    commit = (direct.get("vcs_info") or {}).get("commit_id")
    if commit:
        out.append(f"commit {commit}")
    return tuple(out)


def _module_source(module: str) -> str:
    """The installed source of a module outside the project (a plugin's), or '' when it has none."""
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None)
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace") if path else ""
    except OSError:
        return ""


def is_ours(module: str) -> bool:
    return module == "tierbench" or module.startswith("tierbench.")


def called_modules(provider: Any) -> tuple[str, ...]:
    """The modules of what a provider's `prepare` calls: the functions it closes over (what `call_provider`
    wraps: a plugin's kernel) and `prepare` itself."""
    found = [getattr(provider.prepare, "__module__", None)]
    for cell in getattr(provider.prepare, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(value):
            found.append(getattr(value, "__module__", None))
    return tuple(dict.fromkeys(m for m in found if m))


def code_identity(provider: Any, op: Any, source: Source) -> str | None:
    """The code identity of this provider for this op in `source` (a commit, a folder): a hash of the source of
    the modules it executes; a module outside the project adds its distribution's version and commit.

    Two states of the project with the same identity run the same code for this provider, so its series'
    sessions in both are repeats of one code state; None where the source lacks its entry module. An own-code
    tier's rule (TIER_ENTRIES) names where its call enters, followed through its imports; the adapter module
    (and any project module a plugin's provider is wrapped by) counts as its own text alone: its imports are
    the harness's, shared by every series."""
    rule = TIER_ENTRIES.get(provider.tier)
    followed = rule(op) if rule is not None else tuple(m for m in called_modules(provider) if not is_ours(m))
    alone = tuple(m for m in called_modules(provider) if is_ours(m))
    files: dict[str, str] = {}
    outside: list[str] = []
    for entry in followed:
        if not is_ours(entry.split(":", 1)[0]):
            dist = distribution_of(entry)
            outside += [*(distribution_identity(dist) if dist else (f"{entry}: no distribution",))]
            outside.append(_module_source(entry))
            continue
        module = resolve_entry(source, entry)
        if module is None or module_file(source, module) is None:
            return None  # absent from this state of the project: nothing to tell it by
        files.update(module_closure(source, (module,)))
    for module in alone:
        path = module_file(source, module)
        if path:
            files[path] = source.read(path) or ""
    return digest(files, tuple(outside))
