"""Synthetic runs, ceilings and asv results for the site's tests: no GPU, no measuring."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

from tierbench.suite.catalog import build
from tierbench.suite.store import runmeta
from tierbench.suite.store.records import Measurement

# What a run of the built-in catalog writes into run.json (views, baselines, tiers).
CATALOG_META = runmeta.describe_catalog(build(entry_points=False))

GPU_ENV = {
    "device_type": "cuda",
    "device_name": "NVIDIA H100 80GB HBM3",
    "torch": "2.6.0",
    "triton": "3.2.0",
    "cuda": "12.6",
    "cudnn": 90501,
    "driver": "560.35",
    "python": "3.11.7",
    "git_commit": "abc123def456",
}
CEILINGS = {
    "device_name": "NVIDIA H100 80GB HBM3",
    "copy_gbps": 2900.0,
    "matmul_tflops": {"bf16": 720.0, "fp16": 735.0, "fp32": 52.0},
    "method": "synthetic",
    "version": 1,
}

PROVIDERS = {  # family -> [(provider, tier)], 7 each, as a full GPU run has them
    "matmul": [
        ("eager", "vendor"),
        ("cublaslt", "vendor"),
        ("compile", "compiler"),
        ("compile-max-autotune", "compiler"),
        ("triton", "triton"),
        ("triton-tma", "triton"),
        ("cutlass", "cuda"),
    ],
    "norm": [
        ("eager", "vendor"),
        ("apex", "vendor"),
        ("compile", "compiler"),
        ("compile-max-autotune", "compiler"),
        ("triton", "triton"),
        ("quack", "cuda"),
        ("liger", "triton"),
    ],
    "attention": [
        ("sdpa-flash", "vendor"),
        ("sdpa-cudnn", "vendor"),
        ("sdpa-math", "vendor"),
        ("compile", "compiler"),
        ("triton", "triton"),
        ("flash-attn-3", "cuda"),
        ("flash-attn-4", "cuda"),
    ],
}
PROVIDERS["decode"] = PROVIDERS["attention"]


def record(**kw: Any) -> Measurement:
    """A measurement with plausible defaults; keyword arguments override any field."""
    base: dict[str, Any] = dict(
        run_id="r1",
        op="matmul",
        family="matmul",
        case={"m": 256, "n": 256, "k": 256, "dtype": "bf16", "mode": "fwd"},
        case_id="matmul/m=256",
        label="256^3",
        x=256.0,
        provider="eager",
        tier="vendor",
        status="ok",
        median_ms=1.0,
        quantiles_ms={"p10": 0.9, "p25": 0.95, "p75": 1.05, "p90": 1.1},
        flops=2 * 256**3,
        min_bytes=3 * 256 * 256 * 2,
        tflops=0.0336,
        rel_error=1e-3,
        peak_mem_bytes=1 << 20,
        env=dict(GPU_ENV),
        time=1000.0,
    )
    base.update(kw)
    return Measurement(**base)


def write_run(
    runs_dir: Path, run_id: str, records: list[Measurement], suite: str = "smoke", complete: bool = True
) -> Path:
    """A run folder as `tierbench run` leaves it: config, records and run.json (`complete`: it finished)."""
    path = runs_dir / run_id
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(f"suite: {suite}\nresults_dir: {runs_dir}\n")
    with (path / "measurements.jsonl").open("w") as f:
        for r in records:
            f.write(r.to_json() + "\n")
    done = len({r.key for r in records})
    finished = max((r.time for r in records), default=0.0) if complete else None
    meta = runmeta.RunMeta(run_id, suite, planned=done, done=done, finished=finished, **CATALOG_META)
    runmeta.write(path, meta)
    return path


def full_suite_cases() -> list[tuple[str, str, dict[str, Any], str, float, float, float]]:
    """~350 cases shaped like the full GPU suite: (family, op, params, label, x, flops, min_bytes)."""
    out = []
    for dtype in ("bf16", "fp16", "fp32"):
        for mode in ("fwd", "bwd"):
            shapes = [(n, n, n, f"{n}^3") for n in (512, 1024, 2048, 4096, 8192)]
            for model, hidden, ffn in (("llama3-8b", 4096, 14336), ("llama3-70b", 8192, 28672)):
                shapes += [
                    (16384, hidden, hidden, f"{model}.qkv"),
                    (16384, ffn, hidden, f"{model}.up"),
                    (16384, hidden, ffn, f"{model}.down"),
                ]
            for m, n, k, label in shapes:
                out.append(
                    (
                        "matmul",
                        "matmul",
                        {"m": m, "n": n, "k": k, "dtype": dtype, "mode": mode},
                        label,
                        (m * n * k) ** (1 / 3),
                        2.0 * m * n * k,
                        2.0 * (m * k + k * n + m * n),
                    )
                )
    for op in ("layer_norm", "rms_norm", "bias_gelu_layer_norm"):
        for dtype in ("bf16", "fp16"):
            for mode in ("fwd", "bwd"):
                for rows in (4096, 16384, 65536):
                    for hidden in (1024, 2048, 4096, 8192, 16384):
                        out.append(
                            (
                                "norm",
                                op,
                                {"rows": rows, "hidden": hidden, "dtype": dtype, "mode": mode},
                                f"{rows}x{hidden}",
                                rows * hidden,
                                8.0 * rows * hidden,
                                4.0 * rows * hidden,
                            )
                        )
    for dtype in ("bf16", "fp16"):
        for mode in ("fwd", "bwd"):
            for head_dim in (64, 128):
                for causal in (False, True):
                    for seq in (512, 1024, 2048, 4096, 8192, 16384, 32768):
                        b, h = max(1, 16384 // seq), 2048 // head_dim
                        flops = 4.0 * b * h * seq * seq * head_dim / (2 if causal else 1)
                        label = f"B{b} H{h} S{seq} D{head_dim}" + (" causal" if causal else "")
                        out.append(
                            (
                                "attention",
                                "attention",
                                {
                                    "batch": b,
                                    "heads": h,
                                    "seq": seq,
                                    "head_dim": head_dim,
                                    "causal": causal,
                                    "dtype": dtype,
                                    "mode": mode,
                                },
                                label,
                                seq,
                                flops,
                                8.0 * b * h * seq * head_dim,
                            )
                        )
    return out + shipped_cases("attention", grouped_only=True) + shipped_cases("decode")


def shipped_cases(
    family: str, grouped_only: bool = False
) -> list[tuple[str, str, dict[str, Any], str, float, float, float]]:
    """The cases conf/shapes/<family>.yaml makes (attention: only its grouped-query models), as full_suite_cases."""
    from omegaconf import OmegaConf

    from tierbench.suite.commands.run_command import conf_dir

    catalog = build(entry_points=False)
    fam = catalog.family(family)
    section = OmegaConf.merge(
        OmegaConf.structured(fam.schema), OmegaConf.load(Path(conf_dir()) / "shapes" / f"{family}.yaml")
    )
    out = []
    for case in fam.cases(section):
        if grouped_only and "kv_heads" not in case.params:
            continue
        w = catalog.ops[case.op].work(case)
        out.append((family, case.op, case.to_json(), case.label, case.x, w.flops, w.min_bytes))
    return out


def full_suite_records(run_id: str = "full", seed: int = 0) -> list[Measurement]:
    """Every case × 7 providers, with realistic statuses, long reasons, spreads and memory."""
    rng = random.Random(seed)
    out = []
    for family, op, params, label, x, flops, min_bytes in full_suite_cases():
        case_id = f"{op}/" + ",".join(f"{k}={params[k]}" for k in sorted(params))
        for i, (provider, tier) in enumerate(PROVIDERS[family]):
            kw: dict[str, Any] = dict(
                run_id=run_id,
                op=op,
                family=family,
                case=params,
                case_id=case_id,
                label=label,
                x=float(x),
                provider=provider,
                tier=tier,
                flops=flops,
                min_bytes=min_bytes,
                time=1000.0 + len(out),
                provider_version="1.2.3",
            )
            roll = rng.random()
            if provider == "flash-attn-4" or (provider == "sdpa-math" and params.get("seq", 0) >= 32768):
                kw.update(
                    status="skipped" if provider == "flash-attn-4" else "oom",
                    reason="package not installed: flash_attn.cute (ModuleNotFoundError: No module named "
                    "'flash_attn.cute'); install it with pip install flash-attn-4 quack-kernels"
                    if provider == "flash-attn-4"
                    else "CUDA out of memory. Tried to allocate 32.00 GiB",
                    median_ms=None,
                    quantiles_ms={},
                    tflops=None,
                    gbps=None,
                    peak_mem_bytes=None,
                )
            elif roll < 0.03:
                kw.update(
                    status="incorrect",
                    reason=f"max rel. error {rng.uniform(0.02, 0.5):.3g} > tolerance 0.01",
                    median_ms=None,
                    quantiles_ms={},
                    tflops=None,
                    gbps=None,
                    rel_error=0.1,
                )
            elif roll < 0.05:
                kw.update(
                    status="error",
                    reason="RuntimeError: triton.compiler.errors.CompilationError: at 12:4: "
                    "out of resources: shared memory, Required: 262144",
                    median_ms=None,
                    quantiles_ms={},
                    tflops=None,
                    gbps=None,
                )
            else:
                ms = flops / (rng.uniform(0.2, 0.8) * 700e12) * 1e3 + min_bytes / 2.5e12 * 1e3 * (1 + i / 7)
                mem = min_bytes * (1 + (params.get("seq", 0) * 4 if provider == "sdpa-math" else 0.1))
                kw.update(
                    status="ok",
                    median_ms=ms,
                    min_ms=ms * 0.97,
                    quantiles_ms={"p10": ms * 0.98, "p25": ms * 0.99, "p75": ms * 1.01, "p90": ms * 1.03},
                    samples_ms=[ms * rng.uniform(0.97, 1.04) for _ in range(20)],
                    tflops=flops / ms / 1e9,
                    gbps=min_bytes / ms / 1e6,
                    sol=rng.uniform(0.2, 0.9),
                    bound="compute" if flops / min_bytes > 250 else "memory",
                    rel_error=rng.uniform(1e-4, 5e-3),
                    tolerance=1e-2,
                    peak_mem_bytes=int(mem),
                    launches=1 + (i % 3) * (op == "bias_gelu_layer_norm"),
                    traffic_bytes=min_bytes * rng.uniform(1.0, 3.2),
                )
            out.append(record(env=dict(GPU_ENV), **kw))
    return out


def write_asv(
    asv_dir: Path,
    commits: int = 12,
    machines: tuple[str, ...] = ("h100-box",),
    sizes: tuple[str, ...] = ("1024", "4096"),
) -> None:
    """asv 0.6 results (api_version 2): a parametrized time benchmark with a step, a track benchmark,
    a failed (null) and a skipped (NaN) value, and a result from an older benchmark version."""
    asv_dir.mkdir(parents=True, exist_ok=True)
    benchmarks = {
        "matmul.TimeMatmul.time_matmul": {
            "name": "matmul.TimeMatmul.time_matmul",
            "type": "time",
            "unit": "seconds",
            "param_names": ["provider", "size"],
            "params": [["'eager'", "'triton'"], list(sizes)],
            "version": "v1",
        },
        "attention.TrackAttention.track_tflops": {
            "name": "attention.TrackAttention.track_tflops",
            "type": "track",
            "unit": "TFLOP/s",
            "param_names": [],
            "params": [],
            "version": "v1",
        },
        "version": 2,
    }
    (asv_dir / "benchmarks.json").write_text(json.dumps(benchmarks))
    columns = [
        "result",
        "params",
        "version",
        "started_at",
        "duration",
        "stats_ci_99_a",
        "stats_ci_99_b",
        "stats_q_25",
        "stats_q_75",
        "stats_number",
        "stats_repeat",
        "samples",
        "profile",
    ]
    for machine in machines:
        (asv_dir / machine).mkdir(exist_ok=True)
        (asv_dir / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
        for i in range(commits):
            step = 1.3 if i >= commits // 2 else 1.0  # triton slows down by 30% half way
            wobble = 1 + 0.01 * math.sin(i)
            results = {
                "matmul.TimeMatmul.time_matmul": [
                    [1e-3 * (j + 1) * wobble for j in range(len(sizes))]  # eager: flat
                    + [(1.1e-3 * (j + 1) * step * wobble if i != 3 else None) for j in range(len(sizes))],
                    benchmarks["matmul.TimeMatmul.time_matmul"]["params"],
                    "v1" if i else "v0",
                    0,
                    1.0,
                ],
                "attention.TrackAttention.track_tflops": [[float("nan")] if i == 2 else [500.0 * wobble], [], "v1"],
            }
            data = {
                "commit_hash": f"{i:02d}" + "c0ffee" * 6,
                "env_name": "existing-py",
                "date": 1.7e12 + i * 8.64e7,
                "params": {"machine": machine},
                "python": "3.11",
                "requirements": {},
                "env_vars": {},
                "result_columns": columns,
                "results": results,
                "durations": {},
                "version": 2,
            }
            (asv_dir / machine / f"{i:02d}c0ffee-existing-py.json").write_text(json.dumps(data))
