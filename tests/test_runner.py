"""The runner on the CPU with real providers and small test providers: every outcome becomes a record."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import torch

from tierbench import interrupts
from tierbench.suite.measure.plan import PlannedCase
from tierbench.suite.measure.runner import is_oom, measure_case, run_plan
from tierbench.suite.ops import matmul
from tierbench.suite.providers import compiler, vendor
from tierbench.suite.providers.base import Provider, Unavailable
from tierbench.suite.store.reading import read_records
from tierbench.suite.store.records import Measurement

OP = matmul.OP
CASE = matmul.make_case(48, 40, 24, "fp32", "fwd", "48x40x24")


def _provider(name: str, prepare, why=None) -> Provider:
    kwargs = {"why_unavailable": why} if why else {}
    return Provider(name, "triton" if name != "eager" else "vendor", "matmul", prepare, **kwargs)


def _eager() -> Provider:
    return next(p for p in vendor.providers([OP]) if p.op == "matmul")


def test_each_outcome_is_recorded_and_only_correct_providers_are_timed(cpu_ctx):
    def raises(i, o, c):
        def call():
            raise RuntimeError("illegal memory access\nmore detail")

        return call

    def oom(i, o, c):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80 GiB")

    def wrong(i, o, c):
        return lambda: i["a"] @ i["b"] * 1.01

    def unsupported(i, o, c):
        raise Unavailable("head_dim 96 unsupported")

    providers = [
        _eager(),
        _provider("raises", raises),
        _provider("oom", oom),
        _provider("wrong", wrong),
        _provider("late-skip", unsupported),
        _provider("absent", wrong, why=lambda case, device: "package not installed: pip install x"),
    ]
    records = {r.provider: r for r in measure_case(CASE, providers, cpu_ctx, OP)}
    assert records["eager"].status == "ok" and records["eager"].median_ms > 0
    assert len(records["eager"].samples_ms) >= 4 and records["eager"].timer == "cpu-clock"
    assert records["eager"].rel_error < 1e-6 and 0 < records["eager"].sol
    assert records["eager"].tflops == pytest.approx(2 * 48 * 40 * 24 / records["eager"].median_ms / 1e9)
    assert records["raises"].status == "error" and records["raises"].reason == "RuntimeError: illegal memory access"
    assert records["oom"].status == "oom"
    assert records["wrong"].status == "incorrect" and records["wrong"].median_ms is None
    assert "exceeds the float32 tolerance" in records["wrong"].reason
    assert records["late-skip"].status == "skipped" and "head_dim 96" in records["late-skip"].reason
    assert records["absent"].status == "skipped" and "pip install x" in records["absent"].reason
    assert all(r.provider_version is None or isinstance(r.provider_version, str) for r in records.values())


def test_the_record_names_what_the_provider_launched_and_a_failing_description_costs_nothing(cpu_ctx):
    def ok(i, o, c):
        return lambda: i["a"] @ i["b"]

    def broken() -> str:
        raise KeyError("no launch log")

    described = Provider("described", "cuda", "matmul", ok, describe_launch=lambda: "ptr: BLOCK_M=64, warps=4")
    silent = Provider("silent", "cuda", "matmul", ok, describe_launch=broken)
    records = {r.provider: r for r in measure_case(CASE, [_eager(), described, silent], cpu_ctx, OP)}
    assert records["described"].status == "ok" and records["described"].launch == "ptr: BLOCK_M=64, warps=4"
    assert records["silent"].status == "ok" and records["silent"].launch is None
    assert records["eager"].launch is None
    assert Measurement.from_dict(json.loads(records["described"].to_json())).launch == "ptr: BLOCK_M=64, warps=4"


def test_run_plan_skips_what_is_done_and_appends_the_rest(tmp_path, cpu_ctx):
    ctx = cpu_ctx
    plan = [PlannedCase(CASE, OP, (_eager(),))]
    first = run_plan(plan, ctx)
    assert [r.status for r in first] == ["ok"]
    again = run_plan(plan, ctx)  # everything done: nothing measured twice
    assert again == []
    assert len(read_records(tmp_path)) == 1


@pytest.mark.parametrize("mode", ["bwd", "fwd_bwd"])
def test_backward_modes_check_every_gradient_and_time_the_pass(mode, cpu_ctx):
    case = matmul.make_case(48, 40, 24, "fp32", mode, "48x40x24")

    def wrong_grad_b(i, o, c):
        # Right forward, wrong dB: the gradient flowing to b is scaled by 1.01.
        a, b = i["a"], i["b"]
        return lambda: a @ (b * 1.01 - b.detach() * 0.01)

    def no_backward(i, o, c):
        a, b = i["a"].detach(), i["b"].detach()
        return lambda: a @ b

    providers = [
        _eager(),
        *compiler.providers([OP], ["default"]),
        _provider("wrong-db", wrong_grad_b),
        _provider("fwd-only", no_backward),
    ]
    records = {r.provider: r for r in measure_case(case, providers, cpu_ctx, OP)}
    for name in ("eager", "compile"):
        r = records[name]
        assert r.status == "ok" and r.median_ms > 0, r.reason
        expected = {"da", "db"} | ({"out"} if mode == "fwd_bwd" else set())
        assert set(r.errors) == expected and max(r.errors.values()) < 1e-6
        assert r.flops == (4 if mode == "bwd" else 6) * 48 * 40 * 24 and r.mode == mode
    assert records["wrong-db"].status == "incorrect" and records["wrong-db"].reason.startswith("db: ")
    assert records["wrong-db"].errors["da"] < 1e-6 and records["wrong-db"].errors["db"] > 1e-3
    assert records["fwd-only"].status == "skipped" and "no backward" in records["fwd-only"].reason


def test_a_provider_that_writes_into_its_inputs_is_marked_and_the_next_one_is_not_harmed(cpu_ctx):
    def halves_inputs(i, o, c):
        def call():
            i["a"].mul_(0.5)
            return i["a"] @ i["b"]

        return call

    providers = [_provider("in-place", halves_inputs), _eager()]
    records = {r.provider: r for r in measure_case(CASE, providers, cpu_ctx, OP)}
    assert records["in-place"].status == "error" and "wrote into its inputs (a)" in records["in-place"].reason
    assert records["eager"].status == "ok" and records["eager"].rel_error < 1e-6


def test_a_provider_raising_system_exit_gets_a_record_and_the_run_goes_on(cpu_ctx):
    def exits(i, o, c):
        def call():
            raise SystemExit(3)

        return call

    records = {r.provider: r for r in measure_case(CASE, [_provider("exits", exits), _eager()], cpu_ctx, OP)}
    assert records["exits"].status == "error" and records["exits"].reason.startswith("SystemExit")
    assert records["eager"].status == "ok"


class _OwnAbort(BaseException):
    """What a provider's library might raise: not an Exception, not an interrupt the process received."""


