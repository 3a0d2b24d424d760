"""Registers, spills and shared memory of the backward kernels' candidates on sm_90 (not collected by pytest).

    python tests/kernels/backward_resources.py [--family norm,attention]

Compiles every candidate the pruning rules keep ahead of time, without a GPU, as resource_report.py does
(its `compile_sm90`), for the shapes of the norm suite (bf16, 16384 rows) and attention at S 4096, and
prints one line per build from ptxas's -v log. Compiler facts, not measurements. A few minutes on two CPU
cores (the Triton cache makes a second run fast, but then ptxas is not run and its figures are blank).
"""

from __future__ import annotations

import argparse
import importlib

import torch
from resource_report import _BF16, compile_sm90
from triton import knobs

nb = importlib.import_module("tierbench.kernels.norm_backward")
ab = importlib.import_module("tierbench.kernels.attention_backward")
_F32 = torch.empty(64)  # only its dtype and alignment reach the binder
_I32 = torch.empty(64, dtype=torch.int32)
ROWS = 16384
OPS = {"layer_norm": (False, False), "rms_norm": (True, False), "bias_gelu_layer_norm": (False, True)}


def line(kernel: str, label: str, c) -> str:
    spill = "?" if c.spill_bytes is None else str(sum(c.spill_bytes))
    return f"{kernel:<10} {label:<58} regs {c.regs or '?':>4} spill {spill:>5} smem {c.smem:>7}"


def norm_rows() -> list[str]:
    rows = []
    for op, (rms, gelu) in OPS.items():
        flags = {"IS_RMS": rms, "HAS_W": True, "HAS_GELU": gelu, "GELU_IMPL": 1, "PRECISE": False, "INLINE_PTX": True}
        need = {"NEED_DW": True, "NEED_DB": not rms, "NEED_DXB": gelu}
        for hidden in (1024, 4096, 8192, 16384, 65536):
            shape = {"BLOCK_N": hidden, "EVEN_N": True}
            # The tuner's candidates and the pipelined ones forced; wider rows: the two passes and the split
            # whole-row candidates (the tuner's split-row list among them).
            if hidden <= nb.MAX_WHOLE_ROW_BLOCK:
                whole_rows = nb.whole_row_configs() + nb.pipelined_configs()
            else:
                whole_rows = nb.split_row_configs()
            args = (*[_BF16] * 5, *[_F32] * 6, _I32, ROWS, hidden, hidden, hidden, hidden)
            for cfg in nb.prune_whole_row_configs(whole_rows, {"n_rows": ROWS}, BLOCK_N=hidden, HAS_GELU=gelu):
                meta = {**flags, **need, **shape, **cfg.all_kwargs()}
                c = compile_sm90(nb._whole_row_bwd_kernel, args, meta, "w")
                label = f"{op} {hidden} rows {cfg.kwargs['ROWS']} ctas {cfg.kwargs['CTAS']} w{cfg.num_warps}"
                label += (" prefetch" if cfg.kwargs["PREFETCH"] else "") + (" reload" if cfg.kwargs["RELOAD"] else "")
                label += f" split {cfg.kwargs['SPLIT']}" if cfg.kwargs["SPLIT"] > 1 else ""
                label += " exchange" if cfg.kwargs["EXCHANGE"] else ""
                label += f" stages {cfg.kwargs['STAGES']}" if cfg.kwargs["STAGES"] > 1 else ""
                rows.append(line("whole-row", label, c))
            if hidden <= nb.MAX_WHOLE_ROW_BLOCK:
                continue
            for cfg in nb.prune_chunk_configs(nb.chunk_configs(), {}, BLOCK_N=hidden):
                label = f"{op} {hidden} chunk {cfg.kwargs['CHUNK']} w{cfg.num_warps}"
                args = (*[_BF16] * 4, *[_F32] * 4, hidden, hidden, hidden)
                c = compile_sm90(nb._row_sums_kernel, args, {**flags, **shape, **cfg.all_kwargs()}, "s")
                rows.append(line("row sums", label, c))
                args = (*[_BF16] * 5, *[_F32] * 7, 2048, hidden, 16, hidden, hidden, hidden)
                c = compile_sm90(nb._chunk_bwd_kernel, args, {**flags, **need, **shape, **cfg.all_kwargs()}, "c")
                rows.append(line("chunks", label, c))
    return rows


