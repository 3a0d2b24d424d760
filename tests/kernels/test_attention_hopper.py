"""The Gluon attention kernels for Hopper: their schedules, checked on the sm_90 binaries compiled ahead of
time (no GPU needed), which inputs each takes, and (on an sm_90 GPU) their results against the float64
reference.

Gluon has no interpreter, so on a CPU the kernels are compiled, not run: the compile tests check what makes
them worth having, that ptxas keeps the softmax between the two wgmma waits instead of serialising or
hoisting, and that the warp-specialised kernel's partitions get the registers it was built for.
"""

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from attention_inputs import assert_rows_close, random_qkv
from gpu_marks import on_hopper

from tierbench.kernels._common import last_launch
from tierbench.suite.ops.attention import attention_ref

at = importlib.import_module("tierbench.kernels.attention")
hopper_ws = importlib.import_module("tierbench.kernels._attention_hopper_ws")


def _qk_scale(head_dim: int) -> float:
    """The softmax scale times log2(e), as the kernels' launch() takes it."""
    return head_dim**-0.5 * math.log2(math.e)


SCHEDULE_SCRIPT = Path(__file__).with_name("hopper_schedule.py")


@pytest.fixture(scope="module")
def schedules() -> dict:
    # A fresh process without the interpreter, which would stand in for the helpers Gluon compiles.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(SCHEDULE_SCRIPT)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


BUILDS = [f"{k} D{d} causal={c}" for k, m in at.HOPPER_KERNELS.items() for d in m.HEAD_DIMS for c in (False, True)]
BUILDS += [f"{k} D128 causal=True grouped" for k in at.HOPPER_KERNELS]  # 4 query heads per K/V head, Sq < Sk


@pytest.mark.parametrize("build", BUILDS)
def test_compiled_schedule_overlaps_softmax_and_mma(schedules, build):
    got = schedules[build]
    assert not got["serialized"], f"{build}: ptxas serialised the wgmma instructions (C7514)"
    assert got["spill_bytes"] == 0, f"{build}: {got['spill_bytes']} bytes spilled"
    # One wait per softmax warpgroup leaves P@V in flight; the softmax's exponentials (a warpgroup's score
    # tile over its 128 threads) run between it and the next wait.
    module = at.HOPPER_KERNELS[build.split()[0]]
    rows, keys = module.SCORE_TILE
    warpgroups = module.SOFTMAX_WARPGROUPS
    exp2 = got["exp2_between_waits"]
    assert len(exp2) == warpgroups, f"{build}: {len(exp2)} waits leave P@V in flight, expected {warpgroups}"
    assert min(exp2) >= rows * keys // 128, f"{build}: {exp2} exp2 overlap P@V, expected {rows * keys // 128} each"


@pytest.mark.parametrize("causal", [False, True])
def test_compiled_warp_specialised_loop_trip_passes_two_warpgroup_barriers(schedules, causal):
    # Each single-thread mbarrier arrival holds the warpgroup at two bar.sync; one arrival per loop trip
    # (K(j) and V(j-1) released together) keeps it at two. Releasing K on its own barrier made it four.
    got = schedules[f"gluon-ws D128 causal={causal}"]["loop_barriers"]
    assert got == [2, 2], f"warpgroup barriers per loop trip, one entry per softmax warpgroup: {got}"


@pytest.mark.parametrize("causal", [False, True])
def test_compiled_warp_specialised_partitions_get_their_registers(schedules, causal):
    got = schedules[f"gluon-ws D128 causal={causal}"]["partition_registers"]
    assert hopper_ws.SOFTMAX_REGS in got and hopper_ws.LOADER_REGS in got, got


