"""GPU check-and-time script for the Triton kernels' configs and variants (not collected by pytest).

    python experiments/gpu_variants.py [--family matmul,small,fp8,norm,normbwd,attention,attnbwd,decode,decodegrid]
                                      [--quick]

For each family and target shape: checks every variant against an fp32 torch reference, times it with
triton.testing.do_bench (median) next to its torch peer (torch.matmul, F.layer_norm, F.rms_norm, SDPA's flash
backend), and prints one row per variant: shape, variant, ms, TFLOP/s or GB/s, ratio to the peer, relative
error. A failing variant prints its error and the run goes on. Meant to finish in about four minutes on an
H200; the winners are what the autotune lists in kernels/*.py should hold. The `small` family (matmul
512^3-2048^3 tile variants of both paths, and the bias+GELU epilogue against the plain kernel under one
config) is timed with CUDA graphs (`do_bench_cudagraph`), as the suite times them, since a launch is a large
part of a 10-microsecond kernel. So is the `decode` family (split-KV tiles, pipeline depths and split counts
at q_len 1 and 16 on Llama-3 8B's layout, K/V through pointers and through TMA, contiguous and paged, the
combine also as a programmatic dependent launch, against cuDNN's SDPA, each also as a share of a copy of the
bytes it must read). The `fp8` family forces the FP8 kernel's tiles, pipeline depths and warp specialisation,
and the Gluon FP8 kernel, each with precise and fast accumulation, against `torch._scaled_mm` in the same
mode: which of them the gap to cuBLASLt comes from. The `normbwd` family times the norm backward (LayerNorm
and the fused op, 4096, 8192 and 16384 wide, RMSNorm at 16384) as tuned against whole-row candidates forced
one at a time (the next row brought by cp.async among them; at 16384, rows split two to eight ways between
programs and forced two passes, against the tuner's split rows for LayerNorm and RMSNorm and its two passes
for the fused op), each as a share of a copy's rate on the bytes it must move. The matmul, small and epilogue
rows include the warp-specialised Gluon kernel (`path="ws"`: one warpgroup's epilogue beside the other's
products). The `attnbwd` family times the attention backward's two passes against its one pass with atomic dQ
(each candidate forced), beside cuDNN's and flash-attn 4's backward. The `decodegrid` family (not in the
default list) crosses the decode tiles with split counts at batch 1, each read through pointers and through
TMA descriptors, and shows each launch's kernels on the card.
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
from triton.testing import do_bench, do_bench_cudagraph

# The package re-exports functions under its submodules' names: fetch the modules themselves.
attn_mod = importlib.import_module("tierbench.kernels.attention")
mm_mod = importlib.import_module("tierbench.kernels.matmul")
epi_mod = importlib.import_module("tierbench.kernels.epilogue")
act_mod = importlib.import_module("tierbench.kernels._activations")
norm_mod = importlib.import_module("tierbench.kernels.norm")
dec_mod = importlib.import_module("tierbench.kernels.decode")
fp8_mod = importlib.import_module("tierbench.kernels.matmul_fp8")
nb_mod = importlib.import_module("tierbench.kernels.norm_backward")
common_mod = importlib.import_module("tierbench.kernels._common")

ROWS: list[str] = []
T0 = time.time()


def log(msg: str) -> None:
    print(msg, flush=True)


def row(family: str, shape: str, variant: str, ms: float, rate: str, ratio: str, err: str) -> None:
    line = f"{family:9s} {shape:28s} {variant:34s} {ms:9.4f} {rate:>14s} {ratio:>7s} {err:>9s}"
    ROWS.append(line)
    log(f"[{time.time() - T0:6.1f}s] {line}")


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out = out.float()
    if not torch.isfinite(out).all():
        return float("nan")
    return ((out - ref).norm() / ref.norm()).item()


GRAPHED = False  # the small family times under CUDA graphs


def bench(fn: Callable[[], object]) -> float:
    if GRAPHED:
        return do_bench_cudagraph(fn, rep=50, return_mode="median")
    return do_bench(fn, warmup=10, rep=50, return_mode="median")


def run_variants(
    family: str,
    shape: str,
    variants: list[tuple[str, Callable[[], torch.Tensor]]],
    ref: torch.Tensor,
    tol: float,
    work: float,
    unit: str,
    peer_ms: float,
) -> None:
    """Time each variant; `work` is FLOPs (unit TFLOP/s) or bytes (unit GB/s)."""
    for name, fn in variants:
        try:
            err = rel_err(fn(), ref)
            ok = err <= tol
            ms = bench(fn)
            scale = 1e-12 if unit == "TFLOP/s" else 1e-9
            rate = f"{work * scale / (ms * 1e-3):.1f} {unit}"
            row(family, shape, name, ms, rate, f"{peer_ms / ms:.3f}", f"{err:.1e}" + ("" if ok else " BAD"))
        except Exception as e:  # one broken variant must not stop the sweep
            msg = f"{type(e).__name__}: {str(e)[:300]}"
            log(f"[{time.time() - T0:6.1f}s] {family} {shape} {name} FAILED: {msg}")
            traceback.print_exc(limit=2, file=sys.stdout)
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------------------
# matmul
# ----------------------------------------------------------------------------------------------------------


def fp8_variants(a, b, sa, sb, fast: bool) -> list[tuple[str, Callable[[], torch.Tensor]]]:
    """The FP8 kernel's configs forced one at a time (precise accumulation skips the 128x256 tiles, which
    spill with its second accumulator; 256x128 does not); BLOCK_K 64 and 256 beside the list's 128."""
    cfg = mm_mod._cfg

    def forced(c: triton.Config) -> Callable[[], torch.Tensor]:
        return lambda: fp8_mod._matmul_fp8_forward(a, b, sa, sb, torch.bfloat16, fast, config=c)

    out = [("auto (autotuned)", lambda: fp8_mod._matmul_fp8_forward(a, b, sa, sb, torch.bfloat16, fast))]
    # The Gluon kernel: precise accumulation's adds beside the next step's products.
    out.append(("gluon 128x128x128 w8 s4", lambda: fp8_mod.matmul_fp8(a, b, sa, sb, fast_accum=fast, path="gluon")))
    tiles = [
        (128, 128, 128, 8, 4, False, False),
        (128, 128, 128, 4, 4, False, False),
        (128, 128, 128, 8, 5, False, False),
        (128, 128, 64, 8, 6, False, False),
        (128, 128, 256, 8, 2, False, False),
        (128, 128, 128, 8, 4, True, False),  # warp-specialised
        (64, 256, 128, 4, 4, False, False),
        (256, 128, 128, 8, 3, False, False),  # the largest tile precise accumulation compiles without spills
        (256, 128, 128, 8, 3, False, True),
        (256, 128, 128, 8, 4, False, True),
        (256, 128, 128, 8, 3, True, False),
    ]
    if fast:
        tiles += [
            (128, 256, 128, 8, 3, False, True),
            (128, 256, 128, 8, 4, False, True),
            (128, 256, 128, 8, 4, True, True),
            (128, 256, 64, 8, 6, False, True),
        ]
    for bm, bn, bk, w, st, ws, sub in tiles:
        name = f"{bm}x{bn}x{bk} w{w} s{st}" + (" ws" if ws else "") + (" sub" if sub else "")
        out.append((name, forced(cfg(bm, bn, bk, w, st, subtile=sub, ws=ws, flatten=not ws))))
    # Precise accumulation as two half-width products a K step (fast accumulation has no promotion to split).
    if not fast:
        for bm, bn, st in ((128, 256, 3), (128, 256, 4), (128, 128, 4)):
            name = f"{bm}x{bn}x128 w8 s{st} split halves"
            out.append((name, forced(fp8_mod.fp8_cfg(bm, bn, 128, 8, st, split_n=True))))
    # Two or three programs an SM, one warpgroup each (half-width stores, so that two fit shared memory).
    for bm, bn, st, per_sm in ((128, 128, 3, 2), (64, 128, 4, 2), (128, 64, 4, 2), (64, 128, 2, 3), (64, 64, 4, 3)):
        name = f"{bm}x{bn}x128 w4 s{st} sub x{per_sm}/SM"
        out.append((name, forced(fp8_mod.fp8_cfg(bm, bn, 128, 4, st, subtile=True, per_sm=per_sm))))
    return out


