"""Whether the forward kernels still compile to the PTX of a git revision, for sm_90 (not collected by pytest).

    python tests/kernels/forward_ptx_check.py [REV]        (default: main)

The backward added flags to the forward kernels (STORE_STATS on `_norm_kernel`, STORE_LSE on
`_attn_fwd_kernel`), off unless a backward needs them. This compiles both kernels of REV's kernels/ and
of the working tree, ahead of time and without a GPU (as resource_report.py does), with those flags left
at their defaults, for a few configs of each, and compares the PTX without its debug lines. Prints one line
per build; exits 1 if any differs. About half a minute on two CPU cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from resource_report import _BACKEND, _BF16, TARGET, ASTSource, create_function_from_signature, triton

REPO = Path(__file__).resolve().parents[2]


def load_kernels(directory: Path, package: str) -> dict[str, types.ModuleType]:
    """kernels/norm.py and kernels/attention.py of `directory`, imported as modules of `package`."""
    pkg = types.ModuleType(package)
    pkg.__path__ = [str(directory)]
    sys.modules[package] = pkg
    modules = {}
    for name in ("norm", "attention"):
        spec = importlib.util.spec_from_file_location(f"{package}.{name}", directory / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


def ptx(fn: triton.JITFunction, args: tuple, kwargs: dict) -> str:
    binder = create_function_from_signature(fn.signature, fn.params, _BACKEND)
    bound, spec, opts = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(_BACKEND, kwargs, bound, spec, opts)
    kernel = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=TARGET, options=options.__dict__)
    lines = [line for line in kernel.asm["ptx"].splitlines() if not line.strip().startswith((".loc", ".file", "//"))]
    end = next((i for i, line in enumerate(lines) if ".section" in line and ".debug" in line), len(lines))
    return "\n".join(lines[:end])  # the DWARF sections that follow name the source files


def builds(norm: types.ModuleType, attn: types.ModuleType):
    """(label, kernel, args, kwargs) of the forward builds compared."""
    for cfg in (norm.norm_config(rows=1, ctas=2, evict=1, warps=16), norm.norm_config(chunk=2048, evict=1, warps=16),
                norm.norm_config(rows=2, warps=4)):  # fmt: skip
        hidden = 16384 if cfg.kwargs["CHUNK"] or cfg.kwargs["CTAS"] else 1000
        block_n = triton.next_power_of_2(hidden)
        for op, rms, gelu in (("layer_norm", False, False), ("rms_norm", True, False), ("fused", False, True)):
            flags = {"IS_RMS": rms, "HAS_W": True, "HAS_B": not rms, "HAS_GELU": gelu, "GELU_IMPL": 1,
                     "PRECISE": False, "INLINE_PTX": True, "BLOCK_N": block_n, "EVEN_N": hidden == block_n,
                     "CONTIGUOUS": True}  # fmt: skip
            args = (_BF16, _BF16, _BF16, _BF16, _BF16, 16384, hidden, hidden, hidden, 1e-5)
            yield f"norm {op} {hidden} {cfg.kwargs}", "_norm_kernel", args, {**flags, **cfg.all_kwargs()}
    seq = 4096
    for head_dim in (64, 128):
        heads = 2048 // head_dim
        strides = (heads * seq * head_dim, seq * head_dim, head_dim)
        for causal in (False, True):
            cfg = attn._cfg(64, 64, 4, 3)
            consts = {"HEAD_DIM": head_dim, "CAUSAL": causal, "UPCAST": False, "EVEN_N": True, "PACKED": False}
            args = (_BF16, _BF16, _BF16, _BF16, heads, seq, seq, *strides * 4, 0.125 * 1.4427)
            label = f"attention D{head_dim} causal={causal} {cfg.kwargs}"
            yield label, "_attn_fwd_kernel", args, {**consts, **cfg.all_kwargs()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", nargs="?", default="main")
    rev = p.parse_args().rev
    with tempfile.TemporaryDirectory() as tmp:
        old_dir = Path(tmp)
        files = subprocess.run(["git", "-C", REPO, "ls-tree", "--name-only", rev, "kernels/"], check=True,
                               capture_output=True, text=True).stdout.split()  # fmt: skip
        for f in files:
            text = subprocess.run(["git", "-C", REPO, "show", f"{rev}:{f}"], check=True, capture_output=True).stdout
            (old_dir / Path(f).name).write_bytes(text)
        old = load_kernels(old_dir, "kernels_at_rev")
        new = load_kernels(REPO / "kernels", "kernels_here")
        differ = 0
        for label, name, args, kwargs in builds(new["norm"], new["attention"]):
            module = "norm" if name == "_norm_kernel" else "attention"
            same = ptx(getattr(old[module], name), args, kwargs) == ptx(getattr(new[module], name), args, kwargs)
            differ += not same
            print(f"{label:70s} {'same PTX' if same else 'PTX DIFFERS'}", flush=True)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
