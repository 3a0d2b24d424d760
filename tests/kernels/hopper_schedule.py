"""Compile the Gluon attention kernels ahead of time for sm_90 (no GPU) and report their schedules as JSON.

    python tests/kernels/hopper_schedule.py

Run by test_attention_hopper.py in a fresh process: Triton's interpreter, on in the test session, would
replace the language's jit helpers that Gluon compiles. Per build (kernel, head_dim, causal, and per kernel one
causal build with grouped query heads and fewer queries than keys): registers,
shared memory, spilled bytes, whether ptxas serialised the wgmma instructions (its C7514 report), the
register counts the warp-specialised kernel's partitions ask for (USETMAXREG), and, for every wait that
leaves a wgmma in flight (WARPGROUP.DEPBAR.LE 1), how many MUFU.EX2 lie between it and the next full wait
(LE 0): one per softmax warpgroup; and how many warpgroup-wide barriers each softmax loop trip passes.
Compiles and disassembles the way resource_report.py does.
"""

from __future__ import annotations

import importlib
import json
import re
import sys

import resource_report as rr
import torch
from triton.experimental.gluon._runtime import GluonASTSource

at = importlib.import_module("tierbench.kernels.attention")
JIT_FUNCTIONS = {"gluon": "_attn_fwd_hopper", "gluon-ws": "_attn_fwd_hopper_ws"}


def exp2_between_waits(sass: str) -> list[int]:
    """MUFU.EX2 count from each wait that leaves a wgmma in flight to the next full wait."""
    counts, start = [], sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x1")
    while start >= 0:
        end = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x0", start)
        counts.append(sass.count("MUFU.EX2", start, end if end >= 0 else len(sass)))
        start = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x1", start + 1)
    return counts


def loop_barriers(instrs: list[tuple[int, str]]) -> list[int]:
    """Warpgroup-wide barriers (`bar.sync` of 128 threads) per trip of each softmax loop: for each wait that
    leaves a wgmma in flight, the innermost backward branch around it."""
    loops = []
    for addr, ins in instrs:
        target = re.search(r"BRA (0x[0-9a-f]+)", ins)
        if target and int(target.group(1), 16) < addr:
            loops.append((int(target.group(1), 16), addr))
    counts = []
    for wait_at, ins in instrs:
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in ins:
            continue
        around = [(lo, hi) for lo, hi in loops if lo <= wait_at <= hi]
        if around:
            lo, hi = min(around, key=lambda span: span[1] - span[0])
            body = [i for a, i in instrs if lo <= a <= hi]
            counts.append(sum(bool(re.match(r"BAR\.SYNC\S* 0x[0-9a-f]+, 0x80$", i)) for i in body))
    return counts


def schedule(kernel: str, head_dim: int, causal: bool, disassembler: list[str], grouped: bool = False) -> dict:
    """One build's report. `grouped`: 8 query heads over 2 K/V heads, 512 queries over 1024 keys (a query-head
    group and a causal offset that launches with 1 and equal lengths compile away)."""
    module = at.HOPPER_KERNELS[kernel]
    t = torch.empty(2, 2, 1024, head_dim, dtype=torch.bfloat16)
    q = torch.empty(2, 8, 512, head_dim, dtype=torch.bfloat16) if grouped else t
    args, meta = module.launch_args(q, t, t, q, causal, 0.1)
    name = f"attn_{kernel}_D{head_dim}_{'causal' if causal else 'full'}{'_gqa' if grouped else ''}"
    compiled = rr.compile_sm90(getattr(module, JIT_FUNCTIONS[kernel]), args, meta, name, source=GluonASTSource)
    sass, instrs = rr.disassemble(disassembler, compiled.cubin)
    return {
        "registers": compiled.regs,
        "shared_bytes": compiled.smem,
        "serialized": "C7514" in compiled.ptxas_log,
        "spill_bytes": sum(compiled.spill_bytes) if compiled.spill_bytes else None,
        "partition_registers": rr.partition_registers(sass),
        "exp2_between_waits": exp2_between_waits(sass),
        "loop_barriers": loop_barriers(instrs),
    }


def main() -> int:
    disassembler, why = rr.find_disassembler()
    if disassembler is None:
        print(f"no disassembler: {why}", file=sys.stderr)
        return 1
    report = {}
    with rr.every_build_through_ptxas():
        for kernel, module in at.HOPPER_KERNELS.items():
            for head_dim in module.HEAD_DIMS:
                for causal in (False, True):
                    report[f"{kernel} D{head_dim} causal={causal}"] = schedule(kernel, head_dim, causal, disassembler)
            report[f"{kernel} D128 causal=True grouped"] = schedule(kernel, 128, True, disassembler, grouped=True)
    json.dump(report, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