FP8_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 4096), (16384, 14336, 4096)]


def bench_fp8(quick: bool, shapes: list[tuple[int, int, int]] | None = None) -> None:
    """FP8 e4m3, bf16 output, per-tensor scales (and per-row at the default list's first shape): each mode
    against `torch._scaled_mm` in the same mode. `shapes` (--fp8-shapes) replaces the list, per-tensor only."""
    chosen = shapes or (FP8_SHAPES[:1] if quick else FP8_SHAPES)
    for m, n, k in chosen:
        a32 = torch.randn(m, k, device="cuda")
        bt32 = torch.randn(n, k, device="cuda")
        scalings = [("per-tensor", a32.abs().amax().reshape(1) / 448, bt32.abs().amax().reshape(1) / 448)]
        if not shapes and (m, n, k) == FP8_SHAPES[0]:
            scalings.append(("per-row", a32.abs().amax(1, keepdim=True) / 448, bt32.abs().amax(1)[None, :] / 448))
        for scaling, sa, sb in scalings:
            # sa is (1,) or (M, 1); sb is (1,) or (1, N), a column of bt's rows once reshaped.
            a = (a32 / sa).to(torch.float8_e4m3fn)
            bt = (bt32 / sb.reshape(-1, 1)).to(torch.float8_e4m3fn)
            b = bt.T
            # The reference: the quantised operands, dequantised, multiplied in fp32.
            ref = (a.float() * sa) @ (b.float() * sb)
            flops = 2.0 * m * n * k
            for fast in (False, True):
                mode = "fast" if fast else "precise"
                shape = f"{m}x{n}x{k} {scaling} {mode}"
                peer = bench(
                    lambda a=a, b=b, sa=sa, sb=sb, fast=fast: torch._scaled_mm(
                        a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast
                    )
                )
                row("fp8", shape, "torch._scaled_mm (peer)", peer, f"{flops / peer * 1e-9:.1f} TFLOP/s", "1.000", "-")
                run_variants("fp8", shape, fp8_variants(a, b, sa, sb, fast), ref, 2e-2, flops, "TFLOP/s", peer)
            del a, bt, b, ref
        del a32, bt32
        torch.cuda.empty_cache()


def matmul_variants(a: torch.Tensor, b: torch.Tensor) -> list[tuple[str, Callable[[], torch.Tensor]]]:
    cfg = mm_mod._cfg

    def forced(path: str, c: triton.Config) -> Callable[[], torch.Tensor]:
        return lambda: mm_mod._matmul_forward(a, b, path=path, config=c)

    out = [("auto (autotuned)", lambda: mm_mod.matmul(a, b))]
    for name, path, c in [
        ("tma 128x256x64 w8 s3 sub", "tma", cfg(128, 256, 64, 8, 3, subtile=True)),
        ("tma 128x256x64 w8 s4 sub", "tma", cfg(128, 256, 64, 8, 4, subtile=True)),
        ("tma 128x256x64 w8 s3", "tma", cfg(128, 256, 64, 8, 3)),
        ("tma 128x128x64 w8 s4", "tma", cfg(128, 128, 64, 8, 4)),
        ("tma 128x128x64 w4 s4", "tma", cfg(128, 128, 64, 4, 4)),
        ("tma 128x256x64 w8 s3 sub ws", "tma", cfg(128, 256, 64, 8, 3, subtile=True, ws=True, flatten=False)),
        ("tma 128x128x64 w8 s4 ws", "tma", cfg(128, 128, 64, 8, 4, ws=True, flatten=False)),
        ("tma 128x256x64 w8 s3 sub noflat", "tma", cfg(128, 256, 64, 8, 3, subtile=True, flatten=False)),
        ("ptr 128x256x64 w8 s3", "ptr", cfg(128, 256, 64, 8, 3)),
        ("ws gluon ping-pong 128x128x64 s4", "ws", None),
    ]:
        out.append((name, forced(path, c)))
    return out


