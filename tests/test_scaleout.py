"""Scale-out on the CPU through the real console command and Hydra's real launchers: two CPU jobs as the two
"devices" of a joblib sweep, the shipped SLURM settings through submitit's local executor, a killed shard."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cli_runner import tierbench_cli
from cpu_run import RUN_TIMING

from tierbench.suite.measure.plan import make_plan
from tierbench.suite.scale import sweep
from tierbench.suite.store.reading import read_records, sweep_runs

REPO = Path(__file__).resolve().parent.parent
# A cut-down smoke suite: matmul's forward and the three norms, vendor tier only (4 cases, one provider each).
# Four cases of one provider each: the plain matmul's forward and the three norms, eager only.
CUT = [
    "suite=smoke",
    "tiers=[vendor]",
    *RUN_TIMING,
    "matmul.modes=[fwd]",
    "matmul.ops=[matmul]",
    "matmul.dtypes=[fp32]",
    "norm.modes=[fwd]",
    "norm.kinds=[layer_norm,rms_norm,bias_gelu_layer_norm]",
    "attention.enabled=false",
    "decode.enabled=false",
    "pointwise.enabled=false",
    "model.enabled=false",
]


def _paths(tmp_path: Path) -> list[str]:
    return [f"results_dir={tmp_path}/runs", f"ceilings_dir={tmp_path}/ceilings", "table=false", "html=false"]


def _sweep_records(tmp_path: Path, sid: str):
    folders = sweep_runs(tmp_path / "runs", sid)
    return folders, [r for folder in folders for r in read_records(folder)]


def _planned_keys(compose, catalog, overrides: list[str]) -> set[tuple[str, str]]:
    return {(pc.case.case_id, p.name) for pc in make_plan(compose(overrides), catalog) for p in pc.providers}


def _sweep_id(stdout: str) -> str:
    found = [line.split()[-1] for line in stdout.splitlines() if line.startswith("one logical run:")]
    assert len(found) == 1, stdout[-2000:]
    return found[0]


@pytest.mark.slow
def test_a_two_job_joblib_sweep_is_one_logical_run_with_a_single_runs_keys(tmp_path, capsys):
    sharded = tierbench_cli("run", "devices=2", "device=cpu", *CUT, *_paths(tmp_path), cwd=tmp_path, timeout=600)
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    sid = _sweep_id(sharded.stdout)
    folders, records = _sweep_records(tmp_path, sid)
    assert len(folders) == 2 and {f.name for f in folders} == {f"{sid}-0of2", f"{sid}-1of2"}
    assert all(read_records(f) for f in folders), "each shard measured a part"
    assert {r.shard for r in records} == {"0/2", "1/2"} and {r.sweep for r in records} == {sid}
    for r in records:
        assert r.status == "ok" and r.env["device_index"] is None and r.env["device_uuid"] is None
        assert all(n["shard"] in ("0/2", "1/2") and n["shard"] != r.shard for n in r.neighbours)
    metas = [json.loads((f / "run.json").read_text()) for f in folders]
    assert {m["sweep"] for m in metas} == {sid} and {m["sweep_planned"] for m in metas} == {4}
    assert sum(m["planned"] for m in metas) == 4 and all(m["finished"] for m in metas)

    single = tierbench_cli("run", *CUT, "run_id=single", *_paths(tmp_path), cwd=tmp_path, timeout=600)
    assert single.returncode == 0, single.stderr[-3000:]
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys)) and set(keys) == {r.key for r in read_records(tmp_path / "runs" / "single")}

    from tierbench.suite.show import markdown
    from tierbench.suite.show.site import build

    assert markdown.main([sid, "--runs", str(tmp_path / "runs")]) == 0
    summary = capsys.readouterr().out
    assert all(f"| {op} |" in summary for op in ("matmul", "layer_norm", "rms_norm", "bias_gelu_layer_norm"))
    site = build.build(tmp_path / "runs", tmp_path / "html", tmp_path / "asv", tmp_path / "ceilings")
    shown = [run.run_id for view in site.devices for run in view.runs]
    assert sid in shown and f"{sid}-0of2" not in shown
    assert f'href="runs/{sid}/report.html"' in (tmp_path / "html" / "runs.html").read_text()


@pytest.mark.slow
def test_the_slurm_settings_run_through_submitits_local_executor(tmp_path, compose, catalog):
    """submitit_local runs each job as a local process, as SLURM would run it on a node: the shipped
    slurm.yaml's settings that the local executor shares (time limit, tasks, CPUs) go with it."""
    from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf

    shipped = yaml.safe_load((REPO / "conf" / "hydra" / "launcher" / "slurm.yaml").read_text())
    shared = {k: v for k, v in shipped.items() if k in LocalQueueConf.__dataclass_fields__ and v is not None}
    assert {"timeout_min", "tasks_per_node", "cpus_per_task"} <= set(shared)
    settings = [f"hydra.launcher.{k}={v}" for k, v in shared.items()]
    result = tierbench_cli(
        "run",
        "devices=2",
        "device=cpu",
        "hydra/launcher=submitit_local",
        *settings,
        *CUT,
        *_paths(tmp_path),
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    sid = _sweep_id(result.stdout)
    folders, records = _sweep_records(tmp_path, sid)
    assert len(folders) == 2
    assert (sweep.sweep_dir(tmp_path / "runs", sid) / ".submitit").is_dir(), "the jobs went through submitit"
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys)) and set(keys) == _planned_keys(compose, catalog, CUT)


