"""Real asv on a CPU: two commits of a throwaway copy of the project, each built offline and measured by
`tierbench nightly --existing-env`, two A/A runs, asv publish, then `tierbench compare` on what was stored, a
paired A/B run of the two commits, and a nightly on a second machine that must leave the first one's history
and graphs intact (and the published pages must open with no network). Then a third commit whose eager matmul
does its product sixteen times: a nightly of it in which that series is a control (it drifted: exit 0, drift
reported), and one in which it is the project's own (`--own eager`: suspected, confirmed by a paired A/B,
exit 1).

A few minutes: every asv benchmark process imports torch (the suite is cut to the matmul eager series).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tierbench.suite.history import asvtool, nightly_command, noise

# Real asv runs whose verdicts (slower, unchanged) come from timings: nothing else may run beside them.
pytestmark = pytest.mark.alone

REPO = Path(__file__).resolve().parents[2]
# The suite cut to the plain product's forward through eager: one series per class that runs.
PLAIN_MATMUL = "providers=[eager] matmul.dtypes=[fp32] matmul.ops=[matmul] matmul.modes=[fwd]"
MACHINE = "cpu-ci"
KEY = "matmul.Matmul.track_eager('256^3 fp32 fwd')"


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _tierbench(repo: Path, env: dict[str, str], *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tierbench.suite.cli", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    root = tmp_path_factory.mktemp("asv-history")
    repo = root / "repo"
    repo.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "assets")
    for name in ("core", "kernels", "suite", "conf"):
        shutil.copytree(REPO / name, repo / name, ignore=skip)
    for name in ("pyproject.toml", "asv.conf.json", "README.md"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, repo / name)
    if (REPO / "results" / "ceilings").is_dir():  # measured ceilings of this CPU, if cached: saves seconds
        shutil.copytree(REPO / "results" / "ceilings", repo / "results" / "ceilings")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first")
    with (repo / "conf" / "__init__.py").open("a") as fh:
        fh.write("# second commit\n")
    _git(repo, "commit", "-qam", "second")
    first, second = _git(repo, "rev-parse", "HEAD~1"), _git(repo, "rev-parse", "HEAD")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH", "ASV_PYTHONPATH")}
    # One thread: a two-thread product on a shared 2-core runner stalls whenever either thread is descheduled.
    env.update(
        HOME=str(root / "home"),
        TIERBENCH_ASV_SUITE="smoke",
        TIERBENCH_ASV_OVERRIDES=f"{PLAIN_MATMUL} matmul.square=[256]",
        OMP_NUM_THREADS="1",
    )
    run = _tierbench(
        repo,
        env,
        "nightly",
        "--commits",
        f"{first},{second}",
        "--existing-env",
        "--machine",
        MACHINE,
        "--bench",
        "matmul",
        "--aa",
        "2",
        "--no-report",
    )
    # Eager is a control here (the project's own tier, triton, is not timed on a CPU): whatever it did between
    # the two commits, nothing can be confirmed and the nightly exits 0.
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert re.search(r" -> \w+: 0 confirmed, 0 suspected", run.stdout), run.stdout[-3000:]
    return repo, first, second, env


def _result_file(repo: Path, commit: str) -> Path:
    (path,) = (repo / "results" / "asv" / MACHINE).glob(f"{commit[:8]}-*.json")
    return path


def test_stored_results_carry_the_timer_samples(history):
    repo, first, second, _ = history
    for commit in (first, second):
        data = json.loads(_result_file(repo, commit).read_text())
        assert data["commit_hash"] == commit and data["params"]["machine"] == MACHINE
        row = dict(zip(data["result_columns"], data["results"]["matmul.Matmul.track_eager"]))
        assert row["params"] == [["'256^3 fp32 fwd'"]]
        (samples,) = row["samples"]
        assert len(samples) >= 9 and all(0 < s < 1 for s in samples)  # seconds, one per repetition
        assert row["stats_number"] == [1] and row["stats_repeat"] == [len(samples)]
        assert row["stats_ci_99_a"][0] <= row["result"][0] <= row["stats_ci_99_b"][0]
    described = json.loads((repo / "results" / "asv" / "benchmarks.json").read_text())["matmul.Matmul.track_eager"]
    assert described["unit"] == "seconds" and described["type"] == "track" and len(described["version"]) == 16
    assert (repo / "results" / "html" / "history" / "index.html").exists()
    assert json.loads((repo / "results" / "asv" / MACHINE / "benchmarks.json").read_text())["matmul.Matmul.track_eager"]
    model = json.loads((repo / "results" / "noise" / f"{MACHINE}.json").read_text())
    assert model["format"] == noise.NOISE_FORMAT and model["series"][KEY]["runs"] == 4  # two nightly runs, two A/A runs
    assert len(list((repo / "results" / "noise" / MACHINE / "runs").iterdir())) == 2
    # The nightly judged the second commit against the first.
    verdicts = json.loads((repo / "results" / "compare" / f"{MACHINE}-{first[:8]}-{second[:8]}.json").read_text())
    assert verdicts["method"] == "across sessions" and verdicts["series"][0]["benchmark"] == KEY
    assert verdicts["series"][0]["own_code"] is False and verdicts["series"][0]["verdict"] in ("steady", "drift")


def test_compare_two_recorded_commits(history):
    repo, first, second, env = history
    run = _tierbench(repo, env, "compare", first[:10], second[:10])
    assert run.returncode == 0, run.stderr  # a control never fails the run
    # The table row (eager is a control series, so a drift warning above the table may name it too).
    (line,) = [line for line in run.stdout.splitlines() if KEY in line and line.startswith("|")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[0] in ("steady (control)", "⚠️ drift (control)")
    assert cells[2].endswith("s") and cells[3].endswith("s")  # before/after with units
    assert float(cells[6].rstrip("%")) >= 2.0 and cells[7]  # the threshold and where it came from
    assert cells[8] == "across sessions"
    assert (repo / "results" / "compare" / f"{MACHINE}-{first[:8]}-{second[:8]}.html").exists()


def test_compare_nominates_a_slowed_result(history, tmp_path):
    """The head commit's stored result with every time made 1.5x longer: an own series suspected (stored results
    cannot confirm: nothing fails), a control reported as drift."""
    repo, _, second, env = history
    stored = _result_file(repo, second)
    data = json.loads(stored.read_text())
    columns = data["result_columns"]
    row = data["results"]["matmul.Matmul.track_eager"]
    for column in ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75"):
        row[columns.index(column)] = [v * 1.5 for v in row[columns.index(column)]]
    row[columns.index("samples")] = [[s * 1.5 for s in row[columns.index("samples")][0]]]
    slowed = tmp_path / "slowed.json"
    slowed.write_text(json.dumps(data))
    # No noise model: this checks the path from stored files to a verdict, not this runner's A/A noise.
    outputs = ["--noise", "none", "--md", str(tmp_path / "r.md"), "--html", str(tmp_path / "r.html")]
    run = _tierbench(repo, env, "compare", str(stored), str(slowed), *outputs)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Machine drift: 1 control series" in run.stdout  # eager is not this project's code: a control
    (line,) = [line for line in run.stdout.splitlines() if KEY in line and line.startswith("|")]  # the table row
    assert "drift (control)" in line and float(line.split("|")[5].split()[0]) == pytest.approx(1.5, abs=0.02)
    run = _tierbench(repo, env, "compare", str(stored), str(slowed), "--own", "eager", *outputs)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "**Suspected, not confirmed**: 0 confirmed, 1 suspected" in run.stdout


def test_nightly_head_refuses_a_build_of_another_commit(history):
    repo, _, _, env = history
    run = _tierbench(repo, env, "nightly", "--head", "--machine", MACHINE, "--no-report")
    assert run.returncode == 2
    assert "not HEAD" in run.stderr and "--existing-env" in run.stderr and "Traceback" not in run.stderr


def test_unknown_commit_names_the_valid_ones(history):
    repo, _, _, env = history
    run = _tierbench(repo, env, "nightly", "--commits", "nope", "--existing-env", "--machine", MACHINE)
    assert run.returncode == 2 and "unknown commit 'nope'" in run.stderr and "branches: main" in run.stderr


def test_missing_asv_is_a_clear_error(monkeypatch, tmp_path, capsys):
    real = asvtool.importlib.util.find_spec
    monkeypatch.setattr(asvtool.importlib.util, "find_spec", lambda name, *a: None if name == "asv" else real(name, *a))
    (tmp_path / "asv.conf.json").write_text("{}")
    assert nightly_command.main(["--config", str(tmp_path / "asv.conf.json"), "--machine", "m"]) == 2
    assert "asv is not installed" in capsys.readouterr().err


def test_machine_names_carry_the_gpu_model():
    assert asvtool.machine_name("NVIDIA H200", "node7.cluster") == "h200-node7"
    assert asvtool.machine_name("NVIDIA GeForce RTX 4090", "box") == "rtx-4090-box"
    assert asvtool.machine_name("", "box") == "cpu-box"


def test_paired_ab_of_two_commits(history, tmp_path):
    """Both commits built and measured here, alternating round by round, then judged per round."""
    repo, first, second, env = history
    out = tmp_path / "ab.json"
    run = _tierbench(
        repo,
        env,
        "compare",
        "--ab",
        first,
        second,
        "--rounds",
        "3",
        "--bench",
        "matmul",
        "--machine",
        MACHINE,
        "--json",
        str(out),
        timeout=900,  # six asv runs
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]  # eager is a control: never a failure
    data = json.loads(out.read_text())
    assert data["method"] == "paired A/B" and data["base"] == first and data["head"] == second
    # --bench matmul also matches the epilogue's and FP8's series (FP8: skipped on a CPU): the plain product's
    (series,) = [s for s in data["series"] if s["benchmark"] == KEY]
    assert series["ab"]["unit"] == "round" and series["ab"]["n"] == 3
    assert series["verdict"] in ("steady", "drift") and series["own_code"] is False
    assert "s per series" in data["noise"]
    stored_dir = repo / "results" / "compare" / "ab"
    stored = json.loads((stored_dir / f"{MACHINE}-{first[:8]}-{second[:8]}.json").read_text())
    assert [r["order"][0] for r in stored["rounds"]] == ["base", "head", "base"]  # alternating
    assert stored["planned"] == 3 and not list(stored_dir.glob("*.tmp"))  # saved round by round, then whole
    assert all(len(r["base"][KEY]["samples"]) >= 3 and len(r["head"][KEY]["samples"]) >= 3 for r in stored["rounds"])


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def second_machine(history):
    """A nightly of the second commit on another machine name, with other cases (another version)."""
    repo, _, second, env = history
    results, graphs = repo / "results" / "asv", repo / "results" / "html" / "history" / "graphs"
    before = _digest(results / MACHINE), {str(p.relative_to(graphs)) for p in graphs.rglob("*.json")}
    other = dict(env, TIERBENCH_ASV_OVERRIDES=f"{PLAIN_MATMUL} matmul.square=[128]")
    run = _tierbench(
        repo,
        other,
        "nightly",
        "--commits",
        second,
        "--existing-env",
        "--machine",
        "cpu-other",
        "--bench",
        "matmul",
        "--no-report",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return repo, before


def test_a_second_machine_leaves_the_first_ones_history_intact(second_machine):
    repo, (results_before, graphs_before) = second_machine
    results, graphs = repo / "results" / "asv", repo / "results" / "html" / "history" / "graphs"
    assert _digest(results / MACHINE) == results_before  # results and definitions untouched
    assert graphs_before <= {str(p.relative_to(graphs)) for p in graphs.rglob("*.json")}
    assert any(f"machine-{MACHINE}" in p for p in graphs_before)
    assert any("machine-cpu-other" in str(p) for p in graphs.rglob("*.json"))
    merged = json.loads((results / "benchmarks.json").read_text())["matmul.Matmul.track_eager"]
    assert {"'256^3 fp32 fwd'", "'128^3 fp32 fwd'"} <= set(merged["params"][0])
    assert (
        merged["version"]
        == json.loads((results / MACHINE / "benchmarks.json").read_text())["matmul.Matmul.track_eager"]["version"]
    )


def test_the_published_pages_work_offline(second_machine):
    from tierbench.suite.show.site import browser

    if browser.find_chromium() is None:
        pytest.skip("headless Chromium not installed (apt-get install -y chromium)")
    repo, _ = second_machine
    html = repo / "results" / "html" / "history"
    page = (html / "index.html").read_text()
    if "https://code.jquery.com" in page:
        pytest.skip("the vendored scripts could not be fetched here (npm unreachable)")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with browser.Browser() as chromium:
            probe = "new Promise(r => setTimeout(() => r([location.pathname, !!window.jQuery, document.body.innerText]), 1500))"  # noqa: E501
            load = chromium.load(f"http://127.0.0.1:{server.server_address[1]}/index.html", probe=probe)
    finally:
        server.shutdown()
    path, has_jquery, text = load.value
    assert path.endswith("index.html") and has_jquery, load.errors
    assert "continental origin of swallow" not in text and "track_eager" in text


CI_DIR = REPO / "examples" / "ci"


def test_the_pull_request_script_reports_and_exits_as_compare_does(history, tmp_path):
    """examples/ci/compare_pr.sh on the two stored commits (both have results: nothing is measured again)."""
    repo, first, second, env = history
    report = tmp_path / "report.md"
    script_env = dict(
        env,
        TIERBENCH=f"{sys.executable} -m tierbench.suite.cli",
        TIERBENCH_MACHINE=MACHINE,
        TIERBENCH_BENCH="matmul",
        TIERBENCH_CONFIRM="0",
    )
    run = subprocess.run(
        ["bash", str(CI_DIR / "compare_pr.sh"), first[:10], second[:10], str(report)],
        cwd=repo,
        env=script_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "has results on cpu-ci; skipped" in run.stdout  # --skip-existing: stored commits are not measured again
    text = report.read_text()
    (line,) = [line for line in text.splitlines() if KEY in line and line.startswith("|")]
    assert "(control)" in line.strip("|").split("|")[0]
    bad = subprocess.run(
        ["bash", str(CI_DIR / "compare_pr.sh"), "nope", second, str(report)],
        cwd=repo,
        env=script_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "unknown base commit `nope`" in report.read_text()


def test_the_workflow_runs_the_script_on_a_pull_request_and_posts_its_report():
    import yaml

    flow = yaml.safe_load((CI_DIR / "tierbench-regressions.yml").read_text())
    assert "pull_request" in flow[True]  # YAML 1.1 reads the key `on` as true
    (job,) = flow["jobs"].values()
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    steps = {s.get("name", s.get("uses")): s for s in job["steps"]}
    assert "examples/ci/compare_pr.sh" in steps["Measure base and head, compare"]["run"]
    assert "gh pr comment" in steps["Post the report on the pull request"]["run"]
    assert steps["Fail on a confirmed regression"]["if"] == "steps.compare.outputs.code != '0'"


# The third commit: eager's product done sixteen times, so the series is about sixteen times slower at the
# head: far beyond what the load of a shared CPU does to a run between two sessions.
SLOWED = (
    "def eager_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
    "    for _ in range(15):  # deliberately slow: the history tests' regression\n"
    "        torch.matmul(a, b)\n"
    "    return torch.matmul(a, b)\n"
)
PLAIN = "def eager_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n    return torch.matmul(a, b)\n"


@pytest.fixture(scope="module")
def slowed(history):
    repo, _, second, env = history
    ops = repo / "suite" / "ops" / "matmul.py"
    text = ops.read_text()
    assert PLAIN in text
    ops.write_text(text.replace(PLAIN, SLOWED))
    _git(repo, "commit", "-qam", "third: a slower eager matmul")
    return repo, second, _git(repo, "rev-parse", "HEAD"), env


def _nightly(repo: Path, env: dict[str, str], third: str, *extra: str) -> subprocess.CompletedProcess:
    args = ["--existing-env", "--machine", MACHINE, "--bench", "matmul", "--no-report", "--no-publish"]
    return _tierbench(repo, env, "nightly", "--commits", third, *args, *extra, timeout=900)


def _verdict(repo: Path, second: str, third: str) -> dict:
    data = json.loads((repo / "results" / "compare" / f"{MACHINE}-{second[:8]}-{third[:8]}.json").read_text())
    return next(s for s in data["series"] if s["benchmark"] == KEY) | {"report": data}


def test_a_nightly_in_which_a_control_drifts_exits_0_and_reports_the_drift(slowed):
    repo, second, third, env = slowed
    run = _nightly(repo, env, third)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Machine drift: 1 control series" in run.stdout and KEY in run.stdout
    row = _verdict(repo, second, third)
    assert row["verdict"] == "drift" and row["own_code"] is False and row["ratio"] > 4
    assert row["report"]["regression"] is False and row["report"]["drift"]["controls_moved"] == [KEY]


def test_a_nightly_in_which_an_own_series_is_slowed_confirms_it_and_exits_1(slowed):
    repo, second, third, env = slowed
    # Six rounds: a tenfold slowdown stays confirmed when a busy machine disturbs two of them (with four,
    # two disturbed rounds widen the paired interval past 1).
    run = _nightly(repo, env, third, "--own", "eager", "--rounds", "6")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert re.search(r" -> \w+: 1 confirmed, 0 suspected", run.stdout), run.stdout[-3000:]
    row = _verdict(repo, second, third)
    assert row["verdict"] == "confirmed" and row["confirmed"] is True and row["own_code"] is True
    assert row["cross_session"]["verdict"] == "suspected" and row["ab"]["verdict"] == "slower"
    assert row["decided_by"].startswith("paired A/B, 6 rounds in one session") and row["ratio"] > 4
    stored = json.loads((repo / "results" / "compare" / "ab" / f"{MACHINE}-{second[:8]}-{third[:8]}.json").read_text())
    assert [r["order"][0] for r in stored["rounds"]] == ["base", "head"] * 3
