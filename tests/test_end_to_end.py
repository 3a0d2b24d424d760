"""The whole product on the CPU through the real console command: run, records, report, resume, sweeps."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import tierbench_cli
from cpu_run import RUN_TIMING

from tierbench.suite.store.reading import read_records
from tierbench.suite.store.records import RECORDS_FILE

# The providers that run a runtime of their own (the compiler tier's XLA and TVM, the portable tier).
OTHER_RUNTIMES = ("xla", "tvm", "mojo", "iree")


def _run_dirs(root: Path) -> list[Path]:
    """The run folders under root (not its .sweeps/, where a sweep keeps its state)."""
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.exists() else []


@pytest.mark.slow
def test_smoke_suite_with_every_tier_on_cpu(tmp_path):
    runs = tmp_path / "runs"
    # The op families' smoke (the model family's smoke has its own test: tests/test_model_run.py).
    result = tierbench_cli(
        "run",
        "suite=smoke",
        *RUN_TIMING,
        "pointwise.enabled=false",
        "model.enabled=false",
        "norm.kinds=[layer_norm,rms_norm,bias_gelu_layer_norm]",
        f"results_dir={runs}",
        f"ceilings_dir={tmp_path}/ceilings",
        cwd=tmp_path,
        timeout=1800,  # with the xla, tvm, mojo and iree extras installed, their compilation included
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = _run_dirs(runs)
    records = read_records(run_dir)
    by_key = {(r.op, r.case_id, r.provider): r for r in records}
    assert len(by_key) == len(records), "one record per (case, provider)"
    ops = {r.op for r in records}
    assert ops == {"matmul", "matmul_bias_gelu", "matmul_fp8", "layer_norm", "rms_norm", "bias_gelu_layer_norm",
                   "attention", "decode", "decode_paged"}  # fmt: skip
    for r in records:
        # The other runtimes' own refusals (TVM's frontend, IREE's tracing of a causal backward) are theirs to
        # report as errors or wrong results (docs/compiler-tier.md, docs/portable-tier.md); never the harness's.
        allowed = ("ok", "skipped", "error", "incorrect") if r.provider in OTHER_RUNTIMES else ("ok", "skipped")
        assert r.status in allowed and (r.status == "ok" or r.reason), (r.provider, r.op, r.status, r.reason)
        if r.status == "ok":
            assert r.median_ms > 0 and r.samples_ms and r.sol > 0 and r.rel_error <= r.tolerance
        assert r.env["git_commit"] is None or len(r.env["git_commit"]) == 40
    fp8 = [r for r in records if r.op == "matmul_fp8"]
    assert {r.tier for r in fp8} == {"vendor", "compiler", "triton", "cuda", "portable"}
    assert all(r.status == "skipped" and r.reason.startswith("FP8 matmul needs FP8 tensor cores") for r in fp8)
    epilogue = [r for r in records if r.op == "matmul_bias_gelu" and r.tier in ("vendor", "compiler")]
    assert {r.provider for r in epilogue if r.status == "ok"} - set(OTHER_RUNTIMES) == {"eager", "compile"}
    assert {r.mode for r in epilogue if r.status == "ok"} == {"fwd", "bwd", "fwd_bwd"}
    tiers_timed = {r.tier for r in records if r.status == "ok"}
    assert tiers_timed - {"portable"} == {"vendor", "compiler"}
    # The other runtimes, where their extras are installed (CI installs them all): checked and timed.
    for name in OTHER_RUNTIMES:
        ours = [r for r in records if r.provider == name]
        assert ours and all(r.launches is None and r.launches_reason for r in ours), name
        if not any(r.reason.startswith("package not installed") for r in ours):
            assert any(r.status == "ok" for r in ours), name
    # Every op in every pass, each output and gradient checked, through the vendor and compiler tiers.
    decode = {"decode", "decode_paged"}
    every = {(op, mode) for op in ops - {"matmul_fp8", *decode} for mode in ("fwd", "bwd", "fwd_bwd")}
    every |= {(op, "fwd") for op in decode}  # a decode step has no backward
    grads = {
        "matmul": {"da", "db"},
        "matmul_bias_gelu": {"da", "db", "dbias"},
        "layer_norm": {"dx", "dweight", "dbias"},
        "rms_norm": {"dx", "dweight"},
        "bias_gelu_layer_norm": {"dx", "dbias", "dweight", "dln_bias"},
        "attention": {"dq", "dk", "dv"},
    }
    checked = {"fwd": lambda op: {"out"}, "bwd": lambda op: grads[op], "fwd_bwd": lambda op: grads[op] | {"out"}}
    for tier in ("vendor", "compiler"):
        timed = [r for r in records if r.tier == tier and r.status == "ok"]
        # SDPA takes no block table: the vendor tier has no paged decode.
        expected = every - {("decode_paged", "fwd")} if tier == "vendor" else every
        assert {(r.op, r.mode) for r in timed} == expected, tier
        assert all(set(r.errors) == checked[r.mode](r.op) for r in timed), tier
    triton = [r for r in records if r.tier == "triton" and r.op != "matmul_fp8"]
    assert {(r.op, r.mode) for r in triton} == every and len(triton) == 29
    # matmul and its epilogue, 3 norms, 2 attention cases and 2 grouped-query ones in 3 passes each, a decode
    # step per cache layout. Every Triton kernel, its backward too, checked through the interpreter (every
    # gradient), never timed.
    assert all("correct, not timed" in r.reason for r in triton), [r.reason for r in triton]
    assert all(r.rel_error is not None and r.rel_error <= r.tolerance for r in triton)
    assert all(set(r.errors) == checked[r.mode](r.op) for r in triton), [(r.op, r.mode, r.errors) for r in triton]
    assert all(r.launch and "warps=" in r.launch for r in triton), [r.launch for r in triton]
    # Every record counts what its call launched or says why not; the lists are in the side file.
    assert all((r.launches is None) == bool(r.launches_reason) for r in records)
    assert all(r.launches for r in records if r.rel_error is not None and r.tier not in ("compiler", "portable"))
    fused = {r.provider: r.launches for r in records if r.op == "bias_gelu_layer_norm" and r.mode == "fwd"}
    assert fused["eager"] == 3 and fused["triton"] == 1
    logged = [json.loads(line) for line in (run_dir / "launches.jsonl").read_text().splitlines()]
    profiled = {r.key for r in records if r.rel_error is not None and r.status != "incorrect"}  # only correct ones
    assert {(e["case_id"], e["provider"]) for e in logged} == profiled
    cuda = [r for r in records if r.tier == "cuda"]
    assert cuda and all(r.status == "skipped" and r.reason for r in cuda)
    html = (run_dir / "report.html").read_text()
    assert "<svg" in html and "sdpa-flash" in html
    # Nothing is fetched from a network: no page loads or links a resource by http(s) (an SVG namespace and the
    # local-server hint for asv's site are text, not requests).
    assert not re.search(r"""(src|href|action)\s*=\s*["']?https?:""", html, re.I)
    assert "speedup" in html
    assert "Recomputation: the textbook attention beside the flash-style kernels" in html
    # Decode's roofline holds the prefill points too; its GB/s is read against the copy ceiling.
    assert 'aria-label="decode and attention: one roofline"' in html and "SOL (% of copy)" in html
    # The terminal table ranks providers per case with their speedup over the vendor baseline.
    assert "matmul  128^3" in result.stdout and "1.00x" in result.stdout
    saved = (run_dir / "config.yaml").read_text()
    assert "suite: smoke" in saved


