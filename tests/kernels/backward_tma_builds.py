"""Compile the attention backward's TMA builds ahead of time for sm_90 (no GPU) and report, as JSON, the
instructions that move their tiles.

    python tests/kernels/backward_tma_builds.py

Run by test_attention_backward.py in a fresh process (the interpreter, on in the test session, compiles
nothing and has no TMA reduction of its own). The builds are the tiles the tuners took on an H100 at head_dim
128, S 4096, causal: the dK/dV program with and without the one pass's dQ, and the dQ program, each with TMA
and without.
"""

from __future__ import annotations

import importlib
import json
import sys

import resource_report as rr
from backward_resources import compile_dkdv, compile_dq

ab = importlib.import_module("tierbench.kernels.attention_backward")
MOVES = ("UTMALDG", "UTMAREDG", "LDGSTS", "LDG", "REDG", "STL", "LDL")


def build(kernel: str, tma: bool) -> dict:
    if kernel == "dq":
        cfg = ab.bwd_config(128, 32, 8, 3)
        compiled = compile_dq(cfg, 128, True, tma)
    else:
        cfg = ab.bwd_config(32, 128, 8, 3)
        compiled = compile_dkdv(cfg, 128, True, tma, one_pass=kernel == "dkdv+dq")
    cmd, why = rr.find_disassembler()
    if cmd is None:
        raise SystemExit(f"no disassembler: {why}")
    _, instrs = rr.disassemble(cmd, compiled.cubin)
    counts = rr.op_counts(instrs)
    return {
        "config": str(cfg),
        "registers": compiled.regs,
        "spill_bytes": sum(compiled.spill_bytes or (0,)),
        **{op: rr.count(counts, op + ".") + counts[op] for op in MOVES},
    }


def main() -> int:
    report = {}
    with rr.every_build_through_ptxas():
        for kernel in ("dkdv", "dkdv+dq", "dq"):
            for tma in (False, True):
                report[f"{kernel}{' tma' if tma else ''}"] = build(kernel, tma)
    json.dump(report, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