def bench_matmul(quick: bool) -> None:
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192)]
    llm = [(4096, 4096), (4096, 14336), (14336, 4096), (8192, 8192), (8192, 28672), (28672, 8192)]
    shapes += [(16384, n, k) for k, n in llm]
    if quick:
        shapes = shapes[:1] + shapes[3:4]
    for dtype in (torch.bfloat16,):
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            ref = a.float() @ b.float()
            peer = bench(lambda a=a, b=b: torch.matmul(a, b))
            shape = f"{m}x{n}x{k} {str(dtype)[6:]}"
            flops = 2.0 * m * n * k
            row(
                "matmul",
                shape,
                "torch.matmul (peer)",
                peer,
                f"{flops / peer * 1e-9:.1f} TFLOP/s",
                "1.000",
                "-",
            )
            run_variants("matmul", shape, matmul_variants(a, b), ref, 1e-2, flops, "TFLOP/s", peer)
            del a, b, ref
    # fp16 at one shape, and the pointer path at a ragged shape
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    peer = bench(lambda: torch.matmul(a, b))
    run_variants(
        "matmul",
        "4096^3 fp16",
        matmul_variants(a, b)[:4],
        a.float() @ b.float(),
        5e-3,
        2.0 * 4096**3,
        "TFLOP/s",
        peer,
    )
    a = torch.randn(4095, 4097, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4097, 4093, device="cuda", dtype=torch.bfloat16)
    peer = bench(lambda: torch.matmul(a, b))
    run_variants(
        "matmul",
        "4095x4093x4097 bf16 (ptr)",
        [("auto (ptr path)", lambda: mm_mod.matmul(a, b))],
        a.float() @ b.float(),
        1e-2,
        2.0 * 4095 * 4093 * 4097,
        "TFLOP/s",
        peer,
    )


def small_variants(a: torch.Tensor, b: torch.Tensor) -> list[tuple[str, Callable[[], torch.Tensor]]]:
    """Tiles small enough to give 512^3-2048^3 problems more programs than the autotune list's smallest."""
    cfg = mm_mod._cfg
    out = [("auto (autotuned)", lambda: mm_mod.matmul(a, b))]
    for path in ("tma", "ptr"):
        for bm, bn, bk, w, s in [
            (64, 64, 64, 4, 3),
            (64, 64, 64, 4, 4),
            (64, 64, 128, 4, 3),
            (64, 128, 64, 4, 4),
            (128, 64, 64, 4, 4),
            (128, 128, 64, 4, 4),
            (128, 128, 64, 8, 3),
            (32, 64, 64, 4, 4),
            (64, 32, 64, 4, 4),
            # 1024^3: one tile per SM as cuBLAS's 128x64 (128 programs), deeper K steps, more warps
            (128, 64, 64, 8, 4),
            (128, 64, 128, 8, 3),
            (64, 128, 128, 4, 3),
            (64, 128, 128, 8, 3),
        ]:
            c = cfg(bm, bn, bk, w, s, group_m=4)

            def forced(c=c, p=path):
                return mm_mod._matmul_forward(a, b, path=p, config=c)

            out.append((f"{path} {bm}x{bn}x{bk} w{w} s{s}", forced))
    out.append(("ws gluon ping-pong 128x128x64 s4", lambda: mm_mod._matmul_forward(a, b, path="ws")))
    return out


def bench_small(quick: bool) -> None:
    global GRAPHED
    GRAPHED = True
    sizes = [512, 1024] if quick else [512, 768, 1024, 1536, 2048]
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        ref = a.float() @ b.float()
        peer = bench(lambda a=a, b=b: torch.matmul(a, b))
        shape = f"{n}^3 bf16 graphed"
        flops = 2.0 * n**3
        row("small", shape, "torch.matmul (peer)", peer, f"{flops / peer * 1e-9:.1f} TFLOP/s", "1.000", "-")
        run_variants("small", shape, small_variants(a, b), ref, 1e-2, flops, "TFLOP/s", peer)
    for n in [2048] if quick else [1024, 2048, 4096]:
        _epilogue_shape(n)
    GRAPHED = False


