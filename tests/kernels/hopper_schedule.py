"""Compile the Gluon attention kernel for sm_90 ahead of time (no GPU) and report its schedule as JSON.

    python tests/kernels/hopper_schedule.py

Run by test_attention_hopper.py in a fresh process: Triton's interpreter, on in the test session, would
replace the language's jit helpers that Gluon compiles. Per build (head_dim, causal): registers, shared
memory, spilled bytes, whether ptxas serialised the wgmma instructions (its C7514 report), and how many
MUFU.EX2 lie between the first wait that leaves a wgmma in flight (WARPGROUP.DEPBAR.LE 1) and the next
full wait (LE 0).
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import make_backend
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import create_function_from_signature

hopper = importlib.import_module("tierbench.kernels._attention_hopper")
SM90 = GPUTarget("cuda", 90, 32)


def compile_build(head_dim: int, causal: bool) -> triton.compiler.CompiledKernel:
    t = torch.empty(2, 2, 1024, head_dim, dtype=torch.bfloat16)
    args, meta = hopper.launch_args(t, t, t, t, causal, 0.1)
    fn = hopper._attn_fwd_hopper
    backend = make_backend(SM90)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, spec, opts = binder(*args, **meta)
    options, signature, constexprs, attrs = fn._pack_args(backend, meta, bound, spec, opts)
    return triton.compile(GluonASTSource(fn, signature, constexprs, attrs), target=SM90, options=options.__dict__)


def schedule(kernel: triton.compiler.CompiledKernel, work: Path) -> dict:
    ptx = work / "kernel.ptx"
    ptx.write_text(kernel.asm["ptx"])
    ptxas = subprocess.run(
        [knobs.nvidia.ptxas.path, "-arch=sm_90a", "-v", str(ptx), "-o", str(work / "ptxas.cubin")],
        capture_output=True,
        text=True,
        check=True,
    )
    log = ptxas.stdout + ptxas.stderr
    spills = re.search(r"(\d+) bytes spill stores", log)
    registers = re.search(r"Used (\d+) registers", log)
    cubin = work / "kernel.cubin"
    cubin.write_bytes(kernel.asm["cubin"])
    sass = subprocess.run(
        [knobs.nvidia.cuobjdump.path, "-sass", str(cubin)], capture_output=True, text=True, check=True
    ).stdout
    in_flight = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x1")
    drained = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x0", in_flight) if in_flight >= 0 else -1
    return {
        "registers": int(registers.group(1)) if registers else None,
        "shared_bytes": kernel.metadata.shared,
        "serialized": "C7514" in log,
        "spill_bytes": int(spills.group(1)) if spills else None,
        "wait_leaves_mma_in_flight": in_flight >= 0,
        "exp2_between_waits": sass.count("MUFU.EX2", in_flight, drained) if drained > in_flight >= 0 else 0,
    }


def main() -> int:
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        knobs.cache.dir = tmp  # a fresh cache: every build is really compiled
        for head_dim in hopper.HEAD_DIMS:
            for causal in (False, True):
                report[f"D{head_dim} causal={causal}"] = schedule(compile_build(head_dim, causal), Path(tmp))
    json.dump(report, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
