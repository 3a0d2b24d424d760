"""Sweeps without running one: devices and shard keys, cost balancing, claims, heartbeats, the launch argv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from cpu_run import RUN_TIMING
from omegaconf import OmegaConf

from tierbench.suite.measure.plan import PlanError, make_plan, timing_settings
from tierbench.suite.scale import balance, launch, sweep
from tierbench.suite.scale.shard_job import ShardSpec, gpu_candidates, is_sharded, parse_devices, shard_spec


def _cfg(**shard):
    return OmegaConf.create({"shard": {"index": 0, "count": 1, "sweep": None, "launch": 0, **shard}, "run_id": None})


# -- devices and shard keys -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected", [(None, None), ("all", "all"), (2, 2), ([0, 2], [0, 2]), (OmegaConf.create([3]), [3])]
)
def test_devices_values(value, expected):
    assert parse_devices(value) == expected


@pytest.mark.parametrize("value", [0, -1, "some", [0, 0], [], [1, -2], True, 1.5])
def test_bad_devices_values_name_the_forms(value):
    with pytest.raises(PlanError, match=r"devices="):
        parse_devices(value)


def test_shard_keys_are_validated():
    assert not is_sharded(_cfg())
    assert shard_spec(_cfg(index=1, count=2, sweep="s1")) == ShardSpec(1, 2, "s1", 0)
    with pytest.raises(PlanError, match=r"shard.index=2 is outside 0..1"):
        shard_spec(_cfg(index=2, count=2, sweep="s1"))
    with pytest.raises(PlanError, match=r"shard.count=0"):
        shard_spec(_cfg(count=0, sweep="s1"))
    with pytest.raises(PlanError, match=r"need shard.sweep"):
        shard_spec(_cfg(index=1, count=2))
    with pytest.raises(PlanError, match=r"not a valid sweep id"):
        shard_spec(_cfg(count=2, sweep="../up"))
    bad = _cfg(count=2, sweep="s1")
    bad.run_id = "mine"
    with pytest.raises(PlanError, match=r"run_id=mine"):
        shard_spec(bad)


def test_gpu_candidates(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    assert gpu_candidates("all", 4) == [0, 1, 2, 3]
    assert gpu_candidates(2, 4) == [0, 1]
    assert gpu_candidates([3, 1], 4) == [3, 1]
    with pytest.raises(PlanError, match=r"GPU 5 does not exist here \(4 visible"):
        gpu_candidates([5], 4)
    monkeypatch.setenv("SLURM_JOB_ID", "123")  # the scheduler chose this job's GPUs: any of them
    assert gpu_candidates(8, 1) == [0]


# -- balance ------------------------------------------------------------------------------------------------


def test_assign_puts_the_costliest_first_into_the_lightest_shard():
    costs = [100.0, 1.0, 1.0, 1.0, 1.0, 60.0, 40.0, 2.0]
    shards = balance.assign(costs, 2)
    totals = balance.totals(costs, shards, 2)
    counts = [shards.count(s) for s in range(2)]
    assert counts[0] != counts[1]  # balanced by cost, not by count
    assert max(totals) - min(totals) <= 4.0
    assert balance.assign(costs, 2) == shards  # the same costs, the same deal
    assert balance.assign([5.0], 3) == [0] and balance.assign([], 2) == []


def test_a_suite_of_very_different_cases_is_split_by_cost(compose, catalog):
    """suite=all over every tier: cases of 3 to 9 providers, and an earlier run that says which cases' compiles
    took a minute (as max-autotune's do on the large shapes)."""
    from tierbench.suite.store.records import Measurement

    cfg = compose(["suite=all", "device=cpu"])
    plan = make_plan(cfg, catalog)
    timing = timing_settings(cfg.timing)
    slow = [pc.case.case_id for pc in plan if pc.case.family == "matmul" and pc.case.params.get("m", 0) >= 8192]
    assert slow
    earlier_run = [
        Measurement(
            run_id="old",
            op="matmul",
            family="matmul",
            case={},
            case_id=cid,
            label="",
            x=1.0,
            provider="compile",
            tier="compiler",
            status="ok",
            prepare_s=60.0,
            samples_ms=[1.0] * 200,
            env={"device_name": "GPU X"},
        )  # fmt: skip
        for cid in slow
    ]
    earlier = balance.earlier_costs(earlier_run, "GPU X", timing)
    costs = []
    for pc in plan:
        names, work = [p.name for p in pc.providers], pc.op.work(pc.case)
        costs.append(balance.case_cost(pc.case.case_id, names, work, timing, (700, 4000), "cuda", earlier))
    assert max(costs) > 5 * min(costs), "the suite holds cheap and costly cases"
    shards = balance.assign(costs, 4)
    totals = balance.totals(costs, shards, 4)
    counts = sorted(shards.count(s) for s in range(4))
    assert counts[0] != counts[-1], "shards differ by count"
    assert max(totals) - min(totals) <= max(costs)
    assert max(totals) <= 1.05 * sum(costs) / 4 + max(costs) / 4
    by_count = balance.totals(costs, [i % 4 for i in range(len(costs))], 4)
    assert max(totals) - min(totals) < max(by_count) - min(by_count)


def test_earlier_measurements_replace_the_model(compose, catalog):
    from tierbench.suite.store.records import Measurement

    timing = timing_settings(compose(RUN_TIMING).timing)
    old = Measurement(
        run_id="r", op="matmul", family="matmul", case={}, case_id="c1", label="", x=1.0, provider="eager",
        tier="vendor", status="ok", samples_ms=[10.0] * 100, prepare_s=2.0, env={"device_name": "GPU X"}, time=5.0,
    )  # fmt: skip
    other = Measurement(**{**old.__dict__, "env": {"device_name": "GPU Y"}, "samples_ms": [1.0]})
    known = balance.earlier_costs([old, other], "GPU X", timing)
    assert known[("c1", "eager")] == pytest.approx(2.0 + (1000.0 + timing.warmup_ms) / 1e3)


# -- sweep folders, claims, heartbeats ----------------------------------------------------------------------


def test_write_once_keeps_the_first_writer(tmp_path):
    path = tmp_path / "launch-0.json"
    assert sweep.write_once(path, {"a": 1}) == {"a": 1}
    assert sweep.write_once(path, {"a": 2}) == {"a": 1}
    assert not list(tmp_path.glob(".*tmp"))


def test_a_device_is_claimed_by_one_live_process(tmp_path):
    owner = {"sweep": "s", "shard": "0/2"}
    sweep.claim(tmp_path, "GPU-1234", owner)
    sweep.claim(tmp_path, "GPU-1234", owner)  # our own claim again (a reused worker): fine
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        held = json.loads(next(tmp_path.glob("*.json")).read_text())
        (tmp_path / "GPU-1234.json").write_text(json.dumps({**held, "pid": other.pid, "shard": "1/2"}))
        with pytest.raises(sweep.DeviceBusy, match=rf"GPU-1234 is in use by shard 1/2 of sweep s \(pid {other.pid}"):
            sweep.claim(tmp_path, "GPU-1234", owner)
    finally:
        other.kill()
        other.wait()
    sweep.claim(tmp_path, "GPU-1234", owner)  # the holder is gone: its claim is taken over
    assert json.loads((tmp_path / "GPU-1234.json").read_text())["pid"] == os.getpid()
    sweep.release(tmp_path, "GPU-1234")
    assert not (tmp_path / "GPU-1234.json").exists()


def test_heartbeats_tell_who_runs_beside(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "BEAT_S", 0.05)
    me = sweep.Heartbeat(tmp_path, sweep.Beat("s", 0, 0, 3, run_id="s-0of3"))
    other = sweep.Heartbeat(tmp_path, sweep.Beat("s", 0, 1, 3, run_id="s-1of3", device_index=1))
    gone = sweep.Beat("s", 0, 2, 3, run_id="s-2of3", beat=time.time() - 2 * sweep.STALE_S)
    sweep._write_json(sweep.beat_file(tmp_path, 0, 2), gone.__dict__)
    try:
        time.sleep(0.2)
        assert [n["shard"] for n in sweep.neighbours(tmp_path, me.beat)] == ["1/3"]
        assert sweep.neighbours(tmp_path, me.beat)[0]["device_index"] == 1
        other.stop(0)
        assert sweep.neighbours(tmp_path, me.beat) == []
        assert {b.index: b.code for b in sweep.beats(tmp_path)} == {0: None, 1: 0, 2: None}
    finally:
        me.stop(0)


# -- the launch ---------------------------------------------------------------------------------------------


def test_devices_turn_a_command_into_a_joblib_multirun(tmp_path):
    runs = tmp_path / "runs"
    assert launch.plan(["suite=smoke", f"results_dir={runs}"]) is None  # a plain run
    (one,) = launch.plan(["devices=2", "device=cpu", "suite=smoke", f"results_dir={runs}"])
    assert one.count == 2 and one.launch == 0 and one.folder == runs / ".sweeps" / one.sweep
    assert one.argv[0] == "--multirun"
    assert {"shard.index=0,1", "shard.count=2", f"shard.sweep={one.sweep}", "shard.launch=0"} <= set(one.argv)
    assert "hydra/launcher=joblib" in one.argv and "hydra.launcher.n_jobs=2" in one.argv
    assert f"hydra.sweep.dir={one.folder}" in one.argv
    assert json.loads((one.folder / "sweep.json").read_text())["count"] == 2


def test_a_named_launcher_is_kept_and_a_user_sweep_is_one_sweep_per_point(tmp_path):
    runs = tmp_path / "runs"
    argv = ["-m", "devices=3", "device=cpu", "suite=matmul,norm", "hydra/launcher=slurm", f"results_dir={runs}"]
    first, second = launch.plan(argv)
    assert first.sweep != second.sweep
    assert "suite=matmul" in first.argv and "suite=norm" in second.argv
    assert "hydra/launcher=slurm" in first.argv and not any("joblib" in a or "n_jobs" in a for a in first.argv)
    assert launch.plan(["-m", "shard.index=0,1", "shard.count=2", "shard.sweep=x"]) is None  # shards by hand


def test_resume_of_a_sweep_is_its_next_launch(tmp_path):
    runs = tmp_path / "runs"
    (one,) = launch.plan(["devices=2", "device=cpu", f"results_dir={runs}"])
    (one.folder / "launch-0.json").write_text("{}")
    (again,) = launch.plan([f"resume={one.sweep}", f"results_dir={runs}"])
    assert again.sweep == one.sweep and again.launch == 1 and again.count == 2  # as many as before
    assert "devices=2" in again.argv and f"resume={one.sweep}" in again.argv
    (fewer,) = launch.plan([f"resume={one.sweep}", "devices=1", f"results_dir={runs}"])
    assert fewer.count == 1 and "hydra.launcher.n_jobs=1" in fewer.argv
    live = sweep.Heartbeat(one.folder, sweep.Beat(one.sweep, 0, 1, 2))
    try:
        with pytest.raises(PlanError, match=r"still runs shard 1/2"):
            launch.plan([f"resume={one.sweep}", f"results_dir={runs}"])
    finally:
        live.stop(0)
    assert launch.plan(["resume=nope", f"results_dir={runs}"]) is None  # a run's own resume
    with pytest.raises(PlanError, match=r"resume=nope is not a sweep"):
        launch.plan(["resume=nope", "devices=2", f"results_dir={runs}"])


def test_devices_all_needs_gpus(tmp_path):
    with pytest.raises(PlanError, match=r"devices=all names GPUs but none is visible"):
        launch.plan(["devices=all", "device=cpu", f"results_dir={tmp_path}/runs"])


def test_the_shipped_slurm_config_composes(compose):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tierbench.suite.commands.run_command import conf_dir

    compose()  # registers the run schema
    GlobalHydra.instance().clear()
    overrides = ["hydra/launcher=slurm", "hydra.launcher.partition=gpu", "hydra.launcher.timeout_min=30"]
    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        cfg = hydra_compose("config", overrides=overrides, return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.gpus_per_task, launcher.timeout_min) == ("gpu", 1, 30)


def test_hydra_flags_keep_their_values_and_inspecting_runs_nothing(tmp_path):
    runs = tmp_path / "runs"
    (one,) = launch.plan(["--config-dir", str(tmp_path), "devices=1", "device=cpu", f"results_dir={runs}"])
    assert one.argv[:3] == ["--config-dir", str(tmp_path), "--multirun"]
    assert launch.plan(["devices=2", "device=cpu", "--cfg", "job", f"results_dir={runs}"]) is None
    assert len(list((runs / ".sweeps").iterdir())) == 1


def test_a_sweep_refuses_a_run_id_before_anything_is_made(tmp_path):
    with pytest.raises(PlanError, match=r"drop run_id"):
        launch.plan(["devices=2", "device=cpu", "run_id=mine", f"results_dir={tmp_path}/runs"])
    assert not (tmp_path / "runs").exists()
