"""Compile the matmul family's GPU builds ahead of time for sm_90 (no GPU) and report registers and spills as JSON.

    python tests/kernels/matmul_builds.py

Run by test_epilogue.py in a fresh process (the interpreter, on in the test session, compiles nothing, and
never runs the inline PTX of the activations). The builds: the persistent TMA kernel plain and with each
bias + activation epilogue (whole and half-width stores, the pre-activation stored as under autograd), the
pointer kernel's small tile with the tanh epilogue, the activation's backward kernel, the FP8 kernel
with precise accumulation (every tile it keeps) and fast, and the warp-specialised Gluon kernel (plain, with the
tanh epilogue, and keeping the pre-activation of the exact one over transposed operands) with its schedule,
and the Gluon FP8 kernel (precise accumulation with row and column scales, and fast) with its schedule.
"""

from __future__ import annotations

import importlib
import json
import sys

import resource_report as rr
import torch
from triton.experimental.gluon._runtime import GluonASTSource

mm = importlib.import_module("tierbench.kernels.matmul")
ws = importlib.import_module("tierbench.kernels._matmul_hopper_ws")
f8g = importlib.import_module("tierbench.kernels._matmul_fp8_hopper")
epi = importlib.import_module("tierbench.kernels.epilogue")
f8 = importlib.import_module("tierbench.kernels.matmul_fp8")
act = importlib.import_module("tierbench.kernels._activations")

M = N = K = 4096
_BF16, _FP8, _F32 = rr._BF16, rr._FP8, rr._F32
_OFF = {"A_COL_MAJOR": False, "B_COL_MAJOR": False, "HAS_BIAS": False, "ACTIVATION": act.NONE, "STORE_PRE": False}


def _result(compiled: rr.Compiled, config: object) -> dict:
    return {"registers": compiled.regs, "spill_bytes": sum(compiled.spill_bytes or (0,)), "config": str(config)}


def tma_build(config, activation: int, store_pre: bool) -> dict:
    flags = {**_OFF, "NUM_SMS": rr.SMS, "UPCAST": False, "INPUT_PRECISION": "ieee"}
    if activation != act.NONE:
        flags.update(HAS_BIAS=True, ACTIVATION=activation, STORE_PRE=store_pre)
    args = (_BF16, _BF16, _BF16, _BF16 if store_pre else None, _BF16 if flags["HAS_BIAS"] else None, M, N, K, K, N, N)
    compiled = rr.compile_sm90(mm._matmul_tma_kernel, args, {**flags, **config.all_kwargs()}, "matmul_tma")
    return _result(compiled, config)


def ptr_build(config, activation: int) -> dict:
    flags = {"HAS_BIAS": True, "ACTIVATION": activation, "STORE_PRE": False, "UPCAST": False, "INPUT_PRECISION": "ieee"}
    args = (_BF16, _BF16, _BF16, None, _BF16, M, N, K, K, 1, N, 1, N, 1)
    compiled = rr.compile_sm90(mm._matmul_ptr_kernel, args, {**flags, **config.all_kwargs()}, "matmul_ptr")
    return _result(compiled, config)


def gelu_backward_build(activation: int) -> dict:
    cfg = epi._BWD_CONFIG
    args = (_BF16, _BF16, _BF16, _F32, M, N, 256, N, 1, N)
    meta = {"ACTIVATION": activation, "HAS_DBIAS": True, "num_warps": cfg.num_warps, **cfg.kwargs}
    return _result(rr.compile_sm90(epi._gelu_backward_kernel, args, meta, "gelu_backward"), cfg)


def fp8_build(config, fast: bool) -> dict:
    flags = {"NUM_SMS": rr.SMS, "ROW_SCALES": True, "COL_SCALES": True, "FAST_ACCUM": fast, "UPCAST": False}
    args = (_FP8, _FP8, _BF16, _F32, _F32, M, N, K, K, K, N, 1, 1)
    compiled = rr.compile_sm90(f8._matmul_fp8_kernel, args, {**flags, **config.all_kwargs()}, "matmul_fp8")
    return _result(compiled, config)