def _epilogue_shape(n: int) -> None:
    """The epilogue against the plain kernel, each config forced on both: the difference is the epilogue's."""
    cfg = mm_mod._cfg
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    plain_ref = a.float() @ b.float()
    refs = {
        "plain": plain_ref,
        "erf": F.gelu(plain_ref + bias.float()),
        "tanh": F.gelu(plain_ref + bias.float(), approximate="tanh"),
    }
    plain = bench(lambda: mm_mod.matmul(a, b))
    shape = f"{n}^3 bf16 epilogue"
    flops = 2.0 * n**3
    row("epilogue", shape, "plain Triton matmul (peer)", plain, f"{flops / plain * 1e-9:.1f} TFLOP/s", "1.000", "-")
    variants = [
        ("erf", "autotuned", lambda: epi_mod.matmul_bias_gelu(a, b, bias)),
        ("tanh", "autotuned", lambda: epi_mod.matmul_bias_gelu(a, b, bias, "tanh")),
    ]
    configs = [
        cfg(128, 256, 64, 8, 3),
        cfg(128, 256, 64, 8, 3, subtile=True),
        cfg(128, 128, 64, 4, 4),
        cfg(128, 128, 64, 8, 4, subtile=True),
        # Warp-specialised: the activation of one tile beside the next tile's loads, not after them.
        cfg(128, 256, 64, 8, 3, subtile=True, ws=True, flatten=False),
        cfg(128, 128, 64, 8, 4, ws=True, flatten=False),
    ]
    for c in configs:
        k = c.kwargs
        name = f"{k['BLOCK_M']}x{k['BLOCK_N']} w{c.num_warps} s{c.num_stages}{' sub' if k['EPI_SUBTILE'] else ''}"
        name += " ws" if k["WARP_SPECIALIZE"] else ""
        variants.append(("plain", name, lambda c=c: mm_mod._matmul_forward(a, b, path="tma", config=c)))
        for label in ("erf", "tanh"):
            act = act_mod.GELU_CODES["none" if label == "erf" else "tanh"]

            def fused(c=c, act=act):
                return epi_mod._forward(a, b, bias, act, False, path="tma", config=c)[0]

            variants.append((label, name, fused))
    # The warp-specialised Gluon kernel: one warpgroup's epilogue beside the other's products.
    variants.append(("plain", "ws gluon ping-pong", lambda: mm_mod._matmul_forward(a, b, path="ws")))
    for label in ("erf", "tanh"):

        def fused_ws(act=act_mod.GELU_CODES["none" if label == "erf" else "tanh"]):
            return epi_mod._forward(a, b, bias, act, False, path="ws")[0]

        variants.append((label, "ws gluon ping-pong", fused_ws))
    for label, name, fn in variants:
        run_variants("epilogue", shape, [(f"{label} {name}", fn)], refs[label], 1e-2, flops, "TFLOP/s", plain)


# ----------------------------------------------------------------------------------------------------------
# norms
# ----------------------------------------------------------------------------------------------------------


def norm_label(c: triton.Config) -> str:
    """A norm candidate in a few words: program kind, L2 policy, warps."""
    k = c.kwargs
    kind = f"two-pass {k['CHUNK']}" if k["CHUNK"] else f"persistent x{k['CTAS']}" if k["CTAS"] else f"rows {k['ROWS']}"
    return kind + (" evict" if k["EVICT"] else "") + f" w{c.num_warps}"


def _norm_shape(rows: int, n: int) -> None:
    dtype = torch.bfloat16
    x = torch.randn(rows, n, device="cuda", dtype=dtype)
    w = torch.randn(n, device="cuda", dtype=dtype)
    bias = torch.randn(n, device="cuda", dtype=dtype)
    xb = torch.randn(n, device="cuda", dtype=dtype)
    nbytes = 2.0 * x.numel() * x.element_size()
    shape = f"{rows}x{n} bf16"
    # Every candidate the autotuner keeps for this width: whole-row, persistent and two-pass programs.
    block_n = triton.next_power_of_2(n)
    forced = norm_mod.prune_norm_configs(norm_mod.norm_configs(), {"n_rows": rows, "N": n}, BLOCK_N=block_n)
    xf, wf, bf, xbf = x.float(), w.float(), bias.float(), xb.float()
    ops = [
        (
            "layer_norm",
            lambda: F.layer_norm(x, (n,), w, bias, 1e-5),
            lambda: F.layer_norm(xf, (n,), wf, bf, 1e-5),
            (w, bias, None, False),
            lambda: norm_mod.layer_norm(x, w, bias),
        ),
        (
            "rms_norm",
            lambda: F.rms_norm(x, (n,), w, 1e-6),
            lambda: F.rms_norm(xf, (n,), wf, 1e-6),
            (w, None, None, True),
            lambda: norm_mod.rms_norm(x, w),
        ),
        (
            "bias_gelu_ln",
            lambda: F.layer_norm(F.gelu(x + xb), (n,), w, bias, 1e-5),
            lambda: F.layer_norm(F.gelu(xf + xbf), (n,), wf, bf, 1e-5),
            (w, bias, xb, False),
            lambda: norm_mod.bias_gelu_layer_norm(x, xb, w, bias),
        ),
    ]
    for name, peer_fn, ref_fn, (ww, bb, gb, is_rms), auto in ops:
        peer = bench(peer_fn)
        row(name, shape, "torch (peer)", peer, f"{nbytes / peer * 1e-6:.0f} GB/s", "1.000", "-")
        eps = 1e-6 if is_rms else 1e-5
        variants = [("auto (autotuned)", auto)]
        if gb is not None:
            variants.append(
                (
                    "auto, libdevice erf",
                    lambda: norm_mod._norm_forward(x, w, bias, xb, 1e-5, False, gelu_impl=0),
                )
            )
        for c in forced:

            def fn(c=c, ww=ww, bb=bb, gb=gb, is_rms=is_rms, eps=eps):
                return norm_mod._norm_forward(x, ww, bb, gb, eps, is_rms, config=c)

            variants.append((norm_label(c), fn))
        run_variants(name, shape, variants, ref_fn(), 1e-2, nbytes, "GB/s", peer)


def bench_norm(quick: bool) -> None:
    shapes = [(16384, 4096), (16384, 8192), (16384, 16384), (4096, 16384), (4096, 65536)]
    for rows, n in [shapes[0], shapes[-1]] if quick else shapes:
        _norm_shape(rows, n)
        torch.cuda.empty_cache()


def whole_row_label(c: triton.Config) -> str:
    """A forced whole-row backward config in a few words."""
    k = c.kwargs
    name = f"split {k['SPLIT']} " if k["SPLIT"] > 1 else "whole-row "
    name += f"w{c.num_warps} x{k['CTAS']}"
    words = {"prefetch": k["PREFETCH"], "cp.async": k["STAGES"] > 1, "reload": k["RELOAD"], "exchange": k["EXCHANGE"]}
    for word, flag in words.items():
        name += f" {word}" if flag else ""
    return name