def test_layout_fits():
    def meta(*shape):
        return torch.empty(*shape, device="meta", dtype=torch.bfloat16)

    q = meta(2, 4, 256, 128)
    for kernel in at.HOPPER_KERNELS:
        assert at.hopper_layout_fits(q, q, q, kernel)
        assert not at.hopper_layout_fits(meta(2, 4, 256, 256), meta(2, 4, 256, 256), meta(2, 4, 256, 256), kernel)
        assert not at.hopper_layout_fits(meta(2, 4, 100, 128), meta(2, 4, 100, 128), meta(2, 4, 100, 128), kernel)
        strided = meta(2, 256, 4, 128).transpose(1, 2)
        assert not at.hopper_layout_fits(strided, q, q, kernel)
        assert not at.hopper_layout_fits(q, q, strided, kernel)
    # The one-warpgroup kernel reads 64-row blocks at head_dim 64 or 128; the warp-specialised one 128-row
    # blocks at head_dim 128.
    assert at.hopper_layout_fits(meta(1, 2, 64, 64), meta(1, 2, 320, 64), meta(1, 2, 320, 64), "gluon")
    assert not at.hopper_layout_fits(meta(1, 2, 128, 64), meta(1, 2, 256, 64), meta(1, 2, 256, 64), "gluon-ws")
    assert not at.hopper_layout_fits(meta(1, 2, 192, 128), meta(1, 2, 256, 128), meta(1, 2, 256, 128), "gluon-ws")
    assert at.hopper_layout_fits(meta(1, 2, 128, 128), meta(1, 2, 384, 128), meta(1, 2, 384, 128), "gluon-ws")
    # Grouped-query heads: K/V with fewer heads, each read for its group through the same rows.
    for kernel in at.HOPPER_KERNELS:
        assert at.hopper_layout_fits(meta(2, 8, 256, 128), meta(2, 2, 512, 128), meta(2, 2, 512, 128), kernel)


def test_warp_specialised_kernel_suits_all_but_short_causal_attention():
    assert hopper_ws.suits(256, causal=False) and hopper_ws.suits(512, causal=True)
    assert not hopper_ws.suits(256, causal=True)


def test_not_taken_on_cpu_or_under_the_interpreter(device):
    q = torch.randn(1, 2, 128, 128, dtype=torch.float16).to(device)
    for kernel in at.HOPPER_KERNELS:
        assert not at.hopper_kernel_applies(q, q, q, kernel)
        with pytest.raises(ValueError, match=f"Gluon kernel '{kernel}' does not apply"):
            at._attention_forward(q, q, q, kernel=kernel)
    with pytest.raises(ValueError, match="kernel must be one of auto, gluon-ws, gluon, triton, got 'cuda'"):
        at._attention_forward(q, q, q, kernel="cuda")


# (kernel, head_dim, (batch, heads, seq) shapes it takes)
GPU_CASES = [
    ("gluon", 64, ((2, 3, 256), (1, 2, 64), (1, 16, 2048))),
    ("gluon", 128, ((2, 3, 256), (1, 2, 64), (1, 16, 2048))),
    ("gluon-ws", 128, ((2, 3, 256), (1, 2, 128), (1, 16, 2048))),
]


@pytest.mark.gpu
@on_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel, head_dim, shapes", GPU_CASES)
def test_hopper_kernel_gpu(kernel, head_dim, shapes, causal, dtype, assert_close):
    for b, h, s in shapes:
        q, k, v = random_qkv(b, h, s, s, head_dim, dtype, "cuda", seed=s)
        v[0, h - 1] += 100.0  # a head whose values differ wildly from its neighbours' shows any cross-head read
        out = at._attention_forward(q, k, v, causal, kernel=kernel)
        assert at.HOPPER_KERNELS[kernel].LAUNCH_KIND in last_launch("attention")
        what = f"{kernel} B={b} H={h} S={s} D={head_dim} causal={causal}"
        assert_close(out, attention_ref(q, k, v, causal), dtype, what)


