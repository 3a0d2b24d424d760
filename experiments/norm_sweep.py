"""Every norm autotune candidate next to the static torch.compile, timed like the suite (not collected by pytest).

    python experiments/norm_sweep.py [--shapes 16384x16384,4096x1024] [--ops ln,rms,bgln] [--diagnose]

For each shape and op: checks each candidate the pruning rule keeps (forced, one at a time), the autotuned
launch and `torch.compile(dynamic=False)` of the eager formula against an fp32 reference, then times them
together with the harness's timer (CUDA-graph replay, L2 flushed before each repetition, providers taking
turns across rounds), with a plain copy of x at the same size (what a norm would reach if its arithmetic were
free). Prints one line per variant, fastest first, with its ratio to the compile, and the autotuner's picks.
`--diagnose` adds the two-pass and whole-row LayerNorm at 16384x16384 with and without weight and bias, next
to RMSNorm: what each per-column vector costs. About two minutes on an H200.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
import traceback
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton
from gpu_variants import norm_label  # the same labels as the do_bench sweep

# isort: split
from tierbench.suite.measure.checking import check
from tierbench.timing import CudaEventTimer, TimingSettings

nm = importlib.import_module("tierbench.kernels.norm")
SHAPES = "16384x16384,16384x8192,4096x16384,4096x8192,16384x4096,4096x1024,16384x1024"
T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def median(samples: object) -> float:
    return statistics.median(samples) if isinstance(samples, list) and samples else float("nan")


def time_together(
    timer: CudaEventTimer, fns: dict[str, Callable[[], torch.Tensor]], ref: torch.Tensor, unchecked: dict | None = None
) -> dict:
    """Median ms of each variant that passes the suite's check; wrong or failing ones are reported, not timed.
    `unchecked`: yardsticks timed alongside that compute something else (a plain copy of x)."""
    good = dict(unchecked or {})
    for name, fn in fns.items():
        try:
            verdict = check(fn(), ref, torch.bfloat16)
            if verdict.ok:
                good[name] = fn
            else:
                log(f"  {name}: WRONG, {verdict.reason}")
        except Exception as exc:  # one broken variant must not stop the sweep
            log(f"  {name}: FAILED {type(exc).__name__}: {str(exc)[:200]}")
    return {name: median(s) for name, s in timer.measure(good).items()}


def sweep(timer: CudaEventTimer, rows: int, n: int, ops: list[str]) -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16, generator=g)
    w, b, xb = (torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    nbytes = 2.0 * x.numel() * x.element_size()
    copy_out = torch.empty_like(x)
    kept = nm.prune_norm_configs(nm.norm_configs(), {"n_rows": rows, "N": n}, BLOCK_N=triton.next_power_of_2(n))
    xf, wf, bf, xbf = x.float(), w.float(), b.float(), xb.float()
    formulas = {
        "ln": (lambda x: F.layer_norm(x, (n,), w, b, 1e-5), (w, b, None, 1e-5, False),
               F.layer_norm(xf, (n,), wf, bf, 1e-5)),
        "rms": (lambda x: F.rms_norm(x, (n,), w, 1e-6), (w, None, None, 1e-6, True), F.rms_norm(xf, (n,), wf, 1e-6)),
        "bgln": (lambda x: F.layer_norm(F.gelu(x + xb), (n,), w, b, 1e-5), (w, b, xb, 1e-5, False),
                 F.layer_norm(F.gelu(xf + xbf), (n,), wf, bf, 1e-5)),
    }  # fmt: skip
    for op in ops:
        eager, args, ref = formulas[op]
        torch._dynamo.reset()
        compiled = torch.compile(eager, fullgraph=True, dynamic=False)
        fns = {"compile": lambda f=compiled: f(x), "auto": lambda a=args: nm._norm_forward(x, *a)}
        fns.update({norm_label(c): (lambda c=c, a=args: nm._norm_forward(x, *a, config=c)) for c in kept})
        # The copy of x moves the same bytes as each norm: the speed of light at this size, not the asymptote.
        med = time_together(timer, fns, ref, {"copy of x (same bytes)": lambda: copy_out.copy_(x)})
        peer = med.get("compile", float("nan"))
        log(f"== {op} {rows}x{n}: compile {nbytes / peer * 1e-6:.0f} GB/s")
        for name, ms in sorted(med.items(), key=lambda kv: kv[1]):
            print(f"   {op:4s} {rows}x{n:<6d} {name:26s} {ms * 1e3:8.2f} us {nbytes / ms * 1e-6:6.0f} GB/s "
                  f"x{peer / ms:.3f}", flush=True)  # fmt: skip
        for band, tuner in enumerate(nm._norm_tuned):
            for key, cfg in tuner.cache.items():
                if key[0] == n:
                    print(f"   autotune band {band} {key[:3]} -> {norm_label(cfg)}", flush=True)


def diagnose(timer: CudaEventTimer) -> None:
    n = 16384
    x = torch.randn(16384, n, device="cuda", dtype=torch.bfloat16)
    w, b = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fns = {}
    for name, cfg in [("two-pass 4096 w16", nm.norm_config(chunk=4096, evict=1, warps=16)),
                      ("rows 1 w16", nm.norm_config(rows=1, warps=16))]:  # fmt: skip
        for what, (ww, bb, eps, rms) in {"ln w+b": (w, b, 1e-5, False), "ln w": (w, None, 1e-5, False),
                                         "ln -": (None, None, 1e-5, False), "rms w": (w, None, 1e-6, True),
                                         "rms -": (None, None, 1e-6, True)}.items():  # fmt: skip
            fns[f"{what:7s}{name}"] = lambda c=cfg, ww=ww, bb=bb, eps=eps, rms=rms: nm._norm_forward(
                x, ww, bb, None, eps, rms, config=c
            )
    for fn in fns.values():
        fn()
    for name, samples in timer.measure(fns).items():
        ms = median(samples)
        print(f"   diag {name:26s} {ms * 1e3:8.2f} us {4.0 * x.numel() / ms * 1e-6:6.0f} GB/s", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default=SHAPES, help="rows x hidden, comma-separated")
    p.add_argument("--ops", default="ln,rms,bgln")
    p.add_argument("--diagnose", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("norm_sweep.py needs a CUDA GPU")
    timer = CudaEventTimer(TimingSettings(warmup_ms=5, rep_ms=12, rounds=3, steady_state_s=0), torch.device("cuda"))
    for shape in args.shapes.split(","):
        rows, n = map(int, shape.split("x"))
        try:
            sweep(timer, rows, n, args.ops.split(","))
        except Exception:
            traceback.print_exc(file=sys.stdout)
        torch.cuda.empty_cache()
    if args.diagnose:
        diagnose(timer)
    log("done")


if __name__ == "__main__":
    main()
