"""asv results of several machines, copied into one results folder, publish into one history."""

from __future__ import annotations

import json
import subprocess

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