def norm_backward_variants(n: int, gelu: bool) -> list[tuple[str, triton.Config]]:
    """Whole-row candidates forced one at a time: warps, prefetching into registers or (cp.async) into shared
    memory, and the vectors reloaded every tile (which spares the registers the fused op spills at 8192
    without it); past the whole-row width, the candidates that split each row between programs and two
    two-pass configs (the tuner takes one or the other there by op and width)."""
    wc = nb_mod.whole_row_config
    if n > nb_mod.MAX_WHOLE_ROW_BLOCK:
        forced = nb_mod.prune_whole_row_configs(
            nb_mod.split_row_configs(), {"n_rows": 16384}, BLOCK_N=triton.next_power_of_2(n), HAS_GELU=gelu
        )
        two_pass = [nb_mod.chunk_config(chunk, warps) for chunk, warps in ((2048, 8), (4096, 16))]
        return [(whole_row_label(c), c) for c in forced] + [
            (f"two-pass CHUNK {c.kwargs['CHUNK']} w{c.num_warps}", c) for c in two_pass
        ]
    shapes = [(8, 1), (8, 2), (16, 1)] if n <= 4096 else [(16, 1), (32, 1)]
    forced = [
        wc(rows=1, ctas=ctas, warps=warps, prefetch=prefetch, reload=reload)
        for warps, ctas in shapes
        for prefetch in (False, True)
        for reload in ((False, True) if gelu or n > 4096 else (False,))
    ]
    # The next row by cp.async into shared memory (Triton's pipeliner) instead of into registers.
    forced += nb_mod.prune_whole_row_configs(nb_mod.pipelined_configs(), {"n_rows": 16384}, BLOCK_N=n, HAS_GELU=gelu)
    # Two programs a row exchanging their row sums: half the columns a program, so more programs an SM.
    exchanging = [
        wc(rows=1, ctas=ctas, warps=warps, prefetch=prefetch, reload=True, split=2, exchange=True)
        for warps, ctas in ((8, 1), (8, 2), (16, 1)) for prefetch in (False, True)
    ]  # fmt: skip
    forced += nb_mod.prune_whole_row_configs(exchanging, {"n_rows": 16384}, BLOCK_N=n, HAS_GELU=gelu)
    return [(whole_row_label(c), c) for c in forced]


def _norm_backward_shape(rows: int, n: int) -> None:
    dtype = torch.bfloat16
    x = torch.randn(rows, n, device="cuda", dtype=dtype)
    dy = torch.randn(rows, n, device="cuda", dtype=dtype)
    w, b, xb = (torch.randn(n, device="cuda", dtype=dtype) for _ in range(3))
    # The bytes the backward must move: x and dy read, dx written (the vectors' share is negligible).
    nbytes = 3.0 * x.numel() * x.element_size()
    copy_ms = bench(lambda: torch.empty_like(x).copy_(x))
    copy_rate = 2.0 * x.numel() * x.element_size() / copy_ms
    shape = f"{rows}x{n} bf16"
    row("normbwd", shape, "copy of x (ceiling)", copy_ms, f"{copy_rate * 1e-6:.0f} GB/s", "-", "-")
    ops = [("layer_norm", None, False), ("bias_gelu_ln", xb, False)]
    if n > nb_mod.MAX_WHOLE_ROW_BLOCK:  # where RMSNorm's launch differs from LayerNorm's whole rows
        ops.append(("rms_norm", None, True))
    for name, gb, rms in ops:
        mean = None if rms else torch.empty(rows, device="cuda", dtype=torch.float32)
        rstd = torch.empty(rows, device="cuda", dtype=torch.float32)
        bias = None if rms else b
        norm_mod._norm_forward(x, w, bias, gb, 1e-5, rms, mean=mean, rstd=rstd)
        leaves = [t.float().requires_grad_() for t in (x, w, b)]
        h = leaves[0] if gb is None else F.gelu(leaves[0] + gb.float())
        if rms:
            out = F.rms_norm(h, (n,), leaves[1], 1e-5)
        else:
            out = F.layer_norm(h, (n,), leaves[1], leaves[2], 1e-5)
        ref = torch.autograd.grad(out, leaves[0], dy.float())[0]

        def launch(config=None, gb=gb, mean=mean, rstd=rstd, rms=rms):
            return nb_mod.norm_backward(dy, x, w, gb, mean, rstd, rms, need_dw=True, db_dtype=None if rms else dtype,
                                        need_dxb=gb is not None, gelu_impl=1, config=config)[0]  # fmt: skip

        launch()  # the tuner's turns run on the first call
        log(f"  {name}, the tuner's pick: {common_mod.last_launch('norm-bwd')}")
        auto_ms = bench(launch)
        variants = [("auto (tuned)", None), *norm_backward_variants(n, gb is not None)]
        for label, config in variants:
            try:
                err = rel_err(launch(config), ref)
                ms = auto_ms if config is None else bench(lambda c=config: launch(c))
                bad = "" if err <= 1e-2 else " BAD"
                share = f"{nbytes / ms / copy_rate:.0%} copy"
                row("normbwd", f"{shape} {name}", label, ms, share, f"{auto_ms / ms:.3f}", f"{err:.1e}{bad}")
            except Exception as e:  # one broken variant must not stop the sweep
                log(f"[{time.time() - T0:6.1f}s] normbwd {shape} {name} {label} FAILED: {type(e).__name__}: {e}")


def bench_norm_backward(quick: bool) -> None:
    """LayerNorm and the fused bias+GELU+LayerNorm backward at 16384 rows, 4096, 8192 and 16384 wide (RMSNorm
    too at 16384): the tuned launch against forced whole-row candidates (split rows and two passes at 16384),
    each as a share of a copy's rate on the bytes it must move."""
    for n in (16384,) if quick else (4096, 8192, 16384):
        _norm_backward_shape(16384, n)
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------------------
# attention
# ----------------------------------------------------------------------------------------------------------


