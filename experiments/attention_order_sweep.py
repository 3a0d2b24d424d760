"""The Hopper attention kernels' program order, side by side on an H200 (not collected by pytest).

    python experiments/attention_order_sweep.py [--cases ws-causal,ws-full] [--groups 1,16] [--capped]

For each suite shape: each head group (`tile_coords`' HEAD_GROUP: how many heads the grid walks
together, 1 = head after head) is checked against an fp32 SDPA reference, then all are timed together with
the harness's timer (CUDA-graph replay, L2 flushed before each repetition, variants taking turns across
rounds, once in each order), with flash-attn 4 where it is installed. The card is held busy with matmuls
once at the start, as the suite does; `--capped` holds it busy before every case instead, so each case is
timed at the clock the power cap leaves after heavy load. Prints one line per variant, fastest first, with
its ratio to the shipped group. About a minute.
"""

from __future__ import annotations

import argparse
import importlib
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

try:
    from flash_attn.cute import flash_attn_func
except ImportError:
    flash_attn_func = None

# isort: split
from tierbench.suite.measure.checking import check
from tierbench.suite.measure.envinfo import telemetry
from tierbench.timing import CudaEventTimer, TimingSettings, bring_to_steady_state

hopper = importlib.import_module("tierbench.kernels._attention_hopper")
hopper_ws = importlib.import_module("tierbench.kernels._attention_hopper_ws")

TOKENS, MODEL_DIM = 16384, 2048  # the suite's attention shapes
CASES = {  # name: (module, head_dim, causal, seq lengths)
    "ws-causal": (hopper_ws, 128, True, (2048, 4096, 8192, 16384)),
    "ws-full": (hopper_ws, 128, False, (1024, 4096, 8192, 16384)),
    "wg-causal": (hopper, 64, True, (4096, 8192, 16384)),
    "wg-full": (hopper, 64, False, (2048, 8192)),
    "wg-causal-128": (hopper, 128, True, (512, 1024)),
}
T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def sweep_case(
    timer: CudaEventTimer, module: object, d: int, causal: bool, s: int, group_list: str, capped: bool
) -> None:
    h, b = MODEL_DIM // d, TOKENS // s
    g = torch.Generator(device="cuda").manual_seed(s + d)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    scale = 1.0 / math.sqrt(d) * math.log2(math.e)
    groups = sorted({b * h if g == "all" else int(g) for g in group_list.split(",")} & set(range(1, b * h + 1)))
    shipped = hopper.default_head_group(q, k, causal)
    fns = {}
    for group in groups:
        o = torch.full_like(q, float("nan"))
        fn = lambda o=o, group=group: module.launch(q, k, v, o, causal, scale, head_group=group) or o  # noqa: E731
        verdict = check(fn(), ref, torch.bfloat16)
        if verdict.ok:
            fns[f"group {group}" + (" (shipped)" if group == shipped else "")] = fn
        else:
            log(f"  group {group}: WRONG, {verdict.reason}")
    if flash_attn_func is not None:
        qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        fa4 = lambda: flash_attn_func(qt, kt, vt, causal=causal)[0].transpose(1, 2)  # noqa: E731
        if check(fa4(), ref, torch.bfloat16).ok:
            fns["flash-attn 4"] = fa4
    if capped:
        bring_to_steady_state(torch.device("cuda"), 2.0)
    samples = timer.measure(fns)
    for name, more in timer.measure(dict(reversed(fns.items()))).items():
        samples[name] = samples[name] + more if isinstance(samples[name], list) and isinstance(more, list) else None
    med = {name: statistics.median(s) for name, s in samples.items() if s}
    flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
    base = next((ms for name, ms in med.items() if "shipped" in name), float("nan"))
    clock = telemetry(torch.device("cuda")).get("sm_clock_mhz")
    what = f"{module.__name__.rsplit('.', 1)[-1]} D{d} S{s} B{b} H{h} {'causal' if causal else 'full'}"
    log(f"== {what}, SM clock {clock} MHz")
    for name, ms in sorted(med.items(), key=lambda kv: kv[1]):
        print(f"   D{d} S{s:<6d} {'causal' if causal else 'full':6s} {name:20s} {ms * 1e3:8.1f} us "
              f"{flops / ms * 1e-9:6.0f} TFLOP/s x{base / ms:.3f}", flush=True)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--groups", default="1,2,4,8,12,16,24,32,all", help="head groups; all = B*H")
    p.add_argument("--capped", action="store_true", help="hold the card busy before every case, not once")
    args = p.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        sys.exit("attention_order_sweep.py needs an sm_90 (Hopper) GPU")
    timer = CudaEventTimer(TimingSettings(warmup_ms=10, rep_ms=10, rounds=3, steady_state_s=0), torch.device("cuda"))
    bring_to_steady_state(torch.device("cuda"), 1.0)  # the suite's `quick` setting
    for case in args.cases.split(","):
        module, d, causal, seqs = CASES[case]
        for s in seqs:
            sweep_case(timer, module, d, causal, s, args.groups, args.capped)
            torch.cuda.empty_cache()
    log("done")


if __name__ == "__main__":
    main()
