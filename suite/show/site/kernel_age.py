"""Whether the Triton tier's kernels changed since a run's commit, so that a figure older than the code it
describes says so.

A run records the commit of the tierbench that measured it. The site is built in a checkout whose kernels
(`kernels/`, the `triton` tier) may have changed since: then that run's Triton figures describe older code.
The question goes to git in the checkout tierbench runs from; where there is none (an offline build, a
wheel) or git cannot say, the site says nothing about it. A commit from a record reaches git only as a hex
string checked here, never as an option or an expression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ...measure.provenance import git

KERNELS = "kernels"  # the Triton tier's code, from the checkout's top
TRITON_KERNELS = [KERNELS, f":(exclude){KERNELS}/mojo"]  # git pathspecs: the portable tier's Mojo kernels apart
PROVIDER = "triton"  # the provider that runs them
_HEX = re.compile(r"[0-9a-f]{7,40}")
FILES_NAMED = 4  # files a short text names before "and N more"


@dataclass(frozen=True)
class KernelAge:
    commit: str  # as the record names it
    known: bool  # the checkout's history holds that commit
    commits: int = 0  # commits since it that touch the kernels
    files: tuple[str, ...] = ()  # kernel files whose content differs from it, under kernels/
    modified: bool = False  # the run's checkout had uncommitted changes: its commit alone does not say what ran

    @property
    def changed(self) -> bool:
        return self.known and bool(self.files)

    def _commits(self) -> str:
        return f"{self.commits} commit{'s' * (self.commits != 1)}"

    def short(self) -> str:
        """A few words beside a run's name: only when the kernels changed, or the commit is unknown here."""
        if not self.known:
            return "its commit is not in the history this site was built from"
        if not self.changed:
            return ""
        return f"Triton kernels changed since ({self._commits()})"

    def words(self) -> str:
        """The whole statement, for a table cell or a hover."""
        if not self.known:
            return (
                f"{self.commit[:12]} is not in the history this site was built from: whether its Triton kernels "
                "are today's is not known"
            )
        if not self.changed:
            if self.modified:
                return (
                    "its commit's Triton kernels are those this site was built from, but the run's checkout had "
                    "uncommitted changes"
                )
            return "the Triton kernels are those this site was built from"
        named = ", ".join(self.files[:FILES_NAMED])
        more = f" and {len(self.files) - FILES_NAMED} more" if len(self.files) > FILES_NAMED else ""
        return (
            f"the Triton kernels changed since: {self._commits()} to kernels/ "
            f"({named}{more}); its triton figures describe the older kernels"
        )


@dataclass
class KernelHistory:
    """The kernels' history in one checkout (`top`: its top folder, holding kernels/), asked once per commit."""

    top: Path | None
    _usable: bool | None = None
    _ages: dict[str, KernelAge | None] = field(default_factory=dict)

    def usable(self) -> bool:
        """A checkout with kernels/ and a whole history: a shallow clone cannot tell an old commit from an
        unknown one, nor count the commits since."""
        if self._usable is None:
            shallow = git(["rev-parse", "--is-shallow-repository"], self.top) if self.top else None
            self._usable = shallow == "false" and (self.top / KERNELS).is_dir()
        return self._usable

    def age(self, commit: object) -> KernelAge | None:
        """How the kernels at `commit` (a record's git_commit) compare with the checkout's; None where it cannot
        be told (no checkout, a shallow one, no commit recorded, git missing)."""
        text = str(commit or "").strip().lower()
        if self.top is None or not text or not self.usable():
            return None
        if text not in self._ages:
            self._ages[text] = _ask(self.top, text)
        return self._ages[text]


def _ask(top: Path, commit: str) -> KernelAge | None:
    """git's answer in `top` for one commit; None where git fails."""
    if not _HEX.fullmatch(commit):
        return KernelAge(commit, known=False)
    full = git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}"], top)
    if not full:
        return KernelAge(commit, known=False)
    files = git(["diff", "--name-only", full, "HEAD", "--", *TRITON_KERNELS], top)
    count = git(["rev-list", "--count", f"{full}..HEAD", "--", *TRITON_KERNELS], top)
    if files is None or count is None:
        return None
    names = tuple(name.removeprefix(f"{KERNELS}/") for name in files.splitlines() if name)
    return KernelAge(commit, known=True, commits=int(count or 0), files=names)
