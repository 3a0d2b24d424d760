"""`tierbench compare` of runs: two runs across sessions, two providers of one run paired by its rounds, and the
command line that tells runs, commits and measured A/Bs apart (bad input exits 2 naming what is valid); two
providers and two plugin module files measured A/B here by the console command.

The runs here are written as `tierbench run` writes them (records and config.yaml), with samples drawn so
that each verdict is known; the timing-based verdicts of real runs are tests/history/test_plugin_history.py's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_runner import tierbench_cli
from cpu_run import RUN_TIMING

from tierbench.suite.history import compare_command
from tierbench.suite.store.records import CONFIG_FILE, Measurement, RecordWriter

ROUNDS, REPS = 5, 20
ENV = {"device_type": "cpu", "device_name": "x86_64"}


def samples(median_ms: float, seed: int, spread: float = 0.01) -> list[float]:
    """ROUNDS rounds of REPS samples, each round at a level of its own (rounds are what replicates)."""
    rng = np.random.default_rng(seed)
    levels = median_ms * np.exp(rng.normal(0, 0.02, ROUNDS))
    return [float(level * np.exp(rng.normal(0, spread))) for level in levels for _ in range(REPS)]


def record(run_id: str, provider: str, tier: str, own: bool, op: str = "swiglu", **fields) -> Measurement:
    label, dtype = ("64x96", "bf16") if op == "swiglu" else ("16x96", "fp32")
    case = {"tokens": 64, "ffn": 96, "dtype": dtype, "mode": "fwd"}
    base = dict(
        run_id=run_id,
        op=op,
        family=op,
        case=case,
        case_id=f"{op}/dtype={dtype},mode=fwd",
        label=label,
        x=1.0,
        provider=provider,
        tier=tier,
        status="ok",
        timer="cpu-clock",
        env=ENV,
        own_code=own,
    )
    base.update(fields)
    if base["status"] == "ok" and "samples_ms" not in fields:
        raise ValueError("an ok record needs samples")
    if base.get("samples_ms"):
        base["median_ms"] = float(np.median(base["samples_ms"]))
    return Measurement(**base)


def write_run(root, run_id: str, records: list[Measurement], rounds: int = ROUNDS):
    folder = root / run_id
    folder.mkdir(parents=True)
    writer = RecordWriter(folder)
    for r in records:
        writer.append(r)
    (folder / CONFIG_FILE).write_text(f"suite: swiglu\ntiming:\n  name: quick\n  rounds: {rounds}\n")
    return folder


@pytest.fixture
def runs(tmp_path):
    """Run a: the baseline. Run b: the plugin's own provider 2x slower, a control 2x slower, one provider now
    incorrect, one case that only b measured; and in b the two providers of one case, one 2x the other."""
    root = tmp_path / "runs"
    write_run(
        root,
        "a",
        [
            record("a", "my-swiglu-blocked", "my-torch", True, samples_ms=samples(1.0, 1)),
            record("a", "eager", "vendor", False, samples_ms=samples(0.8, 2)),
            record("a", "my-swiglu", "my-triton", True, status="skipped", reason="correct, not timed"),
            record("a", "compile", "compiler", False, samples_ms=samples(0.5, 3)),
        ],
    )
    write_run(
        root,
        "b",
        [
            record("b", "my-swiglu-blocked", "my-torch", True, samples_ms=samples(2.0, 4)),
            record("b", "eager", "vendor", False, samples_ms=samples(1.6, 5)),
            record("b", "my-swiglu", "my-triton", True, status="skipped", reason="correct, not timed"),
            record("b", "compile", "compiler", False, status="incorrect", reason="7 of 6144 elements are off"),
            record("b", "eager", "vendor", False, op="rms_norm", samples_ms=samples(0.3, 6)),
        ],
    )
    return root


def compare(capsys, *args):
    code = compare_command.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def rows(data: dict) -> dict[str, dict]:
    return {s["benchmark"]: s for s in data["series"]}


def test_two_runs_by_id_are_judged_across_sessions_and_the_report_names_them(runs, capsys, tmp_path):
    code, out, err = compare(capsys, "a", "b", "--runs-dir", str(runs), "--json", "-")
    assert code == 0, err  # across sessions nothing is confirmed
    data = json.loads(out)
    assert data["compared"].startswith("two runs: a (") and data["method"] == "across sessions"
    got = rows(data)
    own = got["swiglu 64x96 bf16 fwd · my-swiglu-blocked"]
    assert own["verdict"] == "suspected" and own["own_code"] and 1.8 < own["ratio"] < 2.2
    assert got["swiglu 64x96 bf16 fwd · eager"]["verdict"] == "drift"  # a control: never a failure
    assert got["swiglu 64x96 bf16 fwd · compile"]["verdict"] == "failed"
    assert "incorrect at the head: 7 of 6144 elements are off" in got["swiglu 64x96 bf16 fwd · compile"]["note"]
    assert got["swiglu 64x96 bf16 fwd · my-swiglu"]["verdict"] == "skipped"
    assert got["rms_norm 16x96 fp32 fwd · eager"]["verdict"] == "new"
    assert data["regression"] is False and "nothing is confirmed here" in data["confirmation"]

    # By folder, with the reports written where asked: the Markdown names what was compared.
    md = tmp_path / "out" / "runs.md"
    code, out, _ = compare(capsys, str(runs / "a"), str(runs / "b"), "--md", str(md))
    assert code == 0 and md.read_text() == out
    assert "Compared: two runs: a" in out and "**Suspected slower, not confirmed**" in out


def test_two_providers_of_one_run_are_paired_by_its_rounds(tmp_path, capsys):
    root = tmp_path / "runs"
    write_run(
        root,
        "r",
        [
            record("r", "eager", "vendor", False, samples_ms=samples(1.0, 7)),
            # The same rounds' levels (seed), twice the time: paired round by round, the ratio is plain.
            record("r", "my-swiglu-blocked", "my-torch", True, samples_ms=[2 * s for s in samples(1.0, 7)]),
            record("r", "compile", "compiler", False, samples_ms=samples(1.0, 7)),
        ],
    )
    code, out, err = compare(
        capsys, "r", "--providers", "eager", "my-swiglu-blocked", "--runs-dir", str(root), "--json", "-"
    )
    assert code == 1, err  # the head provider confirmed slower
    data = json.loads(out)
    (row,) = data["series"]
    assert row["benchmark"] == "swiglu 64x96 bf16 fwd" and row["verdict"] == "confirmed"
    assert row["ab"]["n"] == ROUNDS and row["decided_by"] == f"paired A/B, {ROUNDS} rounds in one session"
    assert 1.99 < row["ratio"] < 2.01 and data["compared"].startswith("two providers of run r")

    code, out, _ = compare(capsys, "r", "--providers", "eager", "compile", "--runs-dir", str(root), "--json", "-")
    assert code == 0 and json.loads(out)["series"][0]["verdict"] == "unchanged"
    # Reversed, the slower one is the base: faster, not a failure.
    code, out, _ = compare(
        capsys, "r", "--providers", "my-swiglu-blocked", "eager", "--runs-dir", str(root), "--json", "-"
    )
    assert code == 0 and json.loads(out)["series"][0]["verdict"] == "faster"


def test_samples_that_do_not_split_into_the_runs_rounds_are_unjudged(tmp_path, capsys):
    root = tmp_path / "runs"
    write_run(
        root,
        "r",
        [
            record("r", "eager", "vendor", False, samples_ms=samples(1.0, 7)[:-1]),
            record("r", "compile", "compiler", False, samples_ms=samples(1.0, 8)),
        ],
    )
    code, out, _ = compare(capsys, "r", "--providers", "eager", "compile", "--runs-dir", str(root), "--json", "-")
    row = json.loads(out)["series"][0]
    assert code == 0 and row["verdict"] == "unjudged" and f"into the run's {ROUNDS} rounds" in row["note"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["a", "nosuch"], "nosuch is not a run while a is: give two runs"),
        (
            ["a", "--providers", "eager", "triton"],
            "--providers triton: no record in run a; its providers: compile, eager",
        ),
        (["a", "--providers", "eager", "eager"], "--providers names eager twice"),
        (["a", "b", "--providers", "eager", "compile"], "--providers A B compares two providers of one run"),
        (
            ["a", "suite=swiglu", "--providers", "eager", "compile"],
            "overrides choose the cases of an A/B measured here",
        ),
        (["a", "b", "--ab"], "--ab go with commits; two runs are compared as they were recorded"),
        (["--providers", "eager", "compile", "--ab"], "--ab go with commits, not with --providers"),
        (["--plugin", "bench_plugin"], "--plugin names the module of --plugin-versions OLD NEW"),
        (["--plugin-versions", "no/such", "other"], "--plugin-versions no/such: neither a folder nor a module file"),
        (["--plugin-versions", "x", "y", "--providers", "a", "b"], "are two forms: give one"),
        (["--plugin-versions", "x", "y", "a"], "--plugin-versions takes no run or commit (a)"),
        (["a", "b", "--json", "a/config.yaml/x.json"], "is not a folder"),  # checked before anything
    ],
)
def test_bad_input_exits_2_naming_what_is_valid(runs, capsys, monkeypatch, args, message):
    monkeypatch.chdir(runs)
    code, out, err = compare(capsys, *args, "--runs-dir", str(runs))
    assert code == 2 and message in err and "Traceback" not in err + out, err


def test_ids_that_are_no_runs_outside_a_checkout_say_so_once(runs, capsys, monkeypatch):
    monkeypatch.chdir(runs.parent)
    code, _, err = compare(capsys, "x1", "y2", "--runs-dir", str(runs))
    config = str(runs.parent / "asv.conf.json")
    assert code == 2 and err.count(config) == 1, err  # the path was printed twice when the folder was the top
    assert "x1 and y2 were taken for commits: no run of that id or folder (runs in" in err and ": a, b)" in err


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugin"
TINY = ["suite=swiglu", "swiglu.tokens=[64]", "swiglu.ffn=[96]", "swiglu.modes=[fwd]", *RUN_TIMING]


@pytest.mark.slow
def test_two_providers_and_two_plugin_files_are_measured_ab_here(tmp_path):
    """The measured forms' shape (verdicts of real timings: test_plugin_history.py): the rounds asked for, both
    sides named, a Triton kernel under the CPU interpreter checked and reported as not timed."""
    for name in ("v1", "v2"):
        shutil.copytree(EXAMPLE, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    # Two providers of the plugin in the current folder, measured here on the cases the overrides choose.
    args = ["compare", "--providers", "eager", "my-swiglu-blocked", "plugins=[bench_plugin]", *TINY]
    done = tierbench_cli(*args, "--rounds", "3", "--json", "-", cwd=tmp_path / "v1", timeout=300)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["compared"] == "providers eager → my-swiglu-blocked, measured A/B here on 1 cases (suite swiglu)"
    (row,) = data["series"]
    assert row["benchmark"] == "swiglu 64x96 bf16 fwd" and row["ab"]["n"] == 3 and row["ab"]["unit"] == "round"
    assert "round 3/3, swiglu 64x96 bf16 fwd (base first)" in done.stderr

    # A module file against an install folder that holds more than the plugin (pip --target without --no-deps
    # brings torch and tierbench too): only the plugin's own modules are imported from it, each version from
    # its own folder, and every provider of the plugin is paired.
    site = tmp_path / "site-v2"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target"]
    installed = subprocess.run([*pip, str(site), str(tmp_path / "v2")], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    for dependency in ("torch", "tierbench"):
        (site / dependency).mkdir()
        (site / dependency / "__init__.py").write_text(f"raise ImportError('a second {dependency} was imported')\n")
    versions = [str(tmp_path / "v1" / "bench_plugin.py"), str(site)]
    args = ["compare", "--plugin-versions", *versions, *TINY, "providers=[my-swiglu,my-swiglu-blocked]"]
    done = tierbench_cli(*args, "--rounds", "3", "--json", "-", cwd=tmp_path, timeout=300)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["compared"].startswith("two versions of the plugin bench_plugin, measured A/B here on 2 (case, ")
    assert "v1 = source " in data["compared"] and "site-v2 = tierbench-example-plugin 0.1.0; " in data["compared"]
    rows = {r["benchmark"]: r for r in data["series"]}
    assert rows["swiglu 64x96 bf16 fwd · my-swiglu-blocked"]["ab"]["n"] == 3
    interpreted = rows["swiglu 64x96 bf16 fwd · my-swiglu"]
    assert interpreted["verdict"] == "skipped" and "correct, not timed" in interpreted["note"]