ATTENTION_SEQ = 4096


def _attention_shape(head_dim: int) -> tuple[int, tuple[int, int, int]]:
    """Heads (a model width of 2048) and the (B, H, S) strides of contiguous bf16 inputs at ATTENTION_SEQ."""
    heads = 2048 // head_dim
    return heads, (heads * ATTENTION_SEQ * head_dim, ATTENTION_SEQ * head_dim, head_dim)


def compile_dkdv(cfg, head_dim: int, causal: bool, tma: bool, one_pass: bool):
    """The dK/dV kernel (adding dQ too with one_pass) built for sm_90, bf16 at ATTENTION_SEQ."""
    heads, strides = _attention_shape(head_dim)
    seq = ATTENTION_SEQ
    sums = _F32 if one_pass else _BF16
    args = (*[_BF16] * 4, _F32, _F32, _BF16, _BF16, sums, heads, heads, 1, seq, seq, seq, *strides * 6, 0.18, 0.125)
    meta = {"HEAD_DIM": head_dim, "CAUSAL": causal, "UPCAST": False, "TMA": tma, "ATOMIC_DQ": one_pass}
    return compile_sm90(ab._dkdv_kernel, args, {**meta, **cfg.all_kwargs()}, "dkdv")


def compile_dq(cfg, head_dim: int, causal: bool, tma: bool):
    """The dQ kernel built for sm_90, bf16 at ATTENTION_SEQ."""
    heads, strides = _attention_shape(head_dim)
    seq = ATTENTION_SEQ
    args = (*[_BF16] * 4, _F32, _F32, _BF16, heads, 1, seq, seq, *strides * 5, 0.18, 0.125)
    meta = {"HEAD_DIM": head_dim, "CAUSAL": causal, "UPCAST": False, "TMA": tma, "EVEN_N": True}
    return compile_sm90(ab._dq_kernel, args, {**meta, **cfg.all_kwargs()}, "dq")


def attention_rows() -> list[str]:
    rows = []
    seq = ATTENTION_SEQ
    for head_dim in (64, 128, 256):
        for causal in (False, True):
            mask = "causal" if causal else "full"
            for tma in (False, True):
                via = ", TMA" if tma else ""
                for one_pass, prune, configs in (
                    (False, ab.prune_dkdv_configs, ab.dkdv_configs()),
                    (True, ab.prune_dkdv_dq_configs, ab.dkdv_dq_configs()),
                ):
                    for cfg in prune(configs, {"SK": seq}, HEAD_DIM=head_dim):
                        c = compile_dkdv(cfg, head_dim, causal, tma, one_pass)
                        label = f"D{head_dim} {mask} {cfg.kwargs['BLOCK_M']}x{cfg.kwargs['BLOCK_N']} w{cfg.num_warps}"
                        kernel = "dk/dv+dq" if one_pass else "dk/dv"
                        rows.append(line(kernel, f"{label} s{cfg.num_stages}{via}", c))
                for cfg in ab.prune_dq_configs(ab.dq_configs(), {"SQ": seq}, HEAD_DIM=head_dim):
                    c = compile_dq(cfg, head_dim, causal, tma)
                    label = f"D{head_dim} {mask} {cfg.kwargs['BLOCK_M']}x{cfg.kwargs['BLOCK_N']} w{cfg.num_warps}"
                    rows.append(line("dq", f"{label} s{cfg.num_stages}{via}", c))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", default="norm,attention")
    families = p.parse_args().family.split(",")
    knobs.nvidia.dump_ptxas_log = True  # registers and spills come from ptxas -v
    for family, rows in (("norm", norm_rows), ("attention", attention_rows)):
        if family in families:
            for row in rows():
                print(row, flush=True)


if __name__ == "__main__":
    main()
