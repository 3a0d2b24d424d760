"""Provenance: tierbench's own version and commit come from the installed package, the working folder's
repository is recorded apart, and the ceilings are cached per user rather than per folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from tierbench.suite import ceilings
from tierbench.suite.measure import provenance
from tierbench.suite.measure.envinfo import environment
from tierbench.suite.naming import slug

REPO = Path(__file__).resolve().parent.parent


def _git_repo(folder: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    folder.mkdir(parents=True, exist_ok=True)
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", *args], cwd=folder, env=env, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True).stdout.strip()


def test_a_run_in_another_repository_records_both_commits_apart(tmp_path, monkeypatch):
    project = _git_repo(tmp_path / "project")
    monkeypatch.chdir(tmp_path / "project")
    env = environment(torch.device("cpu"))
    assert env["workdir_commit"] == project
    assert env["tierbench_commit"] != project and env["git_commit"] == env["tierbench_commit"]
    if Path(provenance.__file__).resolve().is_relative_to(REPO) and provenance.git_top(REPO) == REPO:
        # tierbench imported from this checkout (an editable install): its HEAD is the commit the run names
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        assert env["tierbench_commit"] == head
    assert env["tierbench_version"] == provenance.version()
    mine = provenance.installed()
    if mine.commit:  # an editable install: its checkout's HEAD
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=mine.where, capture_output=True, text=True)
        assert mine.commit == head.stdout.strip()
    monkeypatch.chdir(tmp_path)  # no repository here
    assert provenance.workdir_commit() is None


def test_a_package_inside_another_repository_is_not_that_repositorys_commit(tmp_path):
    """A wheel installed into a virtualenv inside a user's project must not take the project's HEAD."""
    _git_repo(tmp_path / "project")
    package = tmp_path / "project" / ".venv" / "lib" / "site-packages" / "tierbench"
    (package / "suite").mkdir(parents=True)
    assert provenance.installed(package).commit is None
    (package / provenance.BUILD_COMMIT_FILE).write_text("abc123\n")  # an offline build says which it is
    assert provenance.installed(package).commit == "abc123"
    top = _git_repo(tmp_path / "checkout")  # a checkout whose top is the package folder: its HEAD
    assert provenance.installed(tmp_path / "checkout").commit == top


def test_version_from_another_folder():
    out = subprocess.run(
        [sys.executable, "-m", "tierbench.suite.cli", "--version"], cwd="/", capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.startswith("tierbench ")


def test_ceilings_are_measured_once_per_user_not_per_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(provenance, "checkout_root", lambda: None)
    fake = ceilings.Ceilings(device_name="x", copy_gbps=1.0, matmul_tflops={"fp32": 2.0})
    measured = []
    monkeypatch.setattr(ceilings, "measure", lambda device: measured.append(device) or fake)
    cpu = torch.device("cpu")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        assert ceilings.load_or_measure(cpu) == fake
    assert len(measured) == 1
    assert (tmp_path / "cache" / "tierbench" / "ceilings" / f"{slug(ceilings.device_name(cpu))}.json").is_file()
    assert not (tmp_path / "a" / "results").exists()


def test_the_checkouts_committed_ceilings_are_found(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cpu = torch.device("cpu")
    committed = tmp_path / "checkout" / "results" / "ceilings"
    committed.mkdir(parents=True)
    known = ceilings.Ceilings(device_name=ceilings.device_name(cpu), copy_gbps=3.0, matmul_tflops={"fp32": 0.1})
    (committed / f"{slug(known.device_name)}.json").write_text(json.dumps(asdict(known)))
    monkeypatch.setattr(provenance, "checkout_root", lambda: tmp_path / "checkout")

    def must_not_measure(device):
        raise AssertionError("measured although the checkout has them")

    monkeypatch.setattr(ceilings, "measure", must_not_measure)
    assert ceilings.load_or_measure(cpu) == known
    # A folder given explicitly is the only one used.
    assert ceilings.load_or_measure(cpu, committed) == known


def test_a_checkout_whose_files_differ_from_its_commit_says_so(tmp_path, monkeypatch):
    """A commit alone does not say what ran when tracked files changed: the record and the site say so."""
    from tierbench.suite.show.site.pages.meta import commit_text

    checkout = tmp_path / "checkout"
    _git_repo(checkout)
    (checkout / "f.py").write_text("x = 1\n")
    subprocess.run(["git", "add", "f.py"], cwd=checkout, check=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "commit", "-qm", "f"], cwd=checkout, env=env, check=True)
    assert provenance.installed(checkout).dirty is False
    (checkout / "f.py").write_text("x = 2\n")
    assert provenance.installed(checkout).dirty is True
    monkeypatch.setattr(provenance, "installed", lambda package_root=None: provenance.Installed("ab" * 20, "x", True))
    provenance._this_install.cache_clear()
    try:
        recorded = environment(torch.device("cpu"))
    finally:
        provenance._this_install.cache_clear()
    assert recorded["tierbench_modified"] is True
    shown = {"device_name": "cpu", "git_commit": "ab" * 20, "tierbench_modified": True}
    assert commit_text(shown) == "abababababab (with uncommitted changes)"
    assert commit_text({"git_commit": "ab" * 20}) == "abababababab"  # an older record says nothing
