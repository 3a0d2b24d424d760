"""Compile the norm backward's split-row builds whose programs exchange row sums, ahead of time for sm_90 (no
GPU), and report, as JSON, their registers, spills and the memory-model instructions of the exchange.

    python tests/kernels/norm_exchange_builds.py

Run by test_norm_backward.py in a fresh process (the interpreter, on in the test session, compiles nothing
and cannot run programs that wait on each other). The builds: LayerNorm and RMSNorm at 16384 wide, two
programs a row, every forced exchange candidate, bf16.
"""

from __future__ import annotations

import importlib
import json
import re

import torch
from backward_resources import OPS, ROWS
from resource_report import _BF16, _F32, compile_sm90, every_build_through_ptxas

nb = importlib.import_module("tierbench.kernels.norm_backward")
_I32 = torch.empty(64, dtype=torch.int32)
HIDDEN = 16384


def label(op: str, cfg) -> str:
    k = cfg.kwargs
    words = [op, f"w{cfg.num_warps}", f"x{k['CTAS']}"]
    words += [w for flag, w in ((k["PREFETCH"], "prefetch"), (k["RELOAD"], "reload")) if flag]
    return " ".join(words)


def main() -> None:
    builds = {}
    exchanging = [c for c in nb.split_row_configs() if c.kwargs["EXCHANGE"]]
    with every_build_through_ptxas():
        for op in ("layer_norm", "rms_norm"):
            rms, gelu = OPS[op]
            flags = {"IS_RMS": rms, "HAS_W": True, "HAS_GELU": gelu, "GELU_IMPL": 1, "PRECISE": False}
            meta = {**flags, "INLINE_PTX": True, "NEED_DW": True, "NEED_DB": not rms, "NEED_DXB": False}
            meta |= {"BLOCK_N": HIDDEN, "EVEN_N": True}
            args = (*[_BF16] * 5, *[_F32] * 6, _I32, ROWS, HIDDEN, HIDDEN, HIDDEN, HIDDEN)
            for cfg in nb.prune_whole_row_configs(exchanging, {"n_rows": ROWS}, BLOCK_N=HIDDEN, HAS_GELU=gelu):
                c = compile_sm90(nb._whole_row_bwd_kernel, args, {**meta, **cfg.all_kwargs()}, "exchange")
                builds[label(op, cfg)] = {
                    "registers": c.regs,
                    "spill_bytes": None if c.spill_bytes is None else sum(c.spill_bytes),
                    "release": len(re.findall(r"atom\.global\.gpu\.release", c.ptx)),
                    "acquire": len(re.findall(r"(?:ld|atom)\.global\.gpu\.acquire", c.ptx)),
                    "volatile_loads": len(re.findall(r"ld\.volatile\.global", c.ptx)),
                }
    print(json.dumps(builds, indent=1))


if __name__ == "__main__":
    main()