@pytest.mark.slow
def test_interrupted_run_keeps_its_records_and_resume_finishes_it(tmp_path, compose, catalog):
    from tierbench.suite.measure.plan import make_plan

    # The vendor tier on the plain product's three passes and the forward of the rest: long enough to kill.
    small = ["suite=smoke", "tiers=[vendor]", "matmul.ops=[matmul]", "matmul.dtypes=[fp32]"]
    small += ["norm.modes=[fwd]", "attention.modes=[fwd]", "pointwise.enabled=false", "model.enabled=false"]
    planned = sum(len(pc.providers) for pc in make_plan(compose(small), catalog))
    runs = tmp_path / "runs"
    args = [
        "run",
        *small,
        *RUN_TIMING,
        "timing.rounds=40",
        f"results_dir={runs}",
        f"ceilings_dir={tmp_path}/ceilings",
        "run_id=first",
    ]
    exe = Path(sys.executable).parent / "tierbench"
    proc = subprocess.Popen([str(exe), *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    records_file = runs / "first" / RECORDS_FILE
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (records_file.exists() and records_file.read_text().count("\n") >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert f"resume={runs / 'first'}" in err  # the run's folder: it finishes from any folder
    before = read_records(runs / "first")
    assert 2 <= len(before) < planned
    # A kill in mid-write leaves half a line: resume must cut it, not crash or keep it.
    with records_file.open("a") as f:
        f.write('{"run_id": "first", "op": "matm')

    result = tierbench_cli(
        "run", "resume=first", f"results_dir={runs}", f"ceilings_dir={tmp_path}/ceilings", cwd=tmp_path, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    after = read_records(runs / "first")
    keys = [r.key for r in after]
    assert len(keys) == len(set(keys)) == planned  # every planned measurement once
    assert [r.to_json() for r in after[: len(before)]] == [r.to_json() for r in before], "old records intact"
    for line in records_file.read_text().splitlines():
        json.loads(line)


def test_resume_of_an_unknown_run_names_the_known_ones(tmp_path):
    runs = tmp_path / "runs"
    (runs / "20260101-000000-abcdef").mkdir(parents=True)
    (runs / "20260101-000000-abcdef" / "config.yaml").write_text("suite: smoke\n")
    result = tierbench_cli("run", "resume=nope", f"results_dir={runs}", cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert "20260101-000000-abcdef" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_multirun_sweep_writes_one_run_per_job(tmp_path):
    runs = tmp_path / "runs"
    result = tierbench_cli(
        "run",
        "--multirun",
        "suite=smoke",
        "tiers=[vendor]",
        *RUN_TIMING,
        "matmul.enabled=false",
        "norm.enabled=false",
        "pointwise.enabled=false",
        "model.enabled=false",
        "providers=[sdpa-math]",
        "attention.causal=true,false",
        f"results_dir={runs}",
        f"ceilings_dir={tmp_path}/ceilings",
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    dirs = _run_dirs(runs)
    assert len(dirs) == 2
    assert (runs / ".sweeps").is_dir() and not (tmp_path / "sweeps").exists()  # Hydra's record: inside runs/
    causal = sorted(read_records(d)[0].case["causal"] for d in dirs)
    assert causal == [False, True]


def test_resume_takes_the_run_folder_as_well_as_its_id(tmp_path, compose, catalog):
    import torch

    from tierbench.suite.measure.session import RunSession

    runs, cpu = tmp_path / "runs", torch.device("cpu")
    first = RunSession.open(
        compose(["suite=smoke", f"results_dir={runs}", "run_id=first", "tiers=[vendor]"]), cpu, catalog
    )
    first.close()  # the folder's lock: one process at a time
    for given in ("first", str(runs / "first")):
        again = RunSession.open(compose([f"results_dir={runs}", f"resume={given}"]), cpu, catalog)
        again.close()
        assert again.run_id == "first" and again.run_dir == first.run_dir
        assert [pc.case.case_id for pc in again.plan] == [pc.case.case_id for pc in first.plan]
