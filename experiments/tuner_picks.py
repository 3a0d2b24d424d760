"""How stable the norm tuner's pick is: fresh tunings of one shape, side by side with Triton's autotuner
(not collected by pytest).

    python experiments/tuner_picks.py [--shapes rms:4096x1024,rms:16384x8192] [--tunings 5]

For each op and shape: `--tunings` fresh `TurnTuner`s (the shipped tuner, which times the candidates in
rotating turns from CUDA-graph replays) and as many fresh `triton.autotune` tuners over the same candidates
and pruning rule (one candidate after another, Triton's `do_bench`). Prints every pick, the turn tuner's
three fastest candidates with their medians, and how many distinct configs each tuner picked. A pick that
changes between tunings of one shape is what the regression tracker later reads as a step.
About a minute on an H200 for the default shapes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

import torch
import triton
from gpu_variants import norm_label  # the same labels as the sweeps

# isort: split
from tierbench.kernels._tuning import TurnTuner

nm = importlib.import_module("tierbench.kernels.norm")
SHAPES = "rms:4096x1024,ln:4096x1024,rms:16384x1024,rms:16384x8192"


def tune_once(tuner: object, x: torch.Tensor, w: torch.Tensor, is_rms: bool) -> triton.Config:
    """Install `tuner` for x's band of rows per SM, launch once, return its pick."""
    band = nm.rows_per_sm_band(x.shape[0], nm.num_sms(x.device))
    saved = nm._norm_tuned[band]
    nm._norm_tuned[band] = tuner
    try:
        nm._norm_forward(x, w, None if is_rms else w, None, 1e-5, is_rms)
    finally:
        nm._norm_tuned[band] = saved
    return tuner.best_config


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default=SHAPES, help="op:ROWSxHIDDEN, op in ln, rms")
    p.add_argument("--tunings", type=int, default=5)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("tuner_picks.py needs a CUDA GPU")
    key = ["N", "IS_RMS", "HAS_GELU"]
    for spec in args.shapes.split(","):
        op, shape = spec.split(":")
        rows, n = (int(v) for v in shape.split("x"))
        x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        picks: dict[str, list[str]] = {"turn": [], "triton": []}
        for i in range(args.tunings):
            t0 = time.time()
            tuner = TurnTuner(nm._norm_kernel, nm.norm_configs(), key=key, prune=nm.prune_norm_configs)
            pick = norm_label(tune_once(tuner, x, w, op == "rms"))
            fastest = sorted(next(iter(tuner.timings.values())).items(), key=lambda kv: kv[1])[:3]
            picks["turn"].append(pick)
            print(
                f"{op} {shape} turn {i}: {pick:26s} {time.time() - t0:4.1f}s  "
                + "  ".join(f"{norm_label(c)} {ms * 1e3:.2f}us" for c, ms in fastest),
                flush=True,
            )
        for i in range(args.tunings):
            t0 = time.time()
            prune = {"early_config_prune": nm.prune_norm_configs}
            tuner = triton.autotune(nm.norm_configs(), key=key, prune_configs_by=prune)
            pick = norm_label(tune_once(tuner(nm._norm_kernel), x, w, op == "rms"))
            picks["triton"].append(pick)
            print(f"{op} {shape} triton {i}: {pick:26s} {time.time() - t0:4.1f}s", flush=True)
        print(
            f"== {op} {shape}: "
            + ", ".join(f"{name} picks {sorted(set(ps))} ({len(set(ps))})" for name, ps in picks.items()),
            flush=True,
        )


if __name__ == "__main__":
    main()
