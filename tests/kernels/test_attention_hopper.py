"""The Gluon attention kernel for Hopper: its schedule, checked on the sm_90 binary compiled ahead of time
(no GPU needed), which inputs it takes, and (on an sm_90 GPU) its results against the float64 reference.

Gluon has no interpreter, so on a CPU the kernel is compiled, not run: the compile tests check what makes it
worth having, that ptxas keeps the softmax between the two wgmma waits instead of serialising or hoisting.
"""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from attention_inputs import random_qkv

from tierbench.kernels._common import last_launch
from tierbench.suite.ops.attention import attention_ref

at = importlib.import_module("tierbench.kernels.attention")
hopper = importlib.import_module("tierbench.kernels._attention_hopper")

on_hopper = pytest.mark.skipif(
    not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)),
    reason="needs an sm_90 (Hopper) GPU",
)
SCHEDULE_SCRIPT = Path(__file__).with_name("hopper_schedule.py")


@pytest.fixture(scope="module")
def schedules() -> dict:
    # A fresh process without the interpreter, which would stand in for the helpers Gluon compiles.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(SCHEDULE_SCRIPT)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("build", ["D64 causal=False", "D64 causal=True", "D128 causal=False", "D128 causal=True"])
def test_compiled_schedule_overlaps_softmax_and_mma(schedules, build):
    got = schedules[build]
    assert not got["serialized"], f"{build}: ptxas serialised the wgmma instructions (C7514)"
    assert got["spill_bytes"] == 0, f"{build}: {got['spill_bytes']} bytes spilled"
    assert got["wait_leaves_mma_in_flight"], f"{build}: no wgmma wait leaves P@V in flight"
    # The softmax's exponentials (BLOCK x BLOCK over 128 threads) run between that wait and the next one.
    need = hopper.BLOCK * hopper.BLOCK // 128
    assert got["exp2_between_waits"] >= need, f"{build}: {got['exp2_between_waits']} of {need} exp2 overlap P@V"


def test_layout_fits():
    def meta(*shape):
        return torch.empty(*shape, device="meta", dtype=torch.bfloat16)

    q = meta(2, 4, 256, 128)
    assert at.hopper_layout_fits(q, q, q)
    assert at.hopper_layout_fits(meta(1, 2, 128, 64), meta(1, 2, 320, 64), meta(1, 2, 320, 64))
    assert not at.hopper_layout_fits(meta(2, 4, 256, 256), meta(2, 4, 256, 256), meta(2, 4, 256, 256))
    assert not at.hopper_layout_fits(meta(2, 4, 100, 128), meta(2, 4, 100, 128), meta(2, 4, 100, 128))
    strided = meta(2, 256, 4, 128).transpose(1, 2)
    assert not at.hopper_layout_fits(strided, q, q)
    assert not at.hopper_layout_fits(q, q, strided)


def test_not_taken_on_cpu_or_under_the_interpreter(device):
    q = torch.randn(1, 2, 128, 64, dtype=torch.float16).to(device)
    assert not at.hopper_kernel_applies(q, q, q)
    with pytest.raises(ValueError, match="Gluon kernel does not apply"):
        at._attention_forward(q, q, q, kernel="gluon")
    with pytest.raises(ValueError, match="kernel must be one of auto, gluon, triton, got 'cuda'"):
        at._attention_forward(q, q, q, kernel="cuda")


@pytest.mark.gpu
@on_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_hopper_kernel_gpu(head_dim, causal, dtype, assert_close):
    for b, h, s in ((2, 3, 256), (1, 2, 64), (1, 16, 2048)):
        q, k, v = random_qkv(b, h, s, s, head_dim, dtype, "cuda", seed=s)
        v[0, h - 1] += 100.0  # a head whose values differ wildly from its neighbours' shows any cross-head read
        out = at._attention_forward(q, k, v, causal, kernel="gluon")
        assert "gluon" in last_launch("attention")
        what = f"gluon B={b} H={h} S={s} D={head_dim} causal={causal}"
        assert_close(out, attention_ref(q, k, v, causal), dtype, what)


@pytest.mark.gpu
@on_hopper
def test_hopper_kernel_gpu_cross_lengths_and_scale(assert_close):
    q, k, v = random_qkv(2, 4, 192, 640, 128, torch.bfloat16, "cuda", seed=1)
    out = at._attention_forward(q, k, v, False, 0.3, kernel="gluon")
    assert_close(out, attention_ref(q, k, v, False, 0.3), torch.bfloat16, "gluon Sq=192 Sk=640 scale=0.3")


@pytest.mark.gpu
@on_hopper
def test_public_attention_takes_the_hopper_kernel_where_it_fits():
    q, k, v = random_qkv(1, 2, 256, 256, 128, torch.bfloat16, "cuda", seed=2)
    at.attention(q, k, v)
    assert "gluon Hopper kernel" in last_launch("attention")
    q, k, v = random_qkv(1, 2, 200, 200, 128, torch.bfloat16, "cuda", seed=3)
    at.attention(q, k, v)  # a length the Gluon kernel's blocks do not divide
    assert "gluon" not in last_launch("attention")
