"""Which tierbench is running, and from where: its version, its commit, and the commit of the folder it runs in.

tierbench's own commit comes from the installed package, never from the current folder: a run started in
another repository (a plugin user's project) must not record that repository's head as tierbench's. It is
the BUILD_COMMIT file of an offline build, or the HEAD of the checkout an editable install points to;
a wheel installed from an index carries neither, and records only its version.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# Written beside an offline build's suite/ folder (suite/history/asvtool.py): which commit that build is.
BUILD_COMMIT_FILE = "BUILD_COMMIT"
# The folder holding suite/ (this file is suite/measure/provenance.py): the checkout's top in a checkout,
# the `tierbench` package folder in an offline build or a wheel.
_PACKAGE = Path(__file__).resolve().parents[2]


def git(args: list[str], where: Path) -> str | None:
    """A git command's output in `where` (stripped), or None where git is missing, fails or hangs."""
    try:
        out = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_top(folder: Path) -> Path | None:
    """The top of the git checkout that holds `folder`, or None."""
    top = git(["rev-parse", "--show-toplevel"], folder) if folder.is_dir() else None
    return Path(top).resolve() if top else None


@dataclass(frozen=True)
class Installed:
    commit: str | None  # None where the install does not tell (a wheel from an index)
    where: str  # the checkout or build folder it was read from, for messages
    dirty: bool = False  # the checkout has uncommitted changes to tracked files


def installed(package_root: Path | None = None) -> Installed:
    """The commit of the tierbench this Python imports (package_root: the folder holding suite/)."""
    root = (package_root or _PACKAGE).resolve()
    marker = root / BUILD_COMMIT_FILE
    if marker.is_file():
        return Installed(marker.read_text().strip() or None, str(root))
    top = git_top(root)
    # Only a checkout whose top level is the package's own folder (an editable install) is tierbench's:
    # a wheel installed into a virtualenv inside some other repository sits deeper down.
    if top is None or top != root:
        return Installed(None, str(root))
    sha = git(["rev-parse", "HEAD"], top)
    dirty = bool(git(["status", "--porcelain", "--untracked-files=no"], top)) if sha else False
    return Installed(sha, str(top), dirty)


@cache
def _this_install() -> Installed:
    return installed()


def tierbench_commit() -> str | None:
    return _this_install().commit


def tierbench_modified() -> bool:
    """Whether the checkout's tracked files differ from its commit: then the commit alone does not say what ran."""
    return _this_install().dirty


def version() -> str:
    import tierbench

    return tierbench.__version__


def checkout_root() -> Path | None:
    """The tierbench checkout this Python imports from (an editable install), or None."""
    found = installed()
    return Path(found.where) if found.commit and not (Path(found.where) / BUILD_COMMIT_FILE).exists() else None


def workdir_commit(folder: Path | None = None) -> str | None:
    """HEAD of the repository the current folder is in, unless that is tierbench's own checkout."""
    top = git_top((folder or Path.cwd()).resolve())
    if top is None or top == checkout_root():
        return None
    return git(["rev-parse", "HEAD"], top)


def describe() -> str:
    """`tierbench --version`: the version, and the commit where the install says."""
    found = installed()
    if not found.commit:
        return f"tierbench {version()}"
    dirty = ", with uncommitted changes" if found.dirty else ""
    return f"tierbench {version()} (commit {found.commit[:12]}{dirty}; {found.where})"