def test_a_provider_raising_any_base_exception_gets_a_record_and_the_run_goes_on(cpu_ctx):
    def raising(exc):
        def prepare(i, o, c):
            def call():
                raise exc

            return call

        return prepare

    calls = {"n": 0}

    def exits_while_timed(i, o, c):
        def call():
            calls["n"] += 1
            if calls["n"] > 2:  # the two checked calls pass; the timer's calls do not
                raise SystemExit("library called sys.exit")
            return i["a"] @ i["b"]

        return call

    providers = [
        _provider("own-interrupt", raising(KeyboardInterrupt())),
        _provider("own-abort", raising(_OwnAbort("stop"))),
        Provider("exits-while-timed", "vendor", "matmul", exits_while_timed),  # a tier timed on a CPU
        _eager(),
    ]
    try:
        with interrupts.watch():  # as in `tierbench run`: only a SIGINT the process received is an interrupt
            records = {r.provider: r for r in measure_case(CASE, providers, cpu_ctx, OP)}
    except BaseException as exc:  # noqa: BLE001 - reported as this test's failure, not pytest's interrupt
        pytest.fail(f"a provider's own {type(exc).__name__} ended the run: {exc!r}")
    assert records["own-interrupt"].status == "error" and records["own-interrupt"].reason.startswith(
        "KeyboardInterrupt"
    )
    assert records["own-abort"].status == "error" and records["own-abort"].reason == "_OwnAbort: stop"
    timed = records["exits-while-timed"]
    assert timed.status == "error" and timed.reason == "while timing: SystemExit: library called sys.exit"
    assert records["eager"].status == "ok" and records["eager"].median_ms > 0


def test_a_real_interrupt_still_ends_the_run(cpu_ctx):
    def interrupted(i, o, c):
        def call():
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C would, while the provider runs
            time.sleep(1)
            return i["a"] @ i["b"]

        return call

    with interrupts.watch(), pytest.raises(KeyboardInterrupt):
        list(measure_case(CASE, [_provider("ctrl-c", interrupted), _eager()], cpu_ctx, OP))


def test_an_allocation_the_cpu_cannot_make_is_oom(cpu_ctx):
    def four_terabytes(i, o, c):
        buffer = torch.empty(1 << 42, dtype=torch.uint8)  # 4 TiB: more than this machine has
        return lambda: buffer

    (record,) = measure_case(CASE, [_provider("huge", four_terabytes)], cpu_ctx, OP)
    if record.status == "incorrect":
        pytest.skip("this machine's allocator handed out 4 TiB (overcommit), so nothing failed")
    assert record.status == "oom", record.reason
    assert "can't allocate memory" in record.reason


@pytest.mark.parametrize(
    "message",
    [
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
        "allocate 4398046511104 bytes. Error code 12 (Cannot allocate memory)",
        "CUDA out of memory. Tried to allocate 80.00 GiB",
        "not enough memory: you tried to allocate 4398046511104 bytes.",
    ],
)
def test_allocator_failures_are_out_of_memory(message):
    assert is_oom(RuntimeError(message))
    assert not is_oom(RuntimeError("illegal memory access"))


def test_a_provider_checked_but_not_timed_on_a_cpu_runs_its_pass_once(monkeypatch, cpu_ctx):
    """Triton's interpreter: its one run is the check (no compile to keep out of a second one)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    calls = {"triton": 0, "wrong": 0}

    def counting(name, scale=1.0):
        def prepare(i, o, c):
            def call():
                calls[name] += 1
                return i["a"] @ i["b"] * scale

            return call

        return prepare

    interpreted = Provider("triton", "triton", "matmul", counting("triton"))
    wrong = Provider("wrong", "triton", "matmul", counting("wrong", 1.01))
    records = {r.provider: r for r in measure_case(CASE, [interpreted, wrong], cpu_ctx, OP)}
    assert calls == {"triton": 1, "wrong": 1}
    assert records["triton"].status == "skipped" and "correct, not timed" in records["triton"].reason
    assert records["triton"].rel_error < 1e-6
    assert records["wrong"].status == "incorrect"  # the single run is checked all the same
