"""A sweep's shard runs in the site: one logical run per device type, from any number of hosts and launches."""

from __future__ import annotations

from sitefakes import GPU_ENV, record, write_run

# isort: split
from tierbench.suite.show.site import build, runs
from tierbench.suite.store import runmeta

SWEEP = "sweep-20260101-000000-abcdef"


def _shard(tree, run_id, cases, *, host, index, planned, time, device_name=GPU_ENV["device_name"], complete=True):
    env = {**GPU_ENV, "host": host, "device_name": device_name, "device_index": index, "device_uuid": f"GPU-{index}"}
    recs = [record(run_id=run_id, case_id=c, sweep=SWEEP, shard=f"{index}/2", env=env, time=time) for c in cases]
    path = write_run(tree["runs"], run_id, recs, complete=complete)
    meta = runmeta.read(path)
    meta.sweep, meta.shard, meta.launch, meta.sweep_planned = SWEEP, f"{index}/2", 0, planned
    runmeta.write(path, meta)
    return path


def _build(tree, **kw):
    return build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"], **kw)


def test_shards_on_two_hosts_are_one_run_in_one_device_section(tree):
    _shard(tree, f"{SWEEP}-0of2", ["matmul/m=256", "matmul/m=512"], host="a", index=0, planned=4, time=10.0)
    _shard(tree, f"{SWEEP}-1of2", ["matmul/m=1024", "matmul/m=2048"], host="b", index=1, planned=4, time=11.0)
    write_run(tree["runs"], "older", [record(run_id="older", case_id="matmul/m=256", time=1.0)])
    loaded = runs.load_runs(tree["runs"])
    (logical,) = [r for r in loaded if r.run_id == SWEEP]
    assert logical.shards == [f"{SWEEP}-0of2", f"{SWEEP}-1of2"] and len(logical.records) == 4
    assert logical.complete and logical.meta.done == 4 == logical.meta.planned
    result = _build(tree)
    (view,) = result.devices  # H100 index 0 on host a and index 1 on host b: one device type
    assert [r.run_id for r in view.runs] == [SWEEP]
    assert len(view.records) == 4
    runs_page = (tree["html"] / "runs.html").read_text()
    assert f'href="runs/{SWEEP}/report.html"' in runs_page and "(2 shard runs)" in runs_page
    assert f"runs/{SWEEP}-0of2/report.html" not in runs_page
    report = (tree["html"] / "runs" / SWEEP / "report.html").read_text()
    assert f"{SWEEP}-1of2" in report and "4 of 4 planned (complete)" in report
    # A shard's run id names its sweep's logical run.
    assert [r.run_id for r in runs.select_runs(loaded, [f"{SWEEP}-1of2", SWEEP], tree["runs"])] == [SWEEP]


def test_a_killed_shard_leaves_the_sweep_partial_until_a_resume_finishes_it(tree):
    _shard(tree, f"{SWEEP}-0of2", ["matmul/m=256"], host="a", index=0, planned=3, time=10.0)
    _shard(tree, f"{SWEEP}-1of2", ["matmul/m=512"], host="a", index=1, planned=3, time=10.0, complete=False)
    write_run(tree["runs"], "older", [record(run_id="older", case_id="matmul/m=256", time=1.0)])
    (logical,) = [r for r in runs.load_runs(tree["runs"]) if r.run_id == SWEEP]
    assert not logical.complete and logical.meta.done == 2
    _shard(tree, f"{SWEEP}-r1-0of1", ["matmul/m=1024"], host="a", index=0, planned=3, time=20.0)
    (logical,) = [r for r in runs.load_runs(tree["runs"]) if r.run_id == SWEEP]
    assert logical.complete and len(logical.shards) == 3
    (view,) = _build(tree).devices
    assert [r.run_id for r in view.runs] == [SWEEP]


def test_a_sweep_over_two_device_types_has_a_section_for_each(tree):
    _shard(tree, f"{SWEEP}-0of2", ["matmul/m=256"], host="a", index=0, planned=2, time=10.0)
    _shard(tree, f"{SWEEP}-1of2", ["matmul/m=512"], host="b", index=0, planned=2, time=10.0, device_name="NVIDIA A100")
    result = _build(tree)
    assert sorted(v.device.name for v in result.devices) == ["NVIDIA A100", GPU_ENV["device_name"]]
    assert all([r.run_id for r in v.runs] == [SWEEP] for v in result.devices)
