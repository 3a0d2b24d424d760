"""The turn tuner: candidates timed in rotating turns, the fastest kept per key."""

import pytest
import torch
import triton
import triton.language as tl

from tierbench.kernels._tuning import TurnTuner, time_in_turns
from tierbench.timing import rotations


@triton.jit
def _scale_kernel(X, Y, n, factor, BLOCK: tl.constexpr, REPEAT: tl.constexpr):
    # y = x * factor, as REPEAT sums of x scaled back: REPEAT is a meta-parameter the tuner keys on.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in tl.static_range(REPEAT):
        acc += tl.load(X + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(Y + offs, (acc * (factor / REPEAT)).to(Y.dtype.element_ty), mask=ok)


def _configs() -> list[triton.Config]:
    return [triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128, 256) for w in (1, 2)]


def _grid(n: int):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


def test_each_turn_is_a_rotation_so_every_candidate_takes_every_place():
    orders = rotations(4, 4)
    assert orders[0] == [0, 1, 2, 3] and orders[1] == [1, 2, 3, 0]
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert all(sorted(o[place] for o in orders) == [0, 1, 2, 3] for place in range(4))  # each place, each once
    assert rotations(3, 7)[6] == [0, 1, 2]  # more turns than candidates: the rotation wraps


def test_tuner_prunes_with_the_named_arguments_and_keys_on_values_and_dtypes(device):
    seen = []

    def prune(configs, named_args, **meta):
        seen.append((named_args["n"], meta["REPEAT"]))
        return [c for c in configs if c.kwargs["BLOCK"] <= named_args["n"]] or configs[:1]

    tuner = TurnTuner(_scale_kernel, _configs(), key=["n", "REPEAT"], prune=prune)
    for n, dtype in [(100, torch.float32), (100, torch.float32), (100, torch.float16), (30, torch.float32)]:
        x = torch.randn(n, device=device).to(dtype)
        y = torch.empty_like(x)
        tuner[_grid(n)](x, y, n, 2.0, REPEAT=1)
        torch.testing.assert_close(y, x * 2)
        assert tuner.best_config in _configs()
    # One tuning per (n, REPEAT, dtypes): the repeated float32 call at n=100 reused its pick.
    assert seen == [(100, 1), (100, 1), (30, 1)]
    assert set(tuner.cache) == {(100, 1, "torch.float32", "torch.float32"), (100, 1, "torch.float16", "torch.float16"),
                                (30, 1, "torch.float32", "torch.float32")}  # fmt: skip
    assert tuner.cache[(30, 1, "torch.float32", "torch.float32")].kwargs["BLOCK"] == 64  # the only one it kept


@pytest.mark.gpu
def test_time_in_turns_ranks_calls_by_their_cost():
    x = torch.randn(1 << 24, device="cuda")
    out = torch.empty_like(x)
    calls = {"one copy": lambda: out.copy_(x), "four copies": lambda: [out.copy_(x) for _ in range(4)]}
    ms = time_in_turns(calls, x.device, turns=3, turn_ms=2.0)
    assert 3.0 < ms["four copies"] / ms["one copy"] < 5.0, ms


@pytest.mark.gpu
def test_tuner_keeps_the_candidate_with_the_lowest_median_and_reuses_it():
    n = 1 << 22
    x, y = torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
    tuner = TurnTuner(_scale_kernel, _configs(), key=["n", "REPEAT"], prune=lambda configs, named_args, **meta: configs)
    tuner[_grid(n)](x, y, n, 3.0, REPEAT=2)
    torch.testing.assert_close(y, x * 3)
    key = (n, 2, "torch.float32", "torch.float32")
    timings = tuner.timings[key]
    assert set(timings) == set(_configs()) and all(t > 0 for t in timings.values())
    assert tuner.cache[key] == tuner.best_config == min(timings, key=timings.get)
    tuner.timings.clear()
    tuner[_grid(n)](x, y, n, 3.0, REPEAT=2)  # cached: launched, not timed again
    assert tuner.timings == {} and tuner.best_config == tuner.cache[key]


@pytest.mark.gpu
def test_tuning_a_new_shape_inside_a_graph_capture_is_refused_clearly():
    n = 4096
    x, y = torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
    tuner = TurnTuner(_scale_kernel, _configs(), key=["n", "REPEAT"], prune=lambda configs, named_args, **meta: configs)
    tuner[_grid(n)](x, y, n, 2.0, REPEAT=1)  # tuned and compiled outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tuner[_grid(n)](x, y, n, 5.0, REPEAT=1)  # a tuned shape: captured like any launch
    with pytest.raises(RuntimeError, match="cannot be tuned while a CUDA graph is being captured"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            tuner[_grid(n // 2)](x, y, n // 2, 2.0, REPEAT=1)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 5)
