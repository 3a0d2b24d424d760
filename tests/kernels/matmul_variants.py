"""GPU check-and-time script for the matmul family's newer ops (not collected by pytest).

    python tests/kernels/matmul_variants.py [--family epilogue,bwd,fp8] [--quick]

Like gpu_variants.py (whose helpers it uses): every variant is checked against an fp32 torch reference and
timed with triton.testing.do_bench next to its torch peer.
- epilogue: matmul_bias_gelu (erf and tanh; whole-tile and half-width stores; with the pre-activation
  stored, as under autograd) against eager addmm + gelu, and the plain Triton matmul of the same shape,
  whose time is what the epilogue adds to;
- bwd: dA = dC B^T and dB = A^T dC (transposed-operand descriptors) against torch.matmul of the same views;
- fp8: matmul_fp8 (e4m3, per-row/column scales, precise and fast accumulation, each config) against
  torch._scaled_mm with the same scales.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton
from gpu_variants import ROWS, T0, bench, log, row, run_variants

mm_mod = importlib.import_module("tierbench.kernels.matmul")
ep_mod = importlib.import_module("tierbench.kernels.epilogue")
f8_mod = importlib.import_module("tierbench.kernels.matmul_fp8")

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 14336, 4096), (16384, 4096, 14336)]


def _tflops(m: int, n: int, k: int, ms: float) -> str:
    return f"{2.0 * m * n * k / (ms * 1e-3) * 1e-12:.1f} TFLOP/s"


def _tile_name(c: triton.Config) -> str:
    kw = c.kwargs
    name = f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} w{c.num_warps} s{c.num_stages}"
    return name + (" sub" if kw["EPI_SUBTILE"] else "")


def _epilogue_shape(m: int, n: int, k: int) -> None:
    dtype = torch.bfloat16
    a = torch.randn(m, k, device="cuda", dtype=dtype) * k**-0.25
    b = torch.randn(k, n, device="cuda", dtype=dtype) * k**-0.25
    bias = torch.randn(n, device="cuda", dtype=dtype) * 0.5
    flops = 2.0 * m * n * k
    z = a.float() @ b.float() + bias.float()
    for approx in ("none", "tanh"):
        shape = f"{m}x{n}x{k} gelu={approx}"
        peer = bench(lambda approx=approx: F.gelu(torch.addmm(bias, a, b), approximate=approx))
        row("epilogue", shape, "eager addmm + gelu (peer)", peer, _tflops(m, n, k, peer), "1.000", "-")
        act = ep_mod.activations.GELU_CODES[approx]
        variants = [
            ("auto", lambda approx=approx: ep_mod.matmul_bias_gelu(a, b, bias, approx)),
            ("auto, z stored (autograd)", lambda act=act: ep_mod._forward(a, b, bias, act, True)[0]),
        ]
        for c in mm_mod.matmul_tma_configs()[:6]:
            variants.append((_tile_name(c), lambda c=c, act=act: ep_mod._forward(a, b, bias, act, False, config=c)[0]))
        run_variants("epilogue", shape, variants, F.gelu(z, approximate=approx), 1e-2, flops, "TFLOP/s", peer)
    plain = [("triton matmul, no epilogue", lambda: mm_mod.matmul(a, b))]
    run_variants("epilogue", f"{m}x{n}x{k} plain", plain, a.float() @ b.float(), 1e-2, flops, "TFLOP/s", peer)


def _backward_shape(m: int, n: int, k: int) -> None:
    dtype = torch.bfloat16
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    dc = torch.randn(m, n, device="cuda", dtype=dtype)
    flops = 2.0 * m * n * k
    for what, x, y in (("dA = dC B^T", dc, b.T), ("dB = A^T dC", a.T, dc)):
        shape = f"{m}x{n}x{k} {what}"
        peer = bench(lambda x=x, y=y: torch.matmul(x, y))
        row("bwd", shape, "torch.matmul (peer)", peer, _tflops(m, n, k, peer), "1.000", "-")
        variants = [("auto", lambda x=x, y=y: mm_mod._matmul_forward(x, y))]
        for c in mm_mod.matmul_tma_configs()[:4]:
            variants.append((_tile_name(c), lambda c=c, x=x, y=y: mm_mod._matmul_forward(x, y, path="tma", config=c)))
        run_variants("bwd", shape, variants, x.float() @ y.float(), 1e-2, flops, "TFLOP/s", peer)


def _fp8_shape(m: int, n: int, k: int) -> None:
    fmt = torch.float8_e4m3fn
    x = torch.randn(m, k, device="cuda")
    yt = torch.randn(n, k, device="cuda")
    scale_a = (x.abs().amax(1, keepdim=True) / 448.0).clamp_min(1e-12)
    scale_bt = (yt.abs().amax(1, keepdim=True) / 448.0).clamp_min(1e-12)
    a, bt = (x / scale_a).to(fmt), (yt / scale_bt).to(fmt)
    b, scale_b = bt.T, scale_bt.reshape(1, n)
    ref = (a.float() * scale_a) @ (b.float() * scale_b)
    flops = 2.0 * m * n * k
    for fast in (False, True):
        shape = f"{m}x{n}x{k} e4m3{' fast' if fast else ''}"
        try:
            peer = bench(
                lambda fast=fast: torch._scaled_mm(
                    a, b, scale_a, scale_b, out_dtype=torch.bfloat16, use_fast_accum=fast
                )
            )
        except Exception as e:  # rowwise scaling needs a recent torch built for sm_90
            log(f"torch._scaled_mm failed: {type(e).__name__}: {str(e)[:200]}; ratios against 1 ms")
            peer = 1.0
        row("fp8", shape, "torch._scaled_mm (peer)", peer, _tflops(m, n, k, peer), "1.000", "-")
        variants = [("auto", lambda fast=fast: f8_mod.matmul_fp8(a, b, scale_a, scale_b, fast_accum=fast))]
        for c in f8_mod.matmul_fp8_configs():

            def fn(c=c, fast=fast):
                return f8_mod._matmul_fp8_forward(a, b, scale_a, scale_b, torch.bfloat16, fast, config=c)

            variants.append((_tile_name(c), fn))
        run_variants("fp8", shape, variants, ref, 1e-2, flops, "TFLOP/s", peer)


def _each_shape(shape_fn: Callable[[int, int, int], None]) -> Callable[[bool], None]:
    def run(quick: bool) -> None:
        for m, n, k in SHAPES[:1] + SHAPES[2:3] if quick else SHAPES:
            shape_fn(m, n, k)
            torch.cuda.empty_cache()

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", default="epilogue,bwd,fp8")
    p.add_argument("--quick", action="store_true", help="two shapes per family")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("matmul_variants.py needs a CUDA GPU")
    props = torch.cuda.get_device_properties(0)
    log(f"{props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}")
    torch.manual_seed(0)
    fams = {
        "epilogue": _each_shape(_epilogue_shape),
        "bwd": _each_shape(_backward_shape),
        "fp8": _each_shape(_fp8_shape),
    }
    for fam in args.family.split(","):
        log(f"== {fam}")
        try:
            fams[fam](args.quick)
        except Exception:
            traceback.print_exc(file=sys.stdout)
    log(f"\n== summary ({time.time() - T0:.0f}s)")
    log(f"{'family':9s} {'shape':28s} {'variant':34s} {'ms':>9s} {'rate':>14s} {'x peer':>7s} {'rel err':>9s}")
    for line in ROWS:
        log(line)
    log("\n== autotuner choices (key -> config)")
    for name, tuner in (
        ("_matmul_tma_tuned", mm_mod._matmul_tma_tuned),
        ("_matmul_fp8_tuned", f8_mod._matmul_fp8_tuned),
    ):
        for key, cfg in tuner.cache.items():
            log(f"{name} {key}: {cfg}")


if __name__ == "__main__":
    main()
