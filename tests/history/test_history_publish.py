"""asv results of several machines, copied into one results folder, publish into one history."""

from __future__ import annotations

import json
import subprocess

import pytest
from asv_result_files import write_result

from tierbench.suite.history import nightly_command

NAME = "matmul.Matmul.time_eager"


def _definition(label: str, version: str) -> dict:
    return {
        NAME: {
            "name": NAME,
            "code": "",
            "param_names": ["case"],
            "params": [[label]],
            "type": "time",
            "unit": "seconds",
            "version": version,
            "timeout": 60,
            "number": 1,
            "repeat": 3,
            "min_run_count": 1,
            "warmup_time": 0,
            "sample_time": 0.01,
            "rounds": 1,
        },  # fmt: skip
        "version": 2,
    }


def test_results_copied_in_from_two_machines_publish_as_one_history(project, capsys):
    git = ["git", "-C", str(project), "-c", "user.email=ci@example.com", "-c", "user.name=ci"]
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    config = json.loads((project / "asv.conf.json").read_text())
    (project / "asv.conf.json").write_text(json.dumps({**config, "branches": ["HEAD"], "environment_type": "existing"}))
    results = project / "results" / "asv"
    # Each host's results/asv/<machine>/ folder as its own nightly left it (other cases, another version).
    for machine, label in (("h200-host-a", "256^3 bf16 fwd"), ("a100-host-b", "512^3 bf16 fwd")):
        write_result(results, machine, sha, {NAME: {label: [1.0e-3, 1.1e-3, 1.2e-3]}}, version=f"v-{machine}")
        (results / machine / "benchmarks.json").write_text(json.dumps(_definition(repr(label), f"v-{machine}")))
    args = ["--publish-only", "--no-report", "--config", str(project / "asv.conf.json")]
    assert nightly_command.main(args) == 0
    assert "2 machines: a100-host-b, h200-host-a" in capsys.readouterr().out
    graphs = project / "results" / "html" / "history" / "graphs" / "branch-HEAD"
    for machine in ("h200-host-a", "a100-host-b"):
        (graph,) = graphs.glob(f"machine-{machine}/*/{NAME}.json")
        (point,) = json.loads(graph.read_text())  # the commit's median, among the merged cases
        assert [v for v in point[1] if v is not None] == [1.1e-3], machine


def test_publish_only_needs_results(project, capsys):
    assert nightly_command.main(["--publish-only", "--config", str(project / "asv.conf.json")]) == 2
    assert "no machine's results" in capsys.readouterr().err


def _published(project):
    git = ["git", "-C", str(project), "-c", "user.email=ci@example.com", "-c", "user.name=ci"]
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    config = json.loads((project / "asv.conf.json").read_text())
    (project / "asv.conf.json").write_text(json.dumps({**config, "branches": ["HEAD"], "environment_type": "existing"}))
    results = project / "results" / "asv"
    write_result(results, "h200-host-a", sha, {NAME: {"256^3 bf16 fwd": [1.0e-3, 1.1e-3, 1.2e-3]}}, version="v1")
    (results / "h200-host-a" / "benchmarks.json").write_text(json.dumps(_definition(repr("256^3 bf16 fwd"), "v1")))
    return results, sha


def _state(folder):
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.rglob("*") if p.is_file()
    }


@pytest.mark.slow
def test_publishing_unchanged_results_again_rewrites_no_file(project, capsys):
    """asv stamps each publish with its time and the site its footer: neither is a change worth a commit."""
    results, sha = _published(project)
    args = ["--publish-only", "--config", str(project / "asv.conf.json")]
    assert nightly_command.main(args) == 0
    html = project / "results" / "html"
    first = _state(html)
    assert "history/index.html" in first and "index.html" in first and "trends/index.html" in first
    assert nightly_command.main(args) == 0
    assert _state(html) == first
    assert "(0 files changed)" in capsys.readouterr().out
    # New results do change the pages that show them.
    write_result(results, "h200-host-a", sha, {NAME: {"256^3 bf16 fwd": [2.0e-3, 2.1e-3, 2.2e-3]}}, version="v1")
    assert nightly_command.main(args) == 0
    changed = {k for k, v in _state(html).items() if first.get(k) != v}
    assert any(k.startswith("history/graphs/") for k in changed)


@pytest.mark.slow
def test_a_failed_publish_leaves_the_published_site_as_it_was(project, capsys):
    _published(project)
    args = ["--publish-only", "--no-report", "--config", str(project / "asv.conf.json")]
    assert nightly_command.main(args) == 0
    html = project / "results" / "html" / "history"
    before = _state(html)
    config = json.loads((project / "asv.conf.json").read_text())
    (project / "asv.conf.json").write_text(json.dumps({**config, "branches": ["no-such-branch"]}))
    assert nightly_command.main(args) == 2
    assert "left as it was" in capsys.readouterr().err and _state(html) == before
