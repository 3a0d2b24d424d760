"""Compile the split-KV decode kernels ahead of time for sm_90 (no GPU) and report registers and spills as JSON.

    python tests/kernels/decode_builds.py

Run by test_decode.py in a fresh process (the interpreter, on in the test session, compiles nothing). The
builds are the tiles `decode_config` gives at each head_dim for the smallest and the largest query group,
across the cache kinds (contiguous, paged with blocks smaller than a tile, paged with whole tiles per block),
caches read through TMA descriptors (contiguous, and paged with whole tiles per block; with the tile
`decode_config` gives them), and the combine kernel; one split kernel and one combine as programmatic
dependent launches (PDL: their griddepcontrol instructions must build).
"""

from __future__ import annotations

import importlib
import json
import sys

import resource_report as rr
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

dec = importlib.import_module("tierbench.kernels.decode")

# (head_dim, query rows per group, block_size (0: contiguous), causal, split)
BUILDS = [
    (64, 1, 0, False, False),
    (64, 64, 16, True, True),
    (128, 4, 256, True, True),
    (128, 64, 0, True, True),
    (256, 1, 16, False, True),
    (256, 64, 0, True, True),
]

# (head_dim, query rows per group, block_size (0: contiguous), causal): caches read through TMA descriptors, split.
TMA_BUILDS = [(64, 1, 0, False), (128, 4, 0, False), (128, 4, 256, False), (128, 64, 0, True), (256, 64, 0, True)]


def split_kv_build(
    head_dim: int, rows: int, page: int, causal: bool, split: bool, tma: bool = False, pdl: bool = False
) -> dict:
    cfg = dec.decode_config(head_dim, rows, tma=tma)
    q = torch.empty(1, rows, 1, head_dim, dtype=torch.bfloat16)  # one K/V head's group of `rows` heads
    k = torch.empty(64, 1, page or 4096, head_dim, dtype=torch.bfloat16)
    kv = TensorDescriptor.from_tensor(k.view(-1, head_dim), [cfg.kwargs["BLOCK_N"], head_dim]) if tma else k
    out = torch.empty(rows, 8, head_dim, dtype=torch.float32) if split else q
    lse = torch.empty(rows, 8, dtype=torch.float32)
    lens, table = torch.empty(1, dtype=torch.int32), torch.empty(1, 64, dtype=torch.int32)
    out_strides = (0, 0, 0, 0) if split else out.stride()
    args = (q, kv, kv, out, lse, lens, table, 1, rows, 1, 4096, 64, 8 if split else 1, *q.stride(), *k.stride(),
            *k.stride(), *out_strides, 1, 64, 1, 0.1)  # fmt: skip
    meta = dict(
        HEAD_DIM=head_dim, **cfg.kwargs, PAGE_SIZE=page, HAS_SEQLENS=True, CAUSAL=causal, SPLIT=split,
        UPCAST=False, TMA=tma, PDL=pdl, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    name = f"split_kv_D{head_dim}_r{rows}_p{page}" + ("_tma" if tma else "") + ("_pdl" if pdl else "")
    compiled = rr.compile_sm90(dec._split_kv_kernel, args, meta, name)
    return {"registers": compiled.regs, "spill_bytes": sum(compiled.spill_bytes or (0,)), "config": str(cfg),
            "griddepcontrol": compiled.ptx.count("griddepcontrol.")}  # fmt: skip


def combine_build(head_dim: int, splits: int, pdl: bool = False) -> dict:
    part = torch.empty(32, splits, head_dim, dtype=torch.float32)
    lse = torch.empty(32, splits, dtype=torch.float32)
    o = torch.empty(1, 8, 4, head_dim, dtype=torch.bfloat16)
    block_s = dec.next_pow2(splits)
    meta = dict(HEAD_DIM=head_dim, BLOCK_S=block_s, BLOCK_D=dec.combine_slice(head_dim), PDL=pdl, num_warps=4)
    name = "combine" + ("_pdl" if pdl else "")
    compiled = rr.compile_sm90(dec._combine_kernel, (part, lse, o, 8, 4, splits, *o.stride()), meta, name)
    return {"registers": compiled.regs, "spill_bytes": sum(compiled.spill_bytes or (0,)),
            "griddepcontrol": compiled.ptx.count("griddepcontrol.")}  # fmt: skip


def main() -> int:
    report = {}
    with rr.every_build_through_ptxas():
        for build in BUILDS:
            d, rows, page, causal, split = build
            report[f"split-kv D{d} rows={rows} block_size={page} causal={causal} split={split}"] = split_kv_build(
                *build
            )
        for d, rows, page, causal in TMA_BUILDS:
            report[f"split-kv D{d} rows={rows} block_size={page} TMA causal={causal}"] = split_kv_build(
                d, rows, page, causal, True, tma=True
            )
        report[f"combine D256 splits={dec.MAX_SPLITS}"] = combine_build(256, dec.MAX_SPLITS)
        report["combine D128 splits=64"] = combine_build(128, 64)
        report["split-kv D128 rows=4 TMA PDL"] = split_kv_build(128, 4, 0, False, True, tma=True, pdl=True)
        report["combine D128 splits=64 PDL"] = combine_build(128, 64, pdl=True)
    json.dump(report, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
