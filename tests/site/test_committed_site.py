"""The committed site (results/html) is what `tierbench report --publish` builds from the committed records.

On a difference: rebuild it with `tierbench report --publish` from the repository root and commit
results/html (asv's results/html/history is never touched). The failure lists every page that differs.
The site is built from the run folders git tracks, so runs a user made in this checkout change nothing here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tierbench.suite.measure import provenance
from tierbench.suite.show.site import command
from tierbench.suite.show.site.kernel_age import KernelHistory

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results"


def _pages(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] != "history" and not p.name.startswith(".")
    }


def test_the_committed_site_matches_the_committed_records(tmp_path, capsys):
    if not (RESULTS / "html" / "index.html").is_file():
        pytest.skip("no committed site in this checkout")
    if not KernelHistory(provenance.checkout_root()).usable():  # each run's "Triton kernels changed since"
        pytest.skip("not an editable install of a whole clone: the site's kernel history cannot be rebuilt here")
    out = tmp_path / "html"
    if (RESULTS / "html" / "history" / "index.html").is_file():  # pages link asv's site where it is published
        (out / "history").mkdir(parents=True)
        (out / "history" / "index.html").write_text("")
    args = ["--runs", str(RESULTS / "runs"), "--asv", str(RESULTS / "asv"), "--ceilings", str(RESULTS / "ceilings")]
    args.append("--publish")
    assert command.main([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    built, committed = _pages(out), _pages(RESULTS / "html")
    differ = sorted(name for name in built.keys() & committed.keys() if built[name] != committed[name])
    missing = sorted(built.keys() - committed.keys())
    stale = sorted(committed.keys() - built.keys())
    problems = [f"differs: {n}" for n in differ] + [f"not committed: {n}" for n in missing]
    problems += [f"committed but no longer built: {n}" for n in stale]
    assert not problems, (
        "results/html is out of date with results/runs and results/asv; rebuild it with `tierbench report --publish` "
        "from the repository root and commit it:\n  " + "\n  ".join(problems)
    )


def test_the_published_site_is_built_from_the_runs_git_tracks_and_yours_apart(tmp_path, tree, monkeypatch):
    """A user's run beside the committed ones: `report` shows both in results/site, `report --publish`
    only the committed one in results/html, twice the same bytes; nothing tracked changes."""
    import subprocess

    from sitefakes import record, write_run

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    write_run(tree["runs"], "committed", [record(run_id="committed", provider="eager")])
    git("add", "runs")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "runs")
    write_run(tree["runs"], "mine", [record(run_id="mine", provider="compile", tier="compiler", time=2000.0)])
    base = ["--runs", str(tree["runs"]), "--asv", str(tree["asv"]), "--ceilings", str(tree["ceilings"])]
    monkeypatch.chdir(tmp_path)
    assert command.main(base) == 0
    mine = (tmp_path / "results" / "site" / "runs.html").read_text()
    assert "mine" in mine and "committed" in mine
    assert command.main([*base, "--publish"]) == 0
    published = tmp_path / "results" / "html"
    assert "mine" not in (published / "runs.html").read_text() and "committed" in (published / "runs.html").read_text()
    first = _pages(published)
    assert command.main([*base, "--publish"]) == 0
    assert _pages(published) == first  # the same records, the same bytes
    assert git("status", "--porcelain", "--untracked-files=no") == ""
