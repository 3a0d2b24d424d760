"""Driving asv and git for the history commands: config, machine names, commits, offline builds."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..measure import provenance
from ..naming import slug
from .fill_package_dirs import add_missing_package_dirs

CONFIG_NAME = "asv.conf.json"
BUILD_COMMIT_FILE = provenance.BUILD_COMMIT_FILE  # beside an offline build's suite/: which commit it is
# Tells the benchmark suite (suite/benchmarks/_guard.py) which build it must be importing.
BUILD_ENV = "TIERBENCH_ASV_BUILD"
_PATH_KEYS = ("repo", "benchmark_dir", "env_dir", "results_dir", "html_dir")
_PATH_DEFAULTS = {
    "repo": ".",
    "benchmark_dir": "benchmarks",
    "env_dir": "env",
    "results_dir": "results",
    "html_dir": "html",
}


class AsvError(RuntimeError):
    """A problem the user can fix (no config, no asv, unknown commit); the message says how."""


@dataclass(frozen=True)
class AsvConfig:
    path: Path
    data: dict

    @property
    def root(self) -> Path:
        return self.path.parent

    def folder(self, key: str) -> Path:
        """A path setting, absolute: asv reads them relative to the config file's folder."""
        return (self.root / self.data.get(key, _PATH_DEFAULTS[key])).resolve()

    @property
    def results_dir(self) -> Path:
        return self.folder("results_dir")

    @property
    def html_dir(self) -> Path:
        return self.folder("html_dir")

    @property
    def repo(self) -> Path:
        return self.folder("repo")

    def variant(self, folder: Path, **changes: str) -> Path:
        """A copy of this config in `folder` with absolute paths, `changes` applied (e.g. results_dir)."""
        data = dict(self.data)
        for key in _PATH_KEYS:
            data[key] = str(self.folder(key))
        data.update(changes)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / CONFIG_NAME
        path.write_text(json.dumps(data, indent=2) + "\n")
        return path


def find_config(path: str | None = None) -> AsvConfig:
    """The given config, else asv.conf.json in the current folder or at the top of its git checkout."""
    if path:
        candidates = [Path(path)]
    else:
        candidates = [Path.cwd() / CONFIG_NAME]
        top = _git_top(Path.cwd())
        if top:
            candidates.append(top / CONFIG_NAME)
    for candidate in candidates:
        if candidate.is_file():
            try:
                return AsvConfig(candidate.resolve(), json.loads(candidate.read_text()))
            except json.JSONDecodeError as exc:
                raise AsvError(f"{candidate} is not valid JSON: {exc}") from None
    where = ", ".join(dict.fromkeys(str(c) for c in candidates))  # the folder may be the checkout's top
    raise AsvError(f"no asv config at {where}: run from the tierbench checkout or pass --config PATH")


def require_asv() -> None:
    for module, dist in (("asv", "asv"), ("asv_runner", "asv-runner")):
        if importlib.util.find_spec(module) is None:
            raise AsvError(f"{dist} is not installed for {sys.executable}: pip install asv asv-runner")


def run_asv(args: list[str], config: Path, env: dict[str, str] | None = None) -> int:
    """`python -m asv ARGS --config CONFIG` in the config's folder; its output goes to ours."""
    require_asv()
    env = dict(os.environ if env is None else env)
    # asv's benchmark script drops PYTHONPATH's folders from sys.path unless ASV_PYTHONPATH names them:
    # dependencies installed with pip --target (the GPU machine's /tmp/site) would vanish.
    if env.get("PYTHONPATH") and not env.get("ASV_PYTHONPATH"):
        env["ASV_PYTHONPATH"] = env["PYTHONPATH"]
    cmd = [sys.executable, "-m", "asv", *args, "--config", str(config)]
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=config.parent, env=env).returncode


def register_machine(name: str, config: Path, env: dict[str, str] | None = None) -> None:
    """asv records machine facts in ~/.asv-machine.json; --yes takes its defaults for all but the name."""
    code = run_asv(["machine", "--yes", "--machine", name], config, env)
    if code:
        raise AsvError(f"asv machine --machine {name} failed (exit {code})")


