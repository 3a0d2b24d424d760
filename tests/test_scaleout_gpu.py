"""Scale-out on real GPUs: one shard per GPU, each on its own, and a GPU held by another job never shared."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from cli_runner import tierbench_cli
from cpu_run import RUN_TIMING

from tierbench.suite.scale import sweep
from tierbench.suite.store.reading import read_records, sweep_runs

CUT = ["suite=smoke", "tiers=[vendor]", *RUN_TIMING, "matmul.modes=[fwd]", "attention.enabled=false"]
CUT += ["pointwise.enabled=false", "model.enabled=false", "norm.kinds=[layer_norm,rms_norm,bias_gelu_layer_norm]"]


def _args(tmp_path):
    return [f"results_dir={tmp_path}/runs", f"ceilings_dir={tmp_path}/ceilings", "table=false", "html=false"]


@pytest.mark.gpu
def test_each_shard_takes_a_gpu_of_its_own(tmp_path):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    env = {"TIERBENCH_CLAIMS": str(tmp_path / "claims")}
    result = tierbench_cli("run", "devices=all", *CUT, *_args(tmp_path), cwd=tmp_path, timeout=900, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    sid = [line.split()[-1] for line in result.stdout.splitlines() if line.startswith("one logical run:")][0]
    records = [r for folder in sweep_runs(tmp_path / "runs", sid) for r in read_records(folder)]
    by_shard = {}
    for r in records:
        by_shard.setdefault(r.shard, set()).add((r.env["device_index"], r.env["device_uuid"]))
    assert len(by_shard) == torch.cuda.device_count()
    placements = [next(iter(p)) for p in by_shard.values()]
    assert all(len(p) == 1 for p in by_shard.values()), "a shard stays on its GPU"
    assert len({uuid for _, uuid in placements}) == len(placements), "no two shards on one GPU"
    assert all(uuid and uuid.startswith("GPU-") for _, uuid in placements)
    timed = [r for r in records if r.status == "ok"]
    assert timed
    from tierbench.suite.measure.envinfo import _nvml

    if _nvml() is not None:  # nvidia-ml-py (the gpu extra) installed: what else ran on the host's GPUs
        assert all("busy_gpus" in r.telemetry and r.telemetry["other_processes"] == [] for r in timed)


@pytest.mark.gpu
def test_a_gpu_another_job_holds_is_never_shared(tmp_path):
    claims = tmp_path / "claims"
    uuid = f"GPU-{torch.cuda.get_device_properties(0).uuid}"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from tierbench.suite.scale import sweep; "
            f"sweep.claim(Path({str(claims)!r}), {uuid!r}, {{'sweep': 'other', 'shard': '0/1'}}); "
            "print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        env = {"TIERBENCH_CLAIMS": str(claims)}
        result = tierbench_cli("run", "devices=[0]", *CUT, *_args(tmp_path), cwd=tmp_path, timeout=600, env=env)
        assert result.returncode == 2, result.stderr[-3000:]
        assert f"{uuid} is in use by shard 0/1 of sweep other (pid {holder.pid}" in result.stderr
        (beat,) = sweep.beats(next((tmp_path / "runs" / ".sweeps").iterdir()))
        assert beat.code == 2 and "in use" in beat.error
        assert json.loads(next(claims.glob("*.json")).read_text())["pid"] == holder.pid
    finally:
        holder.kill()
        holder.wait()