def attention_variants(q, k, v, causal) -> list[tuple[str, Callable[[], torch.Tensor]]]:
    cfg = attn_mod._cfg
    out = [("auto (autotuned)", lambda: attn_mod.attention(q, k, v, causal=causal))]
    for bm, bn, w, s, ws in [
        (128, 128, 8, 3, False),
        (128, 128, 8, 3, True),
        (128, 64, 8, 3, False),
        (128, 64, 8, 4, False),
        (64, 64, 4, 2, False),
        (64, 64, 4, 3, False),
        (64, 64, 4, 4, False),
        (64, 64, 4, 3, True),
        (64, 128, 4, 2, False),
        (64, 128, 4, 3, False),
        (64, 128, 4, 4, False),
        (64, 64, 4, 6, False),
    ]:
        c = cfg(bm, bn, w, s, ws)
        name = f"{bm}x{bn} w{w} s{s}" + (" ws" if ws else "")
        out.append((name, lambda c=c: attn_mod._attention_forward(q, k, v, causal, None, config=c)))
    return out


def bench_attention(quick: bool) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    shapes = [(4, 16, 4096, 128), (2, 16, 8192, 128), (4, 16, 4096, 64)]
    if quick:
        shapes = shapes[:1]
    for dtype in (torch.bfloat16, torch.float16):
        for b, h, s, d in shapes:
            if dtype == torch.float16 and s != 4096:
                continue
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
            for causal in (False, True):
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    peer = bench(lambda q=q, k=k, v=v, c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c))
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
                shape = f"{b}x{h}x{s}x{d} {str(dtype)[6:]}{' causal' if causal else ''}"
                row(
                    "attention",
                    shape,
                    "SDPA flash (peer)",
                    peer,
                    f"{flops / peer * 1e-9:.1f} TFLOP/s",
                    "1.000",
                    "-",
                )
                variants = attention_variants(q, k, v, causal)
                if d != 128 or dtype == torch.float16:
                    variants = variants[:4]
                run_variants("attention", shape, variants, ref, 1e-2, flops, "TFLOP/s", peer)
                del ref
            del q, k, v


def _fa4_backward(q, k, v, do, causal) -> Callable[[], object] | None:
    """flash-attn 4's backward alone (its forward run once, the graph kept), or None where not installed."""
    try:
        from flash_attn.cute import flash_attn_func
    except ImportError as e:
        log(f"flash-attn 4 not importable, its backward not timed: {e}")
        return None
    leaves = [t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v)]  # its layout: (B, S, H, D)
    out = flash_attn_func(*leaves, causal=causal)
    out = out[0] if isinstance(out, tuple) else out
    return lambda: torch.autograd.grad(out, leaves, do.transpose(1, 2), retain_graph=True)


def bench_attention_backward(quick: bool) -> None:
    """The attention backward, D128 bf16 at S 4096 and 16384, causal and not: the two-pass kernel (tuned), the
    one pass that adds dQ with atomics (tuned, then each candidate forced), each also with its streamed tiles
    by TMA (`tma=True`; the one pass's dQ then by TMA's bulk reduction), against cuDNN's SDPA backward
    (and flash-attn 4's where installed), each timed alone after one forward. TFLOP/s by the model's FLOPs
    (2.5 forwards); rel err of the worst of dq, dk, dv against an fp32 backward."""
    shapes = [(4, 16, 4096, 128), (1, 16, 16384, 128)]
    for b, h, s, d in shapes[:1] if quick else shapes:
        for causal in (False, True):
            _attention_backward_shape(b, h, s, d, causal)
            torch.cuda.empty_cache()


def _attention_backward_shape(b: int, h: int, s: int, d: int, causal: bool) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    bwd = importlib.import_module("tierbench.kernels.attention_backward")
    q, k, v, do = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d**-0.5
    shape = f"{b}x{h}x{s}x{d} bwd{' causal' if causal else ''}"
    flops = 2.5 * 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    wide = [t.float().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        ref = torch.autograd.grad(F.scaled_dot_product_attention(*wide, is_causal=causal), wide, do.float())
    del wide
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device="cuda")
    o = attn_mod._attention_forward(q, k, v, causal, scale, lse=lse)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
    runs = [("SDPA cuDNN (peer)", lambda: torch.autograd.grad(out, leaves, do, retain_graph=True))]
    fa4 = _fa4_backward(q, k, v, do, causal)
    if fa4 is not None:
        runs.append(("flash-attn 4", fa4))

    def ours(**kw) -> Callable[[], object]:
        return lambda: bwd.attention_backward(do, q, k, v, o, lse, causal, scale, **kw)

    runs += [("two-pass (tuned)", ours(tma=False)), ("one pass (tuned)", ours(atomic_dq=True, tma=False))]
    runs += [("two-pass TMA (tuned)", ours(tma=True)), ("one pass TMA (tuned)", ours(atomic_dq=True, tma=True))]
    for c in bwd.prune_dkdv_dq_configs(bwd.dkdv_dq_configs(), {"SK": s}, HEAD_DIM=d):
        name = f"one pass {c.kwargs['BLOCK_M']}x{c.kwargs['BLOCK_N']} w{c.num_warps} s{c.num_stages}"
        runs.append((name, ours(atomic_dq=True, dkdv_config=c, tma=False)))
        runs.append((f"{name} TMA", ours(atomic_dq=True, dkdv_config=c, tma=True)))
    peer_ms = None
    for name, fn in runs:
        try:
            err = max(rel_err(g, r) for g, r in zip(fn(), ref))
            ms = bench(fn)
            peer_ms = peer_ms or ms
            bad = "" if err <= 2e-2 else " BAD"
            rate = f"{flops / ms * 1e-9:.1f} TFLOP/s"
            row("attnbwd", shape, name, ms, rate, f"{peer_ms / ms:.3f}", f"{err:.1e}{bad}")
        except Exception as e:  # one broken variant must not stop the sweep
            log(f"[{time.time() - T0:6.1f}s] attnbwd {shape} {name} FAILED: {type(e).__name__}: {str(e)[:300]}")