def ws_build(activation: int, keep_z: bool = False, transposed: bool = False) -> dict:
    """The warp-specialised Gluon kernel: registers and spills, the setmaxnreg split its partitions ask for,
    whether ptxas serialised its wgmma (C7514), and how many waits leave one wgmma in flight (one per MMA
    warpgroup's K loop)."""
    a = torch.empty(K, M, dtype=torch.bfloat16).T if transposed else torch.empty(M, K, dtype=torch.bfloat16)
    b = torch.empty(N, K, dtype=torch.bfloat16).T if transposed else torch.empty(K, N, dtype=torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    bias = torch.empty(N, dtype=torch.bfloat16) if activation != act.NONE else None
    args, meta = ws.launch_args(a, b, c, c if keep_z else None, bias, activation, transposed, transposed)
    compiled = rr.compile_sm90(ws._matmul_hopper_ws, args, meta, "matmul_ws", source=GluonASTSource)
    sass, _ = rr.disassemble(rr.find_disassembler()[0], compiled.cubin)
    return {
        **_result(compiled, ws.launch_config()),
        "serialized": "C7514" in compiled.ptxas_log,
        "partition_registers": rr.partition_registers(sass),
        "one_in_flight_waits": sass.count("WARPGROUP.DEPBAR.LE gsb0, 0x1"),
    }


def fp8_gluon_build(fast: bool) -> dict:
    """The Gluon FP8 kernel (per-row and per-column scales, bf16 output): registers and spills, whether ptxas
    serialised its wgmma (C7514) or injected waits (C7517), and its K loop's waits: precise accumulation
    leaves one group in flight at three of a trip's four (`WARPGROUP.DEPBAR.LE gsb0, 0x1`), fast at its one."""
    a = torch.empty(M, K, dtype=torch.float8_e4m3fn)
    b = torch.empty(N, K, dtype=torch.float8_e4m3fn).T
    c = torch.empty(M, N, dtype=torch.bfloat16)
    args, meta = f8g.launch_args(a, b, c, torch.empty(M, 1), torch.empty(1, N), fast)
    compiled = rr.compile_sm90(f8g._matmul_fp8_hopper, args, meta, "matmul_fp8_gluon", source=GluonASTSource)
    _, instrs = rr.disassemble(rr.find_disassembler()[0], compiled.cubin)
    loop = max((lp for lp in rr.inner_loops(instrs) if any("GMMA" in i for _, i in lp)), key=len)
    waits = [i.split()[-1] for _, i in loop if "WARPGROUP.DEPBAR" in i]
    return {
        **_result(compiled, f8g.launch_config()),
        "serialized": "C7514" in compiled.ptxas_log or "C7517" in compiled.ptxas_log,
        "loop_waits": waits,
        "loop_mmas": sum("GMMA" in i for _, i in loop),
    }


def main() -> int:
    tma = mm.matmul_tma_configs()
    whole, half = tma[0], tma[1]  # 128x256x64, 8 warps, 3 stages: whole and half-width epilogue stores
    small = next(c for c in mm.matmul_ptr_configs() if c.kwargs["BLOCK_M"] == 64 and c.kwargs["BLOCK_K"] == 128)
    fp8 = f8.matmul_fp8_configs()
    precise = [c for c in fp8 if c.kwargs["BLOCK_N"] <= 128]  # the tiles precise accumulation keeps
    fast = fp8[1]  # 128x256x128 with half-width stores
    report = {}
    with rr.every_build_through_ptxas():
        report["tma plain"] = tma_build(whole, act.NONE, False)
        report["tma bias+gelu, z stored, half-width stores"] = tma_build(half, act.GELU, True)
        report["tma bias+gelu-tanh"] = tma_build(whole, act.GELU_TANH, False)
        report["tma bias+gelu-tanh, half-width stores"] = tma_build(half, act.GELU_TANH, False)
        report["ptr bias+gelu-tanh, small tile"] = ptr_build(small, act.GELU_TANH)
        report["gelu backward"] = gelu_backward_build(act.GELU)
        report["gelu-tanh backward"] = gelu_backward_build(act.GELU_TANH)
        for c in precise:
            kw = c.kwargs
            name = f"fp8 precise {kw['BLOCK_M']}x{kw['BLOCK_N']} w{c.num_warps} s{c.num_stages} x{kw['PER_SM']}"
            report[name] = fp8_build(c, False)
        # The split products (a gpu_variants candidate, not yet timed; with 4 stages it spills 40 bytes).
        split = f8.fp8_cfg(128, 256, 128, 8, 3, split_n=True)
        report["fp8 precise 128x256 w8 s3 split"] = fp8_build(split, False)
        report["fp8 fast"] = fp8_build(fast, True)
        report["ws plain"] = ws_build(act.NONE)
        report["ws bias+gelu-tanh"] = ws_build(act.GELU_TANH)
        report["ws bias+gelu keep-z, both operands transposed"] = ws_build(act.GELU, keep_z=True, transposed=True)
        report["fp8 gluon precise"] = fp8_gluon_build(False)
        report["fp8 gluon fast"] = fp8_gluon_build(True)
    json.dump(report, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
