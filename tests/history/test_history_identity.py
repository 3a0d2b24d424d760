"""A provider's code identity: the source of the modules it executes, so a series' history spans the commits
that left that code alone, and restarts at the ones that did not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tierbench.suite.benchmarks import identity
from tierbench.suite.history.identities import SeriesIdentities

REPO = Path(__file__).resolve().parents[2]

KERNELS_INIT = "from .decode import attention_with_kvcache\nfrom .norm import rms_norm\n"
FILES = {
    "kernels/__init__.py": KERNELS_INIT,
    "kernels/_common.py": "LAUNCHES = {}\n",
    "kernels/norm.py": "from ._common import LAUNCHES\nfrom tierbench.timing import now\n\ndef rms_norm(x): ...\n",
    "kernels/decode.py": "from ._common import LAUNCHES\n\ndef attention_with_kvcache(q):\n    return q\n",
    "core/__init__.py": "VERSION = '1'\n",
    "core/timing.py": "def now():\n    return 0\n",
    "suite/providers/triton_tier.py": "from ..ops import base\n\ndef prepare():\n    pass\n",
    "suite/ops/base.py": "HARNESS = 1\n",
}


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, changes: dict[str, str]) -> str:
    for path, text in changes.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "c")
    return _git(repo, "rev-parse", "HEAD")


def _prepare_in(module: str):
    def prepare():
        pass

    prepare.__module__ = module
    return prepare


TRITON = SimpleNamespace(tier="triton", prepare=_prepare_in("tierbench.suite.providers.triton_tier"))
RMS_NORM, DECODE = SimpleNamespace(kernel="rms_norm"), SimpleNamespace(kernel="attention_with_kvcache")


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q")
    return tmp_path


def test_an_own_series_identity_follows_the_modules_its_kernel_imports(repo):
    first = _commit(repo, FILES)
    decode_changed = _commit(repo, {"kernels/decode.py": FILES["kernels/decode.py"] + "# faster\n"})
    common_changed = _commit(repo, {"kernels/_common.py": "LAUNCHES = {1: 2}\n"})
    timing_changed = _commit(repo, {"core/timing.py": "def now():\n    return 1\n"})
    harness_changed = _commit(repo, {"suite/ops/base.py": "HARNESS = 2\n", "kernels/__init__.py": KERNELS_INIT + "#\n"})
    adapter_changed = _commit(repo, {"suite/providers/triton_tier.py": FILES["suite/providers/triton_tier.py"] + "#\n"})

    def ids(op):
        return [
            identity.code_identity(TRITON, op, identity.GitSource(repo, c))
            for c in (first, decode_changed, common_changed, timing_changed, harness_changed, adapter_changed)
        ]

    norm, decode = ids(RMS_NORM), ids(DECODE)
    assert norm[0] == norm[1] and decode[0] != decode[1]  # a commit to the decode kernel leaves norm's history
    assert norm[1] != norm[2] and decode[1] != decode[2]  # a module both import
    assert norm[2] != norm[3] and decode[2] == decode[3]  # tierbench.timing, imported by the norm kernel only
    assert norm[3] == norm[4]  # the harness, and a package __init__ that only re-exports
    assert norm[4] != norm[5]  # the adapter's own text
    files = identity.module_closure(identity.GitSource(repo, first), ("tierbench.kernels.norm",))
    assert sorted(files) == ["core/timing.py", "kernels/_common.py", "kernels/norm.py"]


def test_a_kernel_is_found_by_its_modules_exports_where_the_package_imports_none_by_name(repo):
    """kernels/__init__.py gathers each module's EXPORTS: the entry is the module whose EXPORTS names the kernel,
    at a commit and in a folder alike; the commits before, with `from .module import name`, resolve as then."""
    old_style = _commit(repo, FILES)
    gathered = {
        "kernels/__init__.py": "import pkgutil\n\nfor info in pkgutil.iter_modules(__path__):\n    pass\n",
        "kernels/norm.py": FILES["kernels/norm.py"] + "\nEXPORTS = {'rms_norm': 1}\n",
        "kernels/decode.py": FILES["kernels/decode.py"] + "\nEXPORTS: dict = {'attention_with_kvcache': 2}\n",
        "kernels/_private.py": "EXPORTS = {'rms_norm': 3}\n",  # a private module exports nothing
    }
    new_style = _commit(repo, gathered)
    for commit, norm_text in ((old_style, FILES["kernels/norm.py"]), (new_style, gathered["kernels/norm.py"])):
        source = identity.GitSource(repo, commit)
        assert identity.resolve_entry(source, "tierbench.kernels:rms_norm") == "tierbench.kernels.norm"
        assert identity.resolve_entry(source, "tierbench.kernels:attention_with_kvcache") == "tierbench.kernels.decode"
        assert identity.resolve_entry(source, "tierbench.kernels:matmul") is None
        assert identity.module_closure(source, ("tierbench.kernels.norm",))["kernels/norm.py"] == norm_text
    listed = ["__init__.py", "_common.py", "_private.py", "decode.py", "norm.py"]
    assert identity.GitSource(repo, new_style).names("kernels") == listed
    assert identity.FolderSource(repo).names("kernels") == listed
    at_commit = identity.code_identity(TRITON, DECODE, identity.GitSource(repo, new_style))
    assert at_commit is not None and at_commit == identity.code_identity(TRITON, DECODE, identity.FolderSource(repo))


def test_a_folder_and_its_commit_give_one_identity(repo):
    sha = _commit(repo, FILES)
    at_commit = identity.code_identity(TRITON, RMS_NORM, identity.GitSource(repo, sha))
    assert at_commit == identity.code_identity(TRITON, RMS_NORM, identity.FolderSource(repo))


def test_a_kernel_the_commit_lacks_has_no_identity(repo):
    sha = _commit(repo, FILES)
    assert identity.code_identity(TRITON, SimpleNamespace(kernel="matmul"), identity.GitSource(repo, sha)) is None
    assert identity.code_identity(TRITON, RMS_NORM, identity.GitSource(repo, "0" * 40)) is None


def test_a_plugin_provider_is_identified_by_its_distribution(monkeypatch, repo):
    """A provider whose kernel lives outside the project: its distribution's version and commit, never the
    project's files."""
    import numpy

    kernel = numpy.matmul
    plugin = SimpleNamespace(tier="mine", prepare=(lambda: kernel))
    plugin.prepare.__module__ = "tierbench.suite.providers.base"  # call_provider's wrapper, as a plugin gets
    assert identity.called_modules(plugin) == ("tierbench.suite.providers.base", "numpy")
    assert identity.distribution_identity("numpy")[0] == f"numpy=={numpy.__version__}"
    first = _commit(repo, FILES)
    kernels_changed = _commit(repo, {"kernels/norm.py": FILES["kernels/norm.py"] + "#\n"})
    op = SimpleNamespace(kernel=None)
    a = identity.code_identity(plugin, op, identity.GitSource(repo, first))
    assert a == identity.code_identity(plugin, op, identity.GitSource(repo, kernels_changed))
    monkeypatch.setattr(identity, "distribution_identity", lambda name: (f"{name}==0.0-other", "commit abc"))
    assert identity.code_identity(plugin, op, identity.GitSource(repo, first)) != a


def test_the_package_folders_are_pyprojects():
    tomllib = pytest.importorskip("tomllib")
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert identity.PACKAGE_DIRS == mapping


def _known(*commits: str) -> bool:
    return all(
        subprocess.run(["git", "cat-file", "-e", c], cwd=REPO, capture_output=True).returncode == 0 for c in commits
    )


@pytest.mark.skipif(sys.platform == "win32", reason="git plumbing")
def test_the_committed_history_keeps_the_norm_series_across_an_attention_commit():
    """84e19d42 -> 683cbe48 changed the attention kernel only (the H200 history measured both)."""
    if not _known("84e19d42", "683cbe48"):
        pytest.skip("the commits of the H200 history are not in this checkout")
    ids = SeriesIdentities(REPO)
    norm = "norm.Norm.track_triton('rms_norm 16384x4096 bf16 fwd')"
    attention = "attention.Attention.track_triton('B2 H16 S8192 D128 causal bf16 fwd')"
    assert ids(norm, "84e19d42") == ids(norm, "683cbe48") != "84e19d42"
    assert ids(attention, "84e19d42") != ids(attention, "683cbe48")
    assert ids("norm.Norm.track_nobody('x')", "84e19d42") == "84e19d42"  # unknown provider: no shared history