# ----------------------------------------------------------------------------------------------------------
# decode
# ----------------------------------------------------------------------------------------------------------


def decode_variants(q, k, v, table, pk, pv) -> list[tuple[str, Callable[[], torch.Tensor]]]:
    """The split-KV kernel's tile (BLOCK_N keys, warps, pipeline stages) and split count, forced one at a time;
    K/V through pointers and through TMA (the contiguous cache and the paged one); the combine as a
    programmatic dependent launch (PDL)."""
    rows = q.shape[1] // k.shape[1] * q.shape[2]
    base = dec_mod.decode_config(q.shape[-1], rows)
    fwd = dec_mod.split_kv_forward

    out = [
        ("auto", lambda: dec_mod.attention_with_kvcache(q, k, v)),
        ("auto, paged 256", lambda: dec_mod.attention_with_kvcache(q, pk, pv, block_table=table)),
        ("pointers (rule's tile)", lambda: fwd(q, k, v, False, None, tma=False)),
        ("TMA (rule's tile)", lambda: fwd(q, k, v, False, None, tma=True)),
        ("TMA, PDL", lambda: fwd(q, k, v, False, None, tma=True, pdl=True)),
        ("paged 256, TMA", lambda: fwd(q, pk, pv, False, None, block_table=table, tma=True)),
        ("paged 256, TMA, PDL", lambda: fwd(q, pk, pv, False, None, block_table=table, tma=True, pdl=True)),
    ]
    for bn, w, s in [(64, 4, 3), (64, 4, 4), (64, 8, 3), (128, 4, 2), (128, 4, 3), (128, 8, 3), (32, 4, 4)]:
        c = triton.Config({"BLOCK_M": base.kwargs["BLOCK_M"], "BLOCK_N": bn}, num_warps=w, num_stages=s)
        out.append((f"n{bn} w{w} s{s}", lambda c=c: fwd(q, k, v, False, None, config=c, tma=False)))
        out.append((f"n{bn} w{w} s{s}, TMA", lambda c=c: fwd(q, k, v, False, None, config=c, tma=True)))
        paged = lambda c=c: fwd(q, pk, pv, False, None, block_table=table, config=c, tma=True)  # noqa: E731
        out.append((f"n{bn} w{w} s{s}, paged 256, TMA", paged))
    for splits in (1, 8, 16, 66, 128):
        out.append((f"{splits} splits", lambda n=splits: fwd(q, k, v, False, None, num_splits=n)))
    return out


def bench_decode(quick: bool) -> None:
    """Llama-3 8B (32 query heads, 8 K/V heads, head_dim 128), bf16: q_len 1 at the bars' KV lengths, and
    q_len 16 (speculative decoding: 64 query rows a K/V head, where the split rule caps splits by the
    partials' size) at batch 1."""
    global GRAPHED
    GRAPHED = True
    shapes = [(1, 8192, 1), (1, 32768, 1), (64, 8192, 1), (64, 32768, 1), (1, 8192, 16), (1, 32768, 16)]
    for batch, kv_len, q_len in shapes[:1] if quick else shapes:
        _decode_shape(batch, kv_len, q_len)
        torch.cuda.empty_cache()
    GRAPHED = False