@pytest.mark.gpu
@on_hopper
@pytest.mark.parametrize("kernel, sq, sk", [("gluon", 192, 640), ("gluon-ws", 256, 640)])
def test_hopper_kernel_gpu_cross_lengths_and_scale(kernel, sq, sk, assert_close):
    q, k, v = random_qkv(2, 4, sq, sk, 128, torch.bfloat16, "cuda", seed=1)
    out = at._attention_forward(q, k, v, False, 0.3, kernel=kernel)
    assert_close(out, attention_ref(q, k, v, False, 0.3), torch.bfloat16, f"{kernel} Sq={sq} Sk={sk} scale=0.3")


# (batch, heads, kv_heads, seq_q, seq_k): groups of 4, 2 and 8 query heads per K/V head, q as long as k and
# shorter (causal bottom-right aligned: chunked prefill), Llama-3 8B's and 70B's head layouts.
GQA_GPU_SHAPES = [(2, 8, 2, 256, 256), (1, 6, 3, 128, 640), (2, 4, 1, 512, 2048), (1, 32, 8, 2048, 2048),
                  (1, 64, 8, 1024, 8192)]  # fmt: skip


@pytest.mark.gpu
@on_hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel, head_dim", [("gluon", 64), ("gluon", 128), ("gluon-ws", 128)])
def test_hopper_kernel_gpu_grouped_query_heads(kernel, head_dim, causal, assert_close):
    for b, h, kv_h, sq, sk in GQA_GPU_SHAPES:
        q, k, v = random_qkv(b, h, sq, sk, head_dim, torch.bfloat16, "cuda", seed=sq + sk, kv_heads=kv_h)
        v[0, kv_h - 1] += 100.0  # a K/V head whose values differ wildly from its neighbours' shows a wrong group
        out = at._attention_forward(q, k, v, causal, kernel=kernel)
        assert at.HOPPER_KERNELS[kernel].LAUNCH_KIND in last_launch("attention")
        what = f"{kernel} B={b} H={h}/{kv_h} Sq={sq} Sk={sk} D={head_dim} causal={causal}"
        ref = attention_ref(q, k, v, causal)
        assert_close(out, ref, torch.bfloat16, what)
        assert_rows_close(out, ref, torch.bfloat16, what)


@pytest.mark.gpu
@on_hopper
def test_public_attention_takes_the_best_hopper_kernel_that_fits():
    q, k, v = random_qkv(1, 2, 256, 256, 128, torch.bfloat16, "cuda", seed=2)
    at.attention(q, k, v)
    assert "gluon Hopper kernel, warp-specialised" in last_launch("attention")
    # Where the warp-specialised kernel does not apply, or (short and causal) does not suit.
    for d, s, causal in ((64, 256, False), (128, 192, False), (128, 256, True)):
        q, k, v = random_qkv(1, 2, s, s, d, torch.bfloat16, "cuda", seed=2)
        at.attention(q, k, v, causal)
        assert "gluon Hopper kernel:" in last_launch("attention")  # the one-warpgroup kernel's record
    q, k, v = random_qkv(1, 2, 200, 200, 128, torch.bfloat16, "cuda", seed=3)
    at.attention(q, k, v)  # a length no Gluon kernel's blocks divide
    assert "gluon" not in last_launch("attention")
    q, k, v = random_qkv(1, 8, 512, 1024, 128, torch.bfloat16, "cuda", seed=4, kv_heads=2)
    at.attention(q, k, v, causal=True)  # grouped heads, q shorter than k
    assert "gluon Hopper kernel, warp-specialised" in last_launch("attention")
    at.attention(q[:, :, :16], k, v, causal=True)  # decode: the split-KV kernel
    assert "split-kv" in last_launch("attention")


@pytest.mark.gpu
@on_hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel, head_dim", [("gluon", 64), ("gluon-ws", 128)])
def test_hopper_kernel_gpu_every_head_group(kernel, head_dim, causal, assert_close):
    # The grid walks the heads a group at a time; groups that do not divide B*H leave a narrower last group.
    b, h, s = 2, 5, 512
    q, k, v = random_qkv(b, h, s, s, head_dim, torch.bfloat16, "cuda", seed=4)
    v[1, h - 1] += 100.0
    ref = attention_ref(q, k, v, causal)
    module = at.HOPPER_KERNELS[kernel]
    for group in (1, 3, 4, b * h, 64):
        o = torch.full_like(q, float("nan"))
        module.launch(q, k, v, o, causal, _qk_scale(head_dim), head_group=group)
        assert_close(o, ref, torch.bfloat16, f"{kernel} head_group={group} causal={causal}")


