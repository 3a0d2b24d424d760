"""Compile the Gluon attention kernel for sm_90 ahead of time (no GPU) and report its schedule as JSON.

    python tests/kernels/hopper_schedule.py

Run by test_attention_hopper.py in a fresh process: Triton's interpreter, on in the test session, would
replace the language's jit helpers that Gluon compiles. Per build (head_dim, causal): registers, shared
memory, spilled bytes, whether ptxas serialised the wgmma instructions (its C7514 report), and how many
MUFU.EX2 lie between the first wait that leaves a wgmma in flight (WARPGROUP.DEPBAR.LE 1) and the next
full wait (LE 0). Compiles and disassembles the way resource_report.py does.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile

import resource_report as rr
import torch
from triton import knobs
from triton.experimental.gluon._runtime import GluonASTSource

hopper = importlib.import_module("tierbench.kernels._attention_hopper")


def schedule(head_dim: int, causal: bool, disassembler: list[str]) -> dict:
    t = torch.empty(2, 2, 1024, head_dim, dtype=torch.bfloat16)
    args, meta = hopper.launch_args(t, t, t, t, causal, 0.1)
    name = f"attn_hopper_D{head_dim}_{'causal' if causal else 'full'}"
    kernel = rr.compile_sm90(hopper._attn_fwd_hopper, args, meta, name, source=GluonASTSource)
    sass, _ = rr.disassemble(disassembler, kernel.cubin)
    in_flight = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x1")
    drained = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x0", in_flight) if in_flight >= 0 else -1
    return {
        "registers": kernel.regs,
        "shared_bytes": kernel.smem,
        "serialized": "C7514" in kernel.ptxas_log,
        "spill_bytes": sum(kernel.spill_bytes) if kernel.spill_bytes else None,
        "wait_leaves_mma_in_flight": in_flight >= 0,
        "exp2_between_waits": sass.count("MUFU.EX2", in_flight, drained) if drained > in_flight >= 0 else 0,
    }


def main() -> int:
    disassembler, why = rr.find_disassembler()
    if disassembler is None:
        print(f"no disassembler: {why}", file=sys.stderr)
        return 1
    report = {}
    with tempfile.TemporaryDirectory() as cache:
        # A private, always-missed cache: every build goes through ptxas, whose -v log is read.
        knobs.cache.dir = cache
        knobs.compilation.always_compile = True
        knobs.nvidia.dump_ptxas_log = True
        for head_dim in hopper.HEAD_DIMS:
            for causal in (False, True):
                report[f"D{head_dim} causal={causal}"] = schedule(head_dim, causal, disassembler)
    json.dump(report, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