@pytest.mark.slow
def test_a_killed_shard_resumes_only_what_is_missing_on_another_number_of_jobs(tmp_path, compose, catalog):
    slow = [*CUT, "timing.rounds=150", "timing.flush_l2=false"]  # a second or two per case: time to kill one
    exe = Path(sys.executable).parent / "tierbench"
    args = [str(exe), "run", "devices=2", "device=cpu", *slow, *_paths(tmp_path)]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sweeps = tmp_path / "runs" / ".sweeps"
    deadline = time.monotonic() + 300
    victim = None
    while time.monotonic() < deadline and victim is None:
        for beat_path in sweeps.glob("*/shards/0-0.json"):
            beat = json.loads(beat_path.read_text())
            if beat.get("run_id") and read_records(tmp_path / "runs" / beat["run_id"]):
                victim = beat
        time.sleep(0.05)
    assert victim is not None, "shard 0 never wrote a record"
    import os

    os.kill(victim["pid"], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    sid = victim["sweep"]
    assert f"resume={sid}" in err
    _, before = _sweep_records(tmp_path, sid)
    expected = _planned_keys(compose, catalog, slow)
    assert 1 <= len({r.key for r in before}) < len(expected)

    resume = [f"resume={victim['run_id']}", "devices=1"]  # a shard's run id names its sweep
    result = tierbench_cli("run", *resume, *_paths(tmp_path), cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    folders, after = _sweep_records(tmp_path, sid)
    assert f"{sid}-r1-0of1" in {f.name for f in folders}
    keys = [r.key for r in after]
    assert len(keys) == len(set(keys)), "nothing measured twice"
    assert set(keys) == expected
    resumed = json.loads((sweep.sweep_dir(tmp_path / "runs", sid) / "launch-1.json").read_text())
    assert {(cid, p) for cid, names, _, _ in resumed["cases"] for p in names} == expected - {r.key for r in before}


def test_a_launcher_whose_plugin_is_missing_is_refused_before_any_sweep_exists(tmp_path, monkeypatch):
    from tierbench.suite.measure.plan import PlanError
    from tierbench.suite.scale import launch

    # The real joblib plugin is installed here; name the package a plugin that is not.
    monkeypatch.setitem(launch.LAUNCHER_PLUGINS, "joblib", ("hydra_plugins.no_such_launcher", "no-such-launcher"))
    with pytest.raises(PlanError, match=r"hydra/launcher=joblib .*no-such-launcher.*pip install"):
        launch.plan(["devices=2", *CUT, *_paths(tmp_path)])
    assert not (tmp_path / "runs").exists()
    # The installed plugins pass: the sweep is planned.
    monkeypatch.undo()
    assert launch.plan(["devices=2", *CUT, *_paths(tmp_path)])
