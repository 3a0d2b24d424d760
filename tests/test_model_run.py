"""The smoke's tiny model through the real console command: every phase, the three strategies, then the model
view in `summary`, `export` and the run's report."""

from __future__ import annotations

import json

import pytest
from cli_runner import tierbench_cli
from cpu_run import RUN_TIMING

from tierbench.suite.store.reading import read_records

# The smoke's model alone, shorter still; the vendor and compiler tiers and the mix (the Triton kernels are
# checked by their own tests and by the smoke).
ONLY_THE_MODEL = [
    "suite=smoke",
    *RUN_TIMING,
    "tiers=[vendor,compiler,mix]",
    # torch.compile the compiler tier's one: TVM's and IREE's whole-block compiles take minutes on a CPU.
    "providers=[eager,compile,sdpa-flash,sdpa-cudnn,sdpa-efficient,sdpa-math,best-mix]",
    *(f"{family}.enabled=false" for family in ("matmul", "norm", "attention", "decode", "pointwise")),
    "model.prefill.seq=16",
    "model.decode.seq=32",
    "model.training.seq=16",
]


@pytest.mark.slow
def test_the_tiny_model_in_every_phase_shows_the_model_view(tmp_path):
    runs = tmp_path / "runs"
    paths = [f"results_dir={runs}", f"ceilings_dir={tmp_path}/ceilings", "run_id=tiny"]
    result = tierbench_cli("run", *ONLY_THE_MODEL, *paths, cwd=tmp_path, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_records(runs / "tiny")
    blocks = {(r.case["phase"], r.provider): r for r in records if r.family == "model"}
    assert set(blocks) == {(p, s) for p in ("prefill", "decode", "training") for s in ("eager", "compile", "best-mix")}
    for (phase, strategy), r in blocks.items():
        assert r.status == "ok" and r.rel_error <= r.tolerance, (phase, strategy, r.reason)
    assert set(blocks["training", "eager"].errors) >= {"out", "dx", "dw_qkv", "dw_down", "dattn_norm"}
    mix = blocks["decode", "best-mix"].composed
    assert set(mix) == {"attn_norm", "qkv", "attention", "o_proj", "add_norm", "gate_up", "swiglu", "down", "residual"}
    parts = [r for r in records if r.family != "model"]
    assert {r.op for r in parts} == {"rms_norm", "matmul", "attention", "decode", "add_rms_norm", "silu_mul",
                                     "residual_add"}  # fmt: skip
    assert all(r.status in ("ok", "skipped") for r in parts), [(r.op, r.provider, r.reason) for r in parts]

    summary = tierbench_cli("summary", str(runs / "tiny"), "--family", "model", cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr
    for phase in ("prefill", "decode", "training"):
        assert f"### model view: tiny, {phase}" in summary.stdout
    assert "| strategy | block (ms) | sum of its parts (ms) |" in summary.stdout
    assert "Best mix: attn_norm " in summary.stdout
    views = [t for t in json.loads(tierbench_cli("summary", "tiny", "--runs", str(runs), "--json", cwd=tmp_path).stdout)
             if t.get("view") == "model"]  # fmt: skip
    assert [v["phase"] for v in views] == ["prefill", "decode", "training"]
    for v in views:
        assert sum(p["share"] for p in v["parts"]) == pytest.approx(1.0)
        eager = v["strategies"]["eager"]
        assert eager["parts_ms"] == pytest.approx(sum(p["eager_ms"] for p in v["parts"]))

    exported = tierbench_cli("export", str(runs / "tiny"), "--format", "jsonl", cwd=tmp_path)
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert {row["block.part"] for row in rows if row.get("block.part")} == set(mix)
    assert any(row.get("composed.attention") for row in rows)
    html = (runs / "tiny" / "report.html").read_text()
    assert "which op to move down the ladder" in html and "block time by part, per strategy" in html