@pytest.mark.gpu
@on_hopper
@pytest.mark.parametrize("kernel, head_dim", [("triton", 64), ("gluon", 64), ("gluon-ws", 128)])
def test_attention_gpu_more_heads_than_a_grid_axis_holds(kernel, head_dim, assert_close):
    # B*H above 65535, the limit of a launch grid's y and z axes: the grids are 1-D.
    b, h, s = 1, 65536 + 7, 128
    q, k, v = (torch.randn(b, h, s, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = at._attention_forward(q, k, v, True, kernel=kernel)
    for heads in (slice(0, 2), slice(h - 9, h)):  # the first heads and those past the limit
        ref = attention_ref(q[:, heads], k[:, heads], v[:, heads], True)
        assert_close(out[:, heads], ref, torch.bfloat16, f"{kernel} heads {heads}")


@pytest.mark.gpu
@on_hopper
def test_warp_specialised_tile_counter_is_zero_after_every_launch(assert_close):
    # Programs take tiles from a counter that the grid's last program resets: one left dirty would make the
    # next launch skip tiles. 2 x 8 heads of 16 tiles each: more tiles than SMs, so programs take several.
    q, k, v = random_qkv(2, 8, 2048, 2048, 128, torch.bfloat16, "cuda", seed=5)
    ref = attention_ref(q, k, v, True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    for stream in (torch.cuda.current_stream(), side):
        with torch.cuda.stream(stream):
            for launch in range(3):
                o = torch.full_like(q, float("nan"))
                hopper_ws.launch(q, k, v, o, True, _qk_scale(128))
                assert_close(o, ref, torch.bfloat16, f"launch {launch} on stream {stream.cuda_stream}")
                assert hopper_ws.tile_counters(q.device).tolist() == [0, 0]


@pytest.mark.gpu
@on_hopper
def test_warp_specialised_kernel_in_a_cuda_graph(assert_close):
    # A captured launch zeroes its own counter at every replay; launches between replays, eager or replayed,
    # must not disturb each other.
    q, k, v = random_qkv(2, 8, 2048, 2048, 128, torch.bfloat16, "cuda", seed=6)
    ref = attention_ref(q, k, v, True)
    scale = _qk_scale(128)
    o = torch.full_like(q, float("nan"))
    hopper_ws.launch(q, k, v, o, True, scale)  # compiles outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        hopper_ws.launch(q, k, v, o, True, scale)
    for step in range(3):
        o.fill_(float("nan"))
        graph.replay()
        assert_close(o, ref, torch.bfloat16, f"replay {step}")
        eager = torch.full_like(q, float("nan"))
        hopper_ws.launch(q, k, v, eager, True, scale)
        assert_close(eager, ref, torch.bfloat16, f"eager launch after replay {step}")


def test_head_group_rule():
    head_group = importlib.import_module("tierbench.kernels._attention_hopper").head_group
    assert head_group(8192, 8192, 128, 2, causal=False) == 1  # non-causal: head after head
    assert head_group(1024, 1024, 128, 2, causal=True) == 1  # short causal: head after head
    assert head_group(4096, 4096, 128, 2, causal=True) == 16  # capped at MAX_HEAD_GROUP
    assert head_group(16384, 16384, 128, 2, causal=True) == 4  # 4 heads of 8 MiB of K/V fill the 32 MiB
    assert head_group(16384, 16384, 64, 2, causal=True) == 8
    assert head_group(2**20, 2**20, 128, 2, causal=True) == 1  # one head's K/V already past the budget
