"""Each run says whether the Triton kernels changed since its commit: a figure older than the code it describes
says so, on the overview, the family pages, the list of runs and the run's own page."""

from __future__ import annotations

import html
import subprocess
from pathlib import Path

import pytest
from sitefakes import GPU_ENV, record, write_run

# isort: split
from tierbench.suite.show.site import build
from tierbench.suite.show.site.kernel_age import KernelHistory


def _git(repo: Path, *args: str) -> str:
    who = ["-c", "user.name=t", "-c", "user.email=t@t"]
    done = subprocess.run(["git", *who, *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> dict[str, str]:
    """A repository whose kernels changed after its first commit, then only its docs: commit -> sha."""
    repo = tmp_path / "checkout"
    (repo / "kernels").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "kernels" / "matmul.py").write_text("v1\n")
    (repo / "kernels" / "norm.py").write_text("v1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first")
    shas = {"first": _git(repo, "rev-parse", "HEAD")}
    (repo / "kernels" / "matmul.py").write_text("v2\n")
    _git(repo, "commit", "-qam", "matmul v2")
    (repo / "kernels" / "norm.py").write_text("v2\n")
    _git(repo, "commit", "-qam", "norm v2")
    shas["kernels"] = _git(repo, "rev-parse", "HEAD")
    (repo / "README").write_text("docs\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-qm", "docs")
    shas["head"] = _git(repo, "rev-parse", "HEAD")
    shas["repo"] = str(repo)
    return shas


def test_a_commit_before_kernel_changes_names_them_and_later_ones_do_not(checkout):
    history = KernelHistory(Path(checkout["repo"]))
    old = history.age(checkout["first"][:7])  # records may name a short commit
    assert old is not None and old.known and old.changed
    assert old.commits == 2 and old.files == ("matmul.py", "norm.py")
    assert "2 commits" in old.short() and "matmul.py, norm.py" in old.words()
    for later in (checkout["kernels"], checkout["head"][:12]):  # a docs-only commit since changes nothing
        age = history.age(later)
        assert age is not None and age.known and not age.changed and age.short() == ""


def test_a_commit_the_history_lacks_or_a_non_commit_is_unknown_and_never_reaches_git_as_an_option(checkout, tmp_path):
    history = KernelHistory(Path(checkout["repo"]))
    for text in ("0123456789abcdef", f"--output={tmp_path / 'written'}", "HEAD~1", "main"):
        age = history.age(text)
        assert age is not None and not age.known and not age.changed
        assert "not in the history" in age.short()
    assert not (tmp_path / "written").exists()
    assert history.age(None) is None and history.age("") is None


def test_the_portable_tiers_mojo_kernels_are_not_the_triton_kernels(checkout):
    repo = Path(checkout["repo"])
    (repo / "kernels" / "mojo").mkdir()
    (repo / "kernels" / "mojo" / "matmul.mojo").write_text("fn main(): pass\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "mojo")
    age = KernelHistory(repo).age(checkout["head"])
    assert age is not None and age.known and not age.changed and age.commits == 0


def test_no_checkout_a_shallow_one_or_one_without_kernels_tells_nothing(checkout, tmp_path):
    assert KernelHistory(None).age(checkout["first"]) is None
    shallow = tmp_path / "shallow"
    source = f"file://{checkout['repo']}"
    subprocess.run(["git", "clone", "-q", "--depth", "1", source, str(shallow)], check=True, capture_output=True)
    assert KernelHistory(shallow).age(checkout["head"]) is None
    plain = tmp_path / "plain"
    plain.mkdir()
    _git(plain, "init", "-q")
    assert KernelHistory(plain).age(checkout["head"]) is None


def _text(path: Path) -> str:
    return html.unescape(path.read_text())


def test_the_site_marks_the_run_measured_before_the_kernels_changed(tree, checkout):
    old_env = dict(GPU_ENV, git_commit=checkout["first"][:7])
    new_env = dict(GPU_ENV, git_commit=checkout["head"][:12])
    write_run(tree["runs"], "before", [record(run_id="before", provider="triton", tier="triton", env=old_env)])
    case = {"m": 512, "n": 512, "k": 512, "dtype": "bf16", "mode": "fwd"}
    later = record(
        run_id="today",
        provider="triton",
        tier="triton",
        env=new_env,
        case=case,
        case_id="matmul/m=512",
        time=2000.0,
        label="512^3",
        x=512.0,
    )
    write_run(tree["runs"], "today", [later], suite="matmul")
    edited = dict(new_env, tierbench_modified=True)  # measured from a checkout with uncommitted changes
    small = {"m": 128, "n": 128, "k": 128, "dtype": "bf16", "mode": "fwd"}
    mine = record(run_id="edited", env=edited, time=3000.0, case=small, case_id="matmul/m=128", label="128^3")
    write_run(tree["runs"], "edited", [mine], suite="matmul")
    history = KernelHistory(Path(checkout["repo"]))
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"], kernels=history)

    index = _text(tree["html"] / "index.html")
    runs_merged = index.split("runs merged", 1)[1].split("</tr>", 1)[0]
    named = {part.split("/", 1)[0]: part for part in runs_merged.split('<a href="runs/')[1:]}
    assert "Triton kernels changed since (2 commits)" in named["before"]
    assert "changed since" not in named["today"]
    assert "matmul.py, norm.py" in index  # the hover names the files
    commits = index.split("<th>commits</th>", 1)[1].split("</tr>", 1)[0]  # each run's, not the newest alone
    assert checkout["first"][:7] in commits and checkout["head"][:12] in commits
    matrix = index.split('<table class="mx">', 1)[1]
    rows = {
        row.split("</th>", 1)[0].removeprefix("<bdi>").removesuffix("</bdi>"): row
        for row in matrix.split("<tr><th>")[1:]
    }
    assert "kernels changed since" in rows["256^3"] and "matmul.py" in rows["256^3"]  # its hover: what changed
    assert "kernels changed since" not in rows[later.label]
    family = next((tree["html"] / "devices").rglob("matmul.html"))
    assert "Triton kernels changed since (2 commits)" in _text(family)
    assert "triton (triton; run before; Triton kernels changed since)" in _text(family)  # the point's hover
    assert "triton (triton; run today)" in _text(family)
    listed = _text(tree["html"] / "runs.html").split("<tr>")[2:]  # after the header row
    rows = {row.split('<a href="runs/', 1)[1].split("/", 1)[0]: row for row in listed}
    assert "changed since: 2 commits to kernels/" in rows["before"]
    assert "are those this site was built from" in rows["today"]
    assert "uncommitted changes" not in rows["today"] and "uncommitted changes" in rows["edited"]
    report = _text(tree["html"] / "runs" / "before" / "report.html")
    assert "Triton kernels" in report and "its triton figures describe the older kernels" in report
