"""History keyed by what was measured: `tierbench nightly` and `compare` in a plugin's own repository.

An asv config whose repository is not tierbench's checkout (examples/plugin/asv.conf.json: a plugin author's
repository, tierbench installed from an index) measures that repository: asv keys each result by the
plugin's commit, and so do the verdicts.

- **The commit check is the plugin's.** `nightly --head` measures the installed plugin as the repository's
  HEAD, so every module of the plugin this Python imports (its entry module and the repository's modules that
  it imports, transitively) must hold HEAD's text; a copy installed before the last commit is refused, naming
  the module and how to install the checkout. tierbench itself is whatever is installed: each result file the
  nightly writes names it (`"tierbench": {"version", "commit", "modified"}`, asv ignores the key).
- **Series carry the plugin's own code identity.** A plugin provider's series at a commit is identified by the
  text of the repository modules it executes at that commit (the modules its call enters, followed through
  their imports within the repository, read from git) and the version its pyproject.toml declares there: a
  commit that leaves the kernels alone keeps their noise history whole (as identity.py does for tierbench's).
- **Confirmation measures both commits here.** A suspect is re-measured by a paired A/B of the two commits'
  builds (pip --target, no dependencies: the plugin alone) loaded side by side in one process
  (plugin_versions.py), under tierbench's runner and one timer, alternating round by round (measured_ab.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..benchmarks.identity import GitSource, called_modules, digest, imported_names, is_ours
from ..measure import provenance
from ..text import plain
from .asvtool import AsvConfig, AsvError, build_commit
from .compare import Report, attach_confirmations
from .identities import SeriesIdentities
from .keys import asv_name
from .stats import Settings

try:  # Python 3.11+; on 3.10 a repository's plugin and version come from the overrides and entry points
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    tomllib = None  # type: ignore[assignment]

OVERRIDES_ENV = "TIERBENCH_ASV_OVERRIDES"
# Where a repository keeps its top-level modules: its root (a flat layout) or src/.
LAYOUT_ROOTS = ("", "src/")


def is_tierbench(repo: Path) -> bool:
    """Whether an asv config's repository is tierbench's own checkout (its history keyed by tierbench's commits)."""
    return (repo / "suite" / "benchmarks" / "_harness.py").is_file() and (repo / "core" / "__init__.py").is_file()


def overrides_plugins() -> tuple[str, ...]:
    """The plugins that TIERBENCH_ASV_OVERRIDES names (`plugins=[...]`): the asv suite loads these too."""
    from ..commands.run_command import plugin_names

    try:
        words = shlex.split(os.environ.get(OVERRIDES_ENV, ""))
    except ValueError:
        return ()
    return tuple(plugin_names(words))


# -- the repository's modules, at any commit -----------------------------------------------------------


def module_path(source: GitSource, module: str) -> str | None:
    """The repository path of a module at the source's commit (flat or src/ layout), or None."""
    base = module.replace(".", "/")
    for root in LAYOUT_ROOTS:
        for path in (f"{root}{base}.py", f"{root}{base}/__init__.py"):
            if source.read(path) is not None:
                return path
    return None


def _imported(text: str, module: str, is_package: bool) -> list[str]:
    """Module names a source imports (absolute, and relative ones resolved against `module`), tierbench's left out."""
    return [name for name in imported_names(text, module, is_package) if not is_ours(name)]


def repo_closure(source: GitSource, entries: Iterable[str]) -> dict[str, str]:
    """{path: text} of the entry modules that the repository holds at the commit and of every repository module
    they import, transitively (modules outside it, tierbench's among them, are not followed)."""
    found: dict[str, str] = {}
    todo = list(entries)
    while todo:
        module = todo.pop()
        path = module_path(source, module)
        if path is None or path in found:
            continue
        text = source.read(path) or ""
        found[path] = text
        todo += _imported(text, module, path.endswith("__init__.py"))
    return found


def _path_module(path: str) -> str:
    for root in LAYOUT_ROOTS:
        if root and path.startswith(root):
            path = path[len(root) :]
    return path.removesuffix("/__init__.py").removesuffix(".py").replace("/", ".")


def declared(source: GitSource) -> tuple[dict[str, Any], tuple[str, ...]]:
    """(the [project] table, the plugin modules its tierbench.plugins entry points name) of pyproject.toml at
    the commit; empty where there is none or it cannot be read."""
    text = source.read("pyproject.toml")
    if text is None or tomllib is None:
        return {}, ()
    try:
        project = tomllib.loads(text).get("project") or {}
    except tomllib.TOMLDecodeError:
        return {}, ()
    points = (project.get("entry-points") or {}).get("tierbench.plugins") or {}
    return project, tuple(dict.fromkeys(str(v).split(":")[0] for v in points.values()))


def repo_plugins(repo: Path, commit: str, named: Iterable[str] = ()) -> tuple[str, ...]:
    """The plugin modules of the repository at a commit: those its pyproject.toml declares, and those named
    (overrides, installed entry points) that it holds."""
    source = GitSource(repo, commit)
    _, mine = declared(source)
    return tuple(dict.fromkeys([*mine, *(n for n in named if module_path(source, n) is not None)]))


# -- the commit check: the installed plugin is the repository at HEAD -----------------------------------------


def _installed_text(module: str) -> tuple[str | None, str]:
    """(source, file) of the module this Python would import, without importing it (its parent package aside)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None, ""
    try:
        return Path(spec.origin).read_text(encoding="utf-8", errors="replace"), spec.origin
    except OSError:
        return None, spec.origin


def check_plugin_at(repo: Path, sha: str, named: Iterable[str] = (), what: str = "HEAD") -> tuple[str, ...]:
    """The plugin modules of `repo` that this Python imports, each holding the text they have at `sha`; an
    AsvError naming the first that does not (a copy installed before the last commit, or none at all)."""
    plugins = repo_plugins(repo, sha, named)
    if not plugins:
        raise AsvError(
            f"{repo} is not tierbench's checkout and declares no plugin: name its module under "
            '[project.entry-points."tierbench.plugins"] in its pyproject.toml, or in '
            f"{OVERRIDES_ENV}='plugins=[my_module]'"
        )
    source = GitSource(repo, sha)
    install = f"install the checkout (pip install -e {repo}, or pip install {repo} again)"
    for path, text in sorted(repo_closure(source, plugins).items()):
        module = _path_module(path)
        have, where = _installed_text(module)
        if have is None:
            raise AsvError(f"the plugin module {module} of {repo} is not importable by this Python: {install}")
        if have != text:
            raise AsvError(
                f"the plugin module {module} this Python imports ({where}) is not {path} at {what} {sha[:8]} of "
                f"{repo}: {install}"
            )
    return plugins


def check_plugin_head(repo: Path, sha: str, named: Iterable[str] = ()) -> tuple[str, ...]:
    """`nightly --head` in a plugin's repository: the plugin installed is HEAD (uncommitted edits: a warning)."""
    plugins = check_plugin_at(repo, sha, named)
    if _git_dirty(repo):
        print(
            f"tierbench nightly: warning: {repo} has uncommitted changes: results are stored as {sha[:8]}",
            file=sys.stderr,
        )
    return plugins


def _git_dirty(repo: Path) -> bool:
    from .asvtool import git

    try:
        return bool(git(["status", "--porcelain", "--untracked-files=no"], repo).strip())
    except AsvError:
        return False


# -- what measured each result ------------------------------------------------------------------------------


def measured_by() -> dict[str, Any]:
    """The tierbench that measured a plugin's results: its version, and its commit where the install says."""
    return {
        "version": provenance.version(),
        "commit": provenance.tierbench_commit(),
        "modified": provenance.tierbench_modified(),
    }


def stamp(results_dir: Path, machine: str, sha: str) -> list[Path]:
    """Name the tierbench that measured them in the result files of `sha` on `machine` (asv keeps the plugin's
    commit as the file's own); a file asv rewrites later is stamped again by the next nightly."""
    stamped = []
    for path in sorted((results_dir / machine).glob(f"{sha[:8]}-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(data, dict) or data.get("commit_hash") != sha:
            continue
        data["tierbench"] = measured_by()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=None, separators=(",", ":"), sort_keys=True) + "\n")
        tmp.replace(path)
        stamped.append(path)
    return stamped


# -- series identities ----------------------------------------------------------------------------------------


class PluginIdentities(SeriesIdentities):
    """(asv key, commit) -> a code identity: for a provider whose code the repository holds, the text of those
    modules at the commit and the version declared there; tierbench's and other providers as identity.py says."""

    def __call__(self, key: str, commit: str) -> str:
        found = self.provider_and_op(key)
        if found is None:
            return commit
        provider, _ = found
        entries = [m for m in called_modules(provider) if not is_ours(m)]
        if not entries:
            return super().__call__(key, commit)
        cache_key = (provider.name, "repository", commit)
        if cache_key not in self._cache:
            source = self._sources.setdefault(commit, GitSource(self.repo, commit))
            files = repo_closure(source, entries)
            if not files:
                self._cache[cache_key] = super().__call__(key, commit)
            else:
                project, _ = declared(source)
                version = f"{project.get('name', '')}=={project.get('version', '')}"
                self._cache[cache_key] = f"{provider.name}@{digest(files, (version,))}"
        return self._cache[cache_key]


# -- confirmation: the two commits' builds of the plugin, A/B in one process ----------------------------------


def build(config: AsvConfig, sha: str) -> Path:
    """The commit's plugin installed alone (pip --target, no dependencies) into .asv/builds/<sha12>."""
    return build_commit(config.repo, sha, config.root / ".asv" / "builds" / sha[:12], marked="")


def make_importable(config: AsvConfig, sha: str, named: Iterable[str] = ()) -> Path | None:
    """Where this Python cannot import the repository's plugin (an offline nightly measures each commit's build,
    nothing need be installed), put the commit's build first on the path, so the verdicts know which series
    are the plugin's own code and what code each runs. Returns the build folder used, or None."""
    plugins = repo_plugins(config.repo, sha, named)
    if all(_installed_text(m)[0] is not None for m in plugins):
        return None
    try:
        folder = build(config, sha)
    except AsvError as exc:  # judged without it, the plugin's series would pass for controls, which never fail
        raise AsvError(
            f"this Python cannot import the plugin {', '.join(plugins)} of {config.repo}, nor could its commit "
            f"{sha[:8]} be built to read it from: install the plugin (pip install -e {config.repo}); {exc}"
        ) from None
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    return folder


def suspects_of(report: Report) -> dict[tuple[str, str], str]:
    """(asv method name, case label) -> the suspect's asv key, for every suspect row."""
    from . import keys

    out = {}
    for row in report.rows:
        parts = keys.parse(row.key) if row.suspect else None
        if parts is not None:
            out[(parts.provider, parts.label)] = row.key
    return out


def confirm(config: AsvConfig, report: Report, rounds: int, settings: Settings) -> None:
    """Re-measure the suspect series of a plugin's repository: the base and head commits' builds of the plugin
    A/B here, on the asv suite's cases; each suspect gets the paired verdict of its own (case, provider)."""
    wanted = suspects_of(report)
    if not wanted:
        report.confirmation = "nothing suspected: no A/B needed"
        return
    if not (report.base_commit and report.head_commit):
        report.confirmation = "suspects not re-measured: the commits of the two results are unknown"
        return
    start = time.monotonic()
    ab = versions_ab(config, report.base_commit, report.head_commit, rounds, settings, wanted)
    attach_confirmations(report, ab)
    done = sum(1 for r in report.rows if r.ab is not None)
    report.confirmation = (
        f"{done} suspects re-measured in a paired A/B here ({rounds} rounds of tierbench's runner in one process, "
        f"the plugin of {report.base_commit[:8]} and of {report.head_commit[:8]} loaded side by side, "
        f"{time.monotonic() - start:.0f} s)"
    )


def versions_ab(
    config: AsvConfig,
    base_sha: str,
    head_sha: str,
    rounds: int,
    settings: Settings,
    wanted: dict[tuple[str, str], str] | None = None,
) -> Report:
    """A paired A/B of two commits' builds of the plugin on the asv suite's cases (its overrides): every plugin
    provider, or only the (method, label) series `wanted` (rows then named by their asv keys)."""
    from ..benchmarks import _cases, _settings
    from ..commands.run_command import decide_interpreter
    from . import measured_ab, plugin_versions

    overrides = _settings.overrides()
    decide_interpreter(overrides)
    base, head = plugin_versions.load_pair(str(build(config, base_sha)), str(build(config, head_sha)))
    base.label, head.label = base_sha[:8], head_sha[:8]
    cfg, device, planned = measured_ab.plan(overrides, base.catalog)
    pairs, _ = plugin_versions.version_pairs(planned, base, head)
    builtin = _cases.builtin_family_names()
    if wanted is not None:
        named = []
        for pair in pairs:
            method = asv_name(pair.base.name.rsplit("@", 1)[0])
            label = _cases.case_label(pair.case, with_op=pair.case.family not in builtin)
            key = wanted.get((method, label))
            if key is not None:
                named.append(measured_ab.Pair(key, pair.case, pair.op, pair.base, pair.head))
        pairs = named
    modules = ", ".join(base.modules)
    what = plain(
        f"the plugin {modules} at {base_sha[:8]} ({base.identity}) → at {head_sha[:8]} ({head.identity}), "
        f"measured A/B here on {len(pairs)} (case, provider) pairs"
    )
    sides = measured_ab.Sides(base.label, head.label, base_sha, head_sha, what)
    tiers = {**head.catalog.tiers, **base.catalog.tiers}
    with tempfile.TemporaryDirectory(prefix="tierbench-ab-") as tmp:
        measurer = measured_ab.open_measurer(cfg, device, tiers, Path(tmp))
        return measured_ab.run(pairs, measurer, rounds, settings, sides, measured_ab.machine_of(measurer))
