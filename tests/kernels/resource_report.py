"""Static resource report of the Triton kernels for an H200 (sm_90), compiled ahead of time; no GPU needed.

    python tests/kernels/resource_report.py [--sass-dir DIR]

Each kernel is compiled by `triton.compile` for GPUTarget("cuda", 90, 32) with the specialisation the JIT
would give a real launch (16-byte aligned pointers, sizes and strides divisible by 16), through the same
signature binder the launcher uses. ptxas's `-v` log gives registers and spills, Triton's metadata the
shared memory, and the SASS (cuobjdump, else nvdisasm) the instruction mix. These are compiler facts for
sm_90, not measurements; the "bound" columns are a throughput model (constants below), not timings.

Not collected by pytest (no test_ prefix). Runs in about a minute on two CPU cores.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import io
import math
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from triton.runtime.jit import create_function_from_signature

norm = importlib.import_module("tierbench.kernels.norm")
attn = importlib.import_module("tierbench.kernels.attention")
mm = importlib.import_module("tierbench.kernels.matmul")
f8 = importlib.import_module("tierbench.kernels.matmul_fp8")

TARGET = GPUTarget("cuda", 90, 32)

# H200 (sm_90) figures used by the model; the clock (--clock-ghz) defaults to the one sustained under the
# power cap.
SMS = 132
CLOCK_HZ = 1.75e9
ISSUE_PER_CLK = 128  # thread-instructions per clock per SM: 4 schedulers x 1 warp-instruction
FP32_PER_CLK = 128  # FFMA / FMUL / FADD lanes per SM
MUFU_PER_CLK = 16  # ex2 / rcp / rsq per SM
TENSOR_FLOP_PER_CLK = 4096  # dense bf16 per SM
COPY_TBPS = 4.25  # measured device copy ceiling
REGS_PER_SM = 65536
SMEM_PER_SM = 233472  # 228 KiB, of which 1 KiB is reserved per resident block
SMEM_RESERVED_PER_CTA = 1024
MAX_WARPS_PER_SM = 64
MAX_CTAS_PER_SM = 32

NORM_ROWS = 16384
NORM_HIDDEN = (1024, 4096, 8192, 16384)
ATTN_SEQ = 8192
ATTN_TOKENS = 16384
ATTN_MODEL_DIM = 2048


# ----------------------------------------------------------------------------------------------------------
# Compilation
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Compiled:
    name: str
    num_warps: int
    regs: int | None
    spill_bytes: tuple[int, int] | None  # (stores, loads)
    stack: int | None
    smem: int
    cubin: bytes
    ptxas_log: str = ""  # ptxas -v, which also carries its performance reports (e.g. C7514)
    ptx: str = ""
    sass: list[tuple[int, str]] = field(default_factory=list)  # (address, instruction text)


_BACKEND = make_backend(TARGET)
_BINDERS: dict[int, object] = {}


@contextlib.contextmanager
def every_build_through_ptxas():
    """A private, always-missed Triton cache for the block: every build goes through ptxas, whose -v log
    gives registers and spills."""
    with tempfile.TemporaryDirectory() as cache:
        knobs.cache.dir = cache
        knobs.compilation.always_compile = True
        knobs.nvidia.dump_ptxas_log = True
        yield


def compile_sm90(fn, args: tuple, kwargs: dict, name: str, source: type[ASTSource] = ASTSource) -> Compiled:
    """Compile a @triton.jit function (a Gluon one with `source=GluonASTSource`) for sm_90 as a launch with
    these arguments would; no device touched. Needs `knobs.nvidia.dump_ptxas_log` for registers and spills."""
    binder = _BINDERS.get(id(fn))
    if binder is None:
        binder = _BINDERS[id(fn)] = create_function_from_signature(fn.signature, fn.params, _BACKEND)
    bound, spec, opts = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(_BACKEND, kwargs, bound, spec, opts)
    log = io.StringIO()
    with contextlib.redirect_stdout(log):  # ptxas -v log, printed by Triton when dump_ptxas_log is on
        kernel = triton.compile(source(fn, signature, constexprs, attrs), target=TARGET, options=options.__dict__)
    text = log.getvalue()
    regs = re.search(r"Used (\d+) registers", text)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    stack = re.search(r"(\d+) bytes stack frame", text)
    return Compiled(
        name=name,
        num_warps=options.num_warps,
        regs=int(regs.group(1)) if regs else None,
        spill_bytes=(int(spills.group(1)), int(spills.group(2))) if spills else None,
        stack=int(stack.group(1)) if stack else None,
        smem=int(kernel.metadata.shared),
        cubin=kernel.asm["cubin"],
        ptxas_log=text,
        ptx=kernel.asm.get("ptx", ""),
    )


def find_disassembler() -> tuple[list[str] | None, str]:
    """A command that prints SASS for a cubin path (cuobjdump -sass, else nvdisasm), or None and why."""
    missing = []
    for tool, flags in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
        try:
            path = getattr(knobs.nvidia, tool).path
        except (RuntimeError, AttributeError) as exc:
            missing.append(f"{tool}: {exc}")
            continue
        return [path, *flags], tool
    return None, "; ".join(missing)


_SASS_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def disassemble(cmd: list[str], cubin: bytes) -> tuple[str, list[tuple[int, str]]]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([*cmd, f.name], check=True, capture_output=True, text=True).stdout
    instrs = []
    for line in text.splitlines():
        m = _SASS_LINE.match(line)
        if m:
            instrs.append((int(m.group(1), 16), m.group(2)))
    return text, instrs


# ----------------------------------------------------------------------------------------------------------
# SASS analysis
# ----------------------------------------------------------------------------------------------------------


def opcode(instr: str) -> str:
    parts = instr.split()
    return parts[1] if parts[0].startswith("@") else parts[0]


def partition_registers(sass: str) -> list[int]:
    """The register counts a warp-specialised build's partitions ask for (setmaxnreg, SASS USETMAXREG)."""
    return sorted({int(n, 16) for n in re.findall(r"USETMAXREG\.\S+ (?:UP\d+, )?(0x[0-9a-f]+)", sass)})