def gpu_model() -> str | None:
    """The first GPU's name from nvidia-smi (no CUDA context is made), or None without one."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return lines[0] if out.returncode == 0 and lines else None


def machine_name(gpu: str | None = None, host: str | None = None) -> str:
    """`<gpu model>-<host>` (e.g. h200-node7) or `cpu-<host>`: asv itself records no GPU facts."""
    gpu = gpu if gpu is not None else gpu_model()
    host = slug((host or socket.gethostname()).split(".")[0]) or "host"
    if not gpu:
        return f"cpu-{host}"
    words = [w for w in gpu.split() if w.lower() not in ("nvidia", "geforce", "tesla", "quadro")]
    return f"{slug(' '.join(words)) or 'gpu'}-{host}"


def _git_top(folder: Path) -> Path | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out.stdout.strip()) if out.returncode == 0 else None


def git(args: list[str], repo: Path) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=120)
    except OSError as exc:
        raise AsvError(f"git is not available: {exc}") from None
    if out.returncode:
        raise AsvError(f"git {' '.join(args)} failed in {repo}: {out.stderr.strip()}")
    return out.stdout


def resolve_commit(repo: Path, ref: str) -> str | None:
    """The full hash of a ref or hash prefix in the repo, or None when git does not know it."""
    try:
        return git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], repo).strip() or None
    except AsvError:
        return None


def require_commit(repo: Path, ref: str) -> str:
    sha = resolve_commit(repo, ref)
    if sha:
        return sha
    try:
        recent = git(["log", "--oneline", "-8"], repo).strip().splitlines()
        branches = git(["branch", "--format=%(refname:short)"], repo).split()
    except AsvError:
        recent, branches = [], []
    raise AsvError(
        f"unknown commit {ref!r} in {repo}; branches: {', '.join(branches) or 'none'}; "
        f"recent commits: {'; '.join(recent) or 'none'}"
    )


# What the project's own series run: a commit that leaves these unchanged leaves them unchanged.
OWN_CODE_PATHS = ("kernels", "suite/providers/triton_tier.py")


def code_tree(repo: Path, sha: str, paths: tuple[str, ...] = OWN_CODE_PATHS) -> str:
    """The git object ids of `paths` at `sha`, joined: equal for commits that run the same own code. The
    commit itself when git cannot tell (not a checkout, unknown commit)."""
    ids = []
    for path in paths:
        try:
            ids.append(git(["rev-parse", "--verify", "--quiet", f"{sha}:{path}"], repo).strip()[:12] or "-")
        except AsvError:
            ids.append("-")
    return sha if all(i == "-" for i in ids) else "+".join(ids)


def commit_list(repo: Path, spec: str) -> list[str]:
    """Commits of a range `A..B` (oldest first), or of a comma-separated list of refs."""
    if ".." in spec:
        shas = git(["rev-list", "--reverse", spec], repo).split()
        if not shas:
            raise AsvError(f"the range {spec} holds no commits")
        return shas
    return [require_commit(repo, ref) for ref in spec.split(",") if ref]


def installed_commit() -> tuple[str | None, str]:
    """(commit, where) of the tierbench that this Python imports: an offline build's BUILD_COMMIT file,
    or the HEAD of the checkout an editable install points to; None when neither tells."""
    spec = importlib.util.find_spec("tierbench.suite")
    if spec is None or not spec.origin:
        return None, "tierbench is not importable"
    found = provenance.installed(Path(spec.origin).resolve().parent.parent)
    return found.commit, found.where + (" (with uncommitted changes)" if found.dirty else "")


def build_commit(repo: Path, sha: str, dest: Path, marked: str = "tierbench") -> Path:
    """Install one commit's tierbench into `dest` (pip --target), with no network and no dependencies.

    The history of an offline machine: each commit gets its own folder, put first on PYTHONPATH while
    asv (--python=same) measures it. Needs setuptools in this Python (the project's build backend).
    `marked`: the installed package folder that names the commit (BUILD_COMMIT); "" for `dest` itself (a
    plugin's repository, which installs no tierbench).
    """
    marker = dest / marked / BUILD_COMMIT_FILE if marked else dest / BUILD_COMMIT_FILE
    if marker.exists():
        return dest
    with tempfile.TemporaryDirectory(prefix="tierbench-src-") as tmp:
        archive = Path(tmp) / "src.tar"
        with archive.open("wb") as fh:
            try:
                code = subprocess.run(["git", "archive", "--format=tar", sha], cwd=repo, stdout=fh).returncode
            except OSError as exc:
                raise AsvError(f"git is not available: {exc}") from None
        if code:
            raise AsvError(f"git archive {sha} failed in {repo}")
        src = Path(tmp) / "src"
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4: refuse odd members
                tar.extractall(src, filter="data")
            else:
                tar.extractall(src)  # noqa: S202 - our own repository's archive
        add_missing_package_dirs(src)
        if dest.exists():
            shutil.rmtree(dest)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-compile",
            "--target",
            str(dest),
            str(src),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            raise AsvError(f"building {sha[:8]} failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}".strip())
    marker.write_text(sha + "\n")
    return dest


def env_with_build(build: Path) -> dict[str, str]:
    """This process's environment with `build` first on PYTHONPATH (asv's existing env keeps PYTHONPATH)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(build), *filter(None, [env.get("PYTHONPATH")])])
    env["ASV_PYTHONPATH"] = env["PYTHONPATH"]  # see run_asv
    return env