def _decode_shape(batch: int, kv_len: int, q_len: int = 1) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    heads, kv_heads, d, page = 32, 8, 128, 256
    q = torch.randn(batch, heads, q_len, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, kv_heads, kv_len, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    # The same cache, paged: its blocks in a shuffled order.
    pages = kv_len // page
    perm = torch.randperm(batch * pages, device="cuda")
    pk, pv = (torch.empty(batch * pages, kv_heads, page, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for src, dst in ((k, pk), (v, pv)):
        dst[perm] = src.reshape(batch, kv_heads, pages, page, d).transpose(1, 2).reshape(-1, kv_heads, page, d)
    table = perm.reshape(batch, pages).to(torch.int32)
    nbytes = 2.0 * k.numel() * k.element_size()
    copy_ms = bench(lambda: torch.empty_like(k).copy_(k))  # reads and writes nbytes in all
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        peer = bench(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    # The float32 reference a few sequences at a time: the whole cache in float32 does not fit beside the
    # bf16 caches at batch 64, KV 32k (80 GB).
    ref = torch.cat(
        [
            F.scaled_dot_product_attention(
                q[i : i + 8].float(), k[i : i + 8].float(), v[i : i + 8].float(), enable_gqa=True
            )
            for i in range(0, batch, 8)
        ]
    )
    shape = f"b{batch} kv{kv_len}" + (f" q{q_len}" if q_len > 1 else "") + " graphed"
    row("decode", shape, "copy of K (ceiling)", copy_ms, f"{nbytes / copy_ms * 1e-6:.0f} GB/s", "-", "-")
    row("decode", shape, "SDPA cuDNN (peer)", peer, f"{copy_ms / peer:.0%} copy", "1.000", "-")
    for name, fn in decode_variants(q, k, v, table, pk, pv):
        time_decode_variant(shape, name, fn, ref, copy_ms, peer)


def time_decode_variant(
    shape: str, name: str, fn: Callable[[], torch.Tensor], ref: torch.Tensor, copy_ms: float, peer_ms: float
) -> float | None:
    """Checks fn against ref, times it and prints its row; its milliseconds if correct, else None."""
    try:
        err = rel_err(fn(), ref)
        ms = bench(fn)
        bad = "" if err <= 1e-2 else " BAD"
        row("decode", shape, name, ms, f"{copy_ms / ms:.0%} copy", f"{peer_ms / ms:.3f}", f"{err:.1e}{bad}")
        return None if bad else ms
    except Exception as e:  # one broken variant must not stop the sweep
        log(f"[{time.time() - T0:6.1f}s] decode {shape} {name} FAILED: {type(e).__name__}: {str(e)[:300]}")
        return None


# The decode grid: tiles (BLOCK_N keys, warps, stages) by split counts (None: the split rule's), at batch 1.
DECODE_GRID_TILES = [(32, 4, 2), (32, 4, 3), (32, 4, 4), (64, 4, 2), (64, 4, 3), (64, 4, 4), (128, 4, 1), (128, 4, 2)]
DECODE_GRID_SPLITS = [None, 8, 16, 24, 33, 48, 66]  # each tile read through pointers and through TMA


def kernel_times(fn: Callable[[], object], reps: int = 30) -> str:
    """The kernels one call of fn launches, each with its mean device time (torch.profiler), largest first."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    times = [
        (e.self_device_time_total / reps, e.key)
        for e in prof.key_averages()
        if e.self_device_time_total > 0 and e.count >= reps
    ]
    return ", ".join(f"{name[:48]} {us:.2f} us" for us, name in sorted(times, reverse=True))


def bench_decode_grid(quick: bool) -> None:
    """Batch 1, q_len 1, Llama-3 8B, KV 8k and 32k (the decode bars' cases): every tile of
    DECODE_GRID_TILES under every split count of DECODE_GRID_SPLITS, under CUDA graphs as the suite times
    them; then the kernels each launch takes on the card (the split kernel against the combine, cuDNN's
    against its reduction), from the profiler."""
    global GRAPHED
    GRAPHED = True
    for kv_len in [8192] if quick else [8192, 32768]:
        _decode_grid_shape(kv_len)
        torch.cuda.empty_cache()
    GRAPHED = False


def _decode_grid_shape(kv_len: int) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    heads, kv_heads, d = 32, 8, 128
    q = torch.randn(1, heads, 1, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, kv_heads, kv_len, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True)
    copy_ms = bench(lambda: torch.empty_like(k).copy_(k))

    def cudnn() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    peer = bench(cudnn)
    shape = f"b1 kv{kv_len} grid"
    row("decode", shape, "copy of K (ceiling)", copy_ms, f"{2.0 * k.nbytes / copy_ms * 1e-6:.0f} GB/s", "-", "-")
    row("decode", shape, "SDPA cuDNN (peer)", peer, f"{copy_ms / peer:.0%} copy", "1.000", "-")
    best: tuple[float, str, Callable[[], torch.Tensor]] | None = None
    grid = [(tile, n, tma) for tma in (False, True) for tile in DECODE_GRID_TILES for n in DECODE_GRID_SPLITS]
    for (bn, w, s), splits, tma in grid:
        c = triton.Config({"BLOCK_M": 16, "BLOCK_N": bn}, num_warps=w, num_stages=s)
        name = f"n{bn} w{w} s{s}, {splits or 'rule'} splits" + (", TMA" if tma else "")

        def fn(c=c, n=splits, tma=tma) -> torch.Tensor:
            return dec_mod.split_kv_forward(q, k, v, False, None, config=c, num_splits=n, tma=tma)

        ms = time_decode_variant(shape, name, fn, ref, copy_ms, peer)
        if ms is not None and (best is None or ms < best[0]):
            best = (ms, name, fn)
    log(f"decode {shape} kernels, cuDNN: {kernel_times(cudnn)}")
    log(f"decode {shape} kernels, auto: {kernel_times(lambda: dec_mod.attention_with_kvcache(q, k, v))}")
    if best is not None:
        log(f"decode {shape} kernels, best ({best[1]}): {kernel_times(best[2])}")


def shape_list(text: str) -> list[tuple[int, int, int]]:
    """argparse type of --fp8-shapes: MxNxK,MxNxK,... of positive integers."""
    shapes = []
    for item in text.split(","):
        dims = item.split("x")
        if len(dims) != 3 or not all(d.isdigit() and int(d) > 0 for d in dims):
            raise argparse.ArgumentTypeError(f"{item!r} is not MxNxK (three positive integers), e.g. 8192x8192x8192")
        shapes.append((int(dims[0]), int(dims[1]), int(dims[2])))
    return shapes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", default="matmul,small,fp8,norm,normbwd,attention,attnbwd,decode")
    p.add_argument("--quick", action="store_true", help="one shape per family")
    p.add_argument(
        "--fp8-shapes",
        type=shape_list,
        help="the fp8 family's shapes instead of its list, e.g. 8192x8192x8192,4096x4096x4096",
    )
    args = p.parse_args()
    fp8_shapes = args.fp8_shapes
    if not torch.cuda.is_available():
        sys.exit("gpu_variants.py needs a CUDA GPU")
    props = torch.cuda.get_device_properties(0)
    log(f"{props.name}, {props.multi_processor_count} SMs")
    log(f"torch {torch.__version__}, triton {triton.__version__}")
    torch.manual_seed(0)
    fams = {
        "matmul": bench_matmul,
        "small": bench_small,
        "fp8": lambda quick: bench_fp8(quick, fp8_shapes),
        "norm": bench_norm,
        "normbwd": bench_norm_backward,
        "attention": bench_attention,
        "attnbwd": bench_attention_backward,
        "decode": bench_decode,
        "decodegrid": bench_decode_grid,
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
    tuners = [
        ("_matmul_tma_tuned", mm_mod._matmul_tma_tuned),
        ("_matmul_ptr_tuned", mm_mod._matmul_ptr_tuned),
        ("_matmul_fp8_tuned", fp8_mod._matmul_fp8_tuned),
        *((f"_norm_tuned[band {i}]", t) for i, t in enumerate(norm_mod._norm_tuned)),
        ("_attn_fwd_tuned", attn_mod._attn_fwd_tuned),
    ]
    for name, tuner in tuners:
        for key, cfg in tuner.cache.items():
            log(f"{name} {key}: {cfg}")


if __name__ == "__main__":
    main()