def op_counts(instrs: list[tuple[int, str]]) -> collections.Counter:
    return collections.Counter(opcode(t) for _, t in instrs)


def issued(counts: collections.Counter) -> int:
    """Instructions that take an issue slot (NOP padding left out)."""
    return sum(n for op, n in counts.items() if op != "NOP")


def count(counts: collections.Counter, *prefixes: str) -> int:
    return sum(n for op, n in counts.items() if op.startswith(prefixes))


def inner_loops(instrs: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Bodies of innermost loops: backward branches before the last EXIT (later ones are out-of-line
    barrier-wait stubs that jump back into the main code, not loops)."""
    exits = [a for a, t in instrs if opcode(t) == "EXIT"]
    last_exit = max(exits) if exits else math.inf
    spans = []
    for addr, text in instrs:
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < addr < last_exit:
            spans.append((int(m.group(1), 16), addr))
    inner = [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans)]
    return [[(a, t) for a, t in instrs if lo <= a <= hi] for lo, hi in sorted(inner)]


def ctas_per_sm(c: Compiled, threads_per_cta: int) -> int:
    """Resident blocks per SM from registers (per-warp allocation in units of 256), shared memory, warps."""
    warps = threads_per_cta // 32
    limits = [MAX_CTAS_PER_SM, MAX_WARPS_PER_SM // warps, SMEM_PER_SM // (c.smem + SMEM_RESERVED_PER_CTA)]
    if c.regs:
        per_warp = math.ceil(c.regs * 32 / 256) * 256
        limits.append(REGS_PER_SM // (per_warp * warps))
    return max(0, min(limits))


def mem_widths(counts: collections.Counter, prefix: str) -> str:
    """e.g. LDG.E.128 x8, LDG.E.64 x2 -> '128:8 64:2' (bits per thread per instruction)."""
    out = []
    for op, n in sorted(counts.items()):
        if op.startswith(prefix):
            width = re.search(r"\.(128|64|U16|S16|U8|S8)\b", op)
            out.append(f"{width.group(1) if width else '32'}:{n}")
    return " ".join(out) or "-"


# ----------------------------------------------------------------------------------------------------------
# Kernels and configs
# ----------------------------------------------------------------------------------------------------------

_BF16 = torch.empty(64, dtype=torch.bfloat16)  # only its dtype and 16-byte alignment reach the binder
_FP8 = torch.empty(64, dtype=torch.float8_e4m3fn)
_F32 = torch.empty(64, dtype=torch.float32)


def norm_cases() -> list[tuple[str, dict, int, object]]:
    """(label, kwargs, elements per thread, variant) for the whole-row kernel at each hidden size."""
    cases = []
    for hidden in NORM_HIDDEN:
        block_n = norm.next_pow2(hidden)
        assert block_n <= norm.MAX_FUSED_BLOCK, "these sizes take the whole-row kernel"
        configs = norm.prune_norm_configs(norm.norm_configs(), {"n_rows": NORM_ROWS, "N": hidden}, BLOCK_N=block_n)
        # Whole-row programs only: a two-pass program's loops defeat a static per-element instruction count.
        configs = [c for c in configs if not c.kwargs["CHUNK"]]
        for i, cfg in enumerate(configs):
            rows = cfg.kwargs["ROWS"]
            per_thread = rows * block_n // (32 * cfg.num_warps)
            kw = {"BLOCK_N": block_n, "EVEN_N": block_n == hidden, "CONTIGUOUS": True, **cfg.all_kwargs()}
            label = f"h{hidden} R{rows} w{cfg.num_warps}" + (f" p{cfg.kwargs['CTAS']}" if cfg.kwargs["CTAS"] else "")
            label += " ev" if cfg.kwargs.get("EVICT") else ""
            cases.append((label, kw, per_thread, ("gelu", norm.GELU_IMPL)))
            if i == len(configs) // 2:  # one comparison point per size: libdevice erff, and no GELU
                cases.append((label, kw, per_thread, ("gelu", 0)))
                cases.append((label, kw, per_thread, ("ln", None)))
    return cases


def report_norm(disasm: list[str] | None, sass_dir: Path | None) -> list[str]:
    fn = norm._norm_kernel
    rows = []
    header = (
        f"{'kernel':<14} {'config':<17} {'el/thr':>6} {'regs':>4} {'spill':>5} {'smem':>5} {'CTA/SM':>6} "
        f"{'instr/el':>8} {'fp32/el':>7} {'mufu/el':>7} {'LDG(bits:n)':>14} {'STG':>7} {'LDL/STL':>7} "
        f"{'bound TB/s':>10} {'serial':>6}"
    )
    rows.append(header)
    for label, kw, per_thread, (kind, impl) in norm_cases():
        hidden = int(label.split()[0][1:])
        args = (_BF16, _BF16, _BF16, _BF16, _BF16, NORM_ROWS, hidden, hidden, hidden, 1e-5)
        flags = {
            "IS_RMS": False,
            "HAS_W": True,
            "HAS_B": True,
            "HAS_GELU": kind == "gelu",
            "GELU_IMPL": impl or 0,
            "PRECISE": False,
            "INLINE_PTX": True,
        }
        kname = {"gelu": f"bgln {'fit' if impl == 1 else 'erff'}", "ln": "layer_norm"}[kind]
        c = compile_sm90(fn, args, {**flags, **kw}, f"{kname.replace(' ', '_')}_{label.replace(' ', '_')}")
        threads = kw["num_warps"] * 32
        spill = "?" if c.spill_bytes is None else str(sum(c.spill_bytes))
        line = (
            f"{kname:<14} {label:<17} {per_thread:>6} {c.regs or '?':>4} {spill:>5} {c.smem:>5} "
            f"{ctas_per_sm(c, threads):>6}"
        )
        if disasm:
            text, c.sass = disassemble(disasm, c.cubin)
            if sass_dir:
                (sass_dir / f"{c.name}.sass").write_text(text)
            k = op_counts(c.sass)
            per_el = issued(k) / per_thread
            fp32 = count(k, "FFMA", "FMUL", "FADD") / per_thread
            mufu = count(k, "MUFU") / per_thread
            # Throughput each resource allows, as TB/s of 4 bytes per element (2 read + 2 written, bf16).
            scale = SMS * CLOCK_HZ * 4 / 1e12
            bound = min(ISSUE_PER_CLK / per_el, FP32_PER_CLK / fp32, MUFU_PER_CLK / mufu if mufu else math.inf) * scale
            serial = 1 / (1 / bound + 1 / COPY_TBPS)  # arithmetic and memory time added, not overlapped
            line += (
                f" {per_el:>8.1f} {fp32:>7.1f} {mufu:>7.2f} {mem_widths(k, 'LDG'):>14} "
                f"{mem_widths(k, 'STG'):>7} {count(k, 'LDL', 'STL'):>7} {bound:>10.2f} {serial:>6.2f}"
            )
        rows.append(line)
    return rows


def attention_cases() -> list[tuple[int, bool, triton.Config]]:
    cases = []
    for head_dim in (128, 64):
        configs = attn.prune_attention_configs(attn.attention_configs(), {"SQ": ATTN_SEQ}, HEAD_DIM=head_dim)
        for causal in (False, True):
            cases += [(head_dim, causal, cfg) for cfg in configs]
    return cases


def report_attention(disasm: list[str] | None, sass_dir: Path | None) -> list[str]:
    fn = attn._attn_fwd_kernel
    rows = [
        f"{'kernel':<14} {'config':<24} {'regs':>4} {'spill':>5} {'smem':>6} {'CTA/SM':>6} "
        f"{'MMA in kernel':<38} {'loop instr':>10} {'EX2':>4} {'wait':>4} "
        f"{'mufu/tc':>7} {'issue/tc':>8} {'LDL/STL':>7}"
    ]
    for head_dim, causal, cfg in attention_cases():
        heads = ATTN_MODEL_DIM // head_dim
        strides = (heads * ATTN_SEQ * head_dim, ATTN_SEQ * head_dim, head_dim)
        args = (_BF16, _BF16, _BF16, _BF16, heads, 1, ATTN_SEQ, ATTN_SEQ, *strides * 4, 0.125 * 1.4427)  # 1: KV_GROUP
        bm, bn = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
        # The per-head descriptor path (PACKED=False): its binder takes plain pointers.
        consts = {"HEAD_DIM": head_dim, "CAUSAL": causal, "UPCAST": False, "EVEN_N": ATTN_SEQ % bn == 0}
        consts["PACKED"] = False
        label = f"D{head_dim} {'causal' if causal else 'full'} {bm}x{bn} w{cfg.num_warps} s{cfg.num_stages}"
        c = compile_sm90(fn, args, {**consts, **cfg.all_kwargs()}, f"attn_{label.replace(' ', '_')}")
        spill = "?" if c.spill_bytes is None else str(sum(c.spill_bytes))
        line = (
            f"{'attention':<14} {label:<24} {c.regs or '?':>4} {spill:>5} {c.smem:>6} "
            f"{ctas_per_sm(c, cfg.num_warps * 32):>6}"
        )
        if disasm:
            text, c.sass = disassemble(disasm, c.cubin)
            if sass_dir:
                (sass_dir / f"{c.name}.sass").write_text(text)
            k = op_counts(c.sass)
            mma = ", ".join(
                f"{op.split('.')[0]}.{op.split('.')[1]} x{n}"
                for op, n in sorted(k.items())
                if op.startswith(("HGMMA", "HMMA"))
            )
            loops = [lp for lp in inner_loops(c.sass) if count(op_counts(lp), "HGMMA", "HMMA")]
            if loops:  # the first MMA loop: the unmasked stage, where nearly all the work is
                lk = op_counts(loops[0])
                tensor_clk = 2 * (2 * bm * bn * head_dim) / TENSOR_FLOP_PER_CLK
                mufu_clk = count(lk, "MUFU") * cfg.num_warps * 32 / MUFU_PER_CLK
                issue_clk = issued(lk) * cfg.num_warps * 32 / ISSUE_PER_CLK
                loop = (
                    f" {issued(lk):>10} {count(lk, 'MUFU.EX2'):>4} {count(lk, 'WARPGROUP.DEPBAR'):>4} "
                    f"{mufu_clk / tensor_clk:>7.2f} {issue_clk / tensor_clk:>8.2f}"
                )
            else:
                loop = f" {'-':>10} {'-':>4} {'-':>4} {'-':>7} {'-':>8}"
            line += f" {mma or 'none':<38}{loop} {count(k, 'LDL', 'STL'):>7}"
        rows.append(line)
    return rows


def _matmul_row(fn, args: tuple, kw: dict, cfg: triton.Config, what: str, disasm, sass_dir) -> str:
    kv = cfg.kwargs
    label = f"{kv['BLOCK_M']}x{kv['BLOCK_N']}x{kv['BLOCK_K']} w{cfg.num_warps} s{cfg.num_stages}"
    label += " sub" if kv["EPI_SUBTILE"] else ""
    c = compile_sm90(fn, args, {**kw, **cfg.all_kwargs()}, f"{what}_{label}".replace(" ", "_").replace(",", ""))
    spill = "?" if c.spill_bytes is None else str(sum(c.spill_bytes))
    line = f"{what:<28} {label:<24} {c.regs or '?':>4} {spill:>5} {c.smem:>6} {ctas_per_sm(c, cfg.num_warps * 32):>6}"
    if disasm:
        text, c.sass = disassemble(disasm, c.cubin)
        if sass_dir:
            (sass_dir / f"{c.name}.sass").write_text(text)
        counts = op_counts(c.sass)
        mma = ", ".join(f"{op} x{n}" for op, n in sorted(counts.items()) if op.startswith(("HGMMA", "HMMA", "QGMMA")))
        line += f" {mma or 'none'}  LDL/STL {count(counts, 'LDL', 'STL')}"
    return line


def report_matmul(disasm: list[str] | None, sass_dir: Path | None) -> list[str]:
    """The TMA kernel plain (the forward), reading a column-major operand (the backward's dA = dC B^T and
    dB = A^T dC), with the bias + GELU epilogue (and the pre-activation stored, as under autograd); the FP8
    kernel with precise and fast accumulation."""
    configs = mm.matmul_tma_configs()
    main, sub = configs[0], configs[1]  # 128x256x64, 8 warps, 3 stages: whole and half-width epilogue stores
    m = n = k = 4096
    off = {"A_COL_MAJOR": False, "B_COL_MAJOR": False, "HAS_BIAS": False, "ACTIVATION": 0, "STORE_PRE": False}
    base = {"NUM_SMS": SMS, "UPCAST": False, "INPUT_PRECISION": "ieee", **off}
    plain = (_BF16, _BF16, _BF16, None, None, m, n, k, k, n, n)
    fused = (_BF16, _BF16, _BF16, _BF16, _BF16, m, n, k, k, n, n)
    cases = [
        ("matmul_tma", main, plain, {}),
        ("matmul_tma, B col-major", main, plain, {"B_COL_MAJOR": True}),
        ("matmul_tma, A col-major", main, plain, {"A_COL_MAJOR": True}),
        ("matmul_tma, bias+gelu", main, plain[:4] + (_BF16,) + plain[5:], {"HAS_BIAS": True, "ACTIVATION": 1}),
        ("matmul_tma, bias+gelu", sub, plain[:4] + (_BF16,) + plain[5:], {"HAS_BIAS": True, "ACTIVATION": 1}),
        ("matmul_tma, bias+gelu, z", sub, fused, {"HAS_BIAS": True, "ACTIVATION": 1, "STORE_PRE": True}),
        ("matmul_tma, bias+gelu-tanh", sub, plain[:4] + (_BF16,) + plain[5:], {"HAS_BIAS": True, "ACTIVATION": 2}),
    ]
    rows = [f"{'kernel':<28} {'config':<24} {'regs':>4} {'spill':>5} {'smem':>6} {'CTA/SM':>6} MMA"]
    rows += [
        _matmul_row(mm._matmul_tma_kernel, args, {**base, **kw}, c, w, disasm, sass_dir) for w, c, args, kw in cases
    ]
    fp8_args = (_FP8, _FP8, _BF16, _F32, _F32, m, n, k, k, k, n, 1, 1)
    fp8_cfg = next(
        c
        for c in f8.matmul_fp8_configs()
        if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps) == (128, 128, 8)  # 128x128x128, 8 warps
    )
    for fast in (False, True):
        kw = {"NUM_SMS": SMS, "ROW_SCALES": True, "COL_SCALES": True, "FAST_ACCUM": fast, "UPCAST": False}
        what = "matmul_fp8" + (", fast accum" if fast else "")
        rows.append(_matmul_row(f8._matmul_fp8_kernel, fp8_args, kw, fp8_cfg, what, disasm, sass_dir))
    return rows


def main() -> int:
    global CLOCK_HZ
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sass-dir", type=Path, help="write each kernel's SASS listing here")
    parser.add_argument("--clock-ghz", type=float, default=CLOCK_HZ / 1e9, help="SM clock of the model")
    opts = parser.parse_args()
    CLOCK_HZ = opts.clock_ghz * 1e9
    if opts.sass_dir:
        opts.sass_dir.mkdir(parents=True, exist_ok=True)

    disasm, why = find_disassembler()
    if disasm is None:
        print(f"no disassembler ({why}): registers/spills/shared memory only, no instruction counts")
    try:
        ptxas = knobs.nvidia.ptxas.path
    except RuntimeError as exc:
        print(f"cannot compile for sm_90: {exc}")
        return 1
    print(f"triton {triton.__version__}, target {TARGET}, ptxas {ptxas}, SASS via {why if disasm else 'none'}")

    start = time.perf_counter()
    with every_build_through_ptxas():
        sections = (
            ("bias_gelu_layer_norm, whole-row kernel, bf16, 16384 rows", report_norm),
            (f"attention forward, bf16, B*H*S = {ATTN_TOKENS}*{ATTN_MODEL_DIM}/D, S = {ATTN_SEQ}", report_attention),
            ("matmul: persistent TMA kernels, bf16 (fp8 inputs for matmul_fp8), 4096^3", report_matmul),
        )
        for title, fn in sections:
            print(f"\n## {title}")
            try:
                rows = fn(disasm, opts.sass_dir)
            except Exception as exc:  # e.g. a Triton without ahead-of-time sm_90 support: say why
                print(f"cannot compile for sm_90: {type(exc).__name__}: {exc}")
                return 1
            for row in rows:
                print(row)
    print(
        f"\nnorm: el/thr = elements per thread; per-element counts = whole-kernel SASS / el/thr; bound = the "
        f"lowest of issue ({ISSUE_PER_CLK}/clk/SM), FP32 ({FP32_PER_CLK}) and MUFU ({MUFU_PER_CLK}) throughput "
        f"at {CLOCK_HZ / 1e9:.2f} GHz x {SMS} SMs as TB/s of 4 B/element (copy ceiling {COPY_TBPS} TB/s);\n"
        f"serial = 1/(1/bound + 1/copy ceiling), the throughput if arithmetic and memory time add.\n"
        f"attention: first MMA loop, per iteration; wait = WARPGROUP.DEPBAR (wgmma waits); mufu/tc and "
        f"issue/tc = MUFU and issue-slot time over tensor-core time ({TENSOR_FLOP_PER_CLK} bf16 FLOP/clk/SM).\n"
        f"static compiler facts for sm_90, not measurements; {time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
