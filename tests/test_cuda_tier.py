"""The cuda tier on a CPU: which providers exist, why each cannot run here, and the rules each package states.

No package internals are mocked: on this machine flash-attn and quack are absent, so their providers must say
so by pip name; the per-package rules are pure functions of (compute capability, dtype, head_dim).
"""

from __future__ import annotations

import importlib.metadata
import json

import pytest
import torch

from tierbench.suite.catalog import build
from tierbench.suite.measure.runner import measure_case
from tierbench.suite.ops.base import Case
from tierbench.suite.providers import cuda_tier
from tierbench.suite.providers.cuda_flash_attn import (
    flash_attn_2_rule,
    flash_attn_3_rule,
    flash_attn_4_backward_rule,
    flash_attn_4_rule,
)
from tierbench.suite.providers.cuda_packages import device_problem, import_problem, package_version_of
from tierbench.suite.providers.cuda_quack import quack_backward_problem, quack_rule

CPU = torch.device("cpu")
CATALOG = build(entry_points=False)
OPS = list(CATALOG.ops.values())


def _attention(head_dim: int = 16, dtype: str = "fp32", causal: bool = False) -> Case:
    params = {"batch": 1, "heads": 2, "seq": 32, "head_dim": head_dim, "causal": causal, "dtype": dtype, "mode": "fwd"}
    return Case("attention", "attention", params, f"B1 H2 S32 D{head_dim}", x=32.0)


def _norm(op: str) -> Case:
    return Case(op, "norm", {"rows": 8, "hidden": 64, "dtype": "fp32", "mode": "fwd"}, "8x64", x=512.0)


def _installed(module: str) -> bool:
    return import_problem(module, "") is None


def _by_name(op: str) -> dict[str, cuda_tier.Provider]:
    return {p.name: p for p in cuda_tier.providers(OPS) if p.op == op}


# --- The tier's shape ---------------------------------------------------------------------------------------


def test_providers_cover_three_flash_attn_generations_quack_norms_and_quack_fp8():
    listed = [(p.name, p.tier, p.op, p.package) for p in cuda_tier.providers(OPS)]
    assert listed == [
        ("flash-attn-2", "cuda", "attention", "flash-attn"),
        ("flash-attn-3", "cuda", "attention", "flash-attn-3"),
        ("flash-attn-4", "cuda", "attention", "flash-attn-4"),
        ("quack", "cuda", "rms_norm", "quack-kernels"),
        ("quack", "cuda", "layer_norm", "quack-kernels"),
        ("quack", "cuda", "matmul_fp8", "quack-kernels"),
    ]
    names = {(p.name, p.op) for p in CATALOG.providers()}
    assert {("flash-attn-4", "attention"), ("quack", "layer_norm")} <= names


def test_flash_attn_output_is_viewed_back_in_the_ops_layout():
    packaged = torch.arange(2 * 5 * 3 * 4.0).reshape(2, 5, 3, 4)  # (batch, seq, heads, head_dim)
    viewed = _by_name("attention")["flash-attn-4"].to_op_layout(packaged)
    assert viewed.shape == (2, 3, 5, 4) and torch.equal(viewed[1, 2, 4], packaged[1, 4, 2])


# --- Reasons on this machine --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, module, pip_words",
    [
        ("flash-attn-2", "flash_attn.flash_attn_interface", "pip install flash-attn --no-build-isolation"),
        ("flash-attn-3", "flash_attn_interface", "cd hopper && python setup.py install"),
        ("flash-attn-4", "flash_attn.cute", "pip install flash-attn-4"),
    ],
)
def test_absent_flash_attn_names_what_to_install(name, module, pip_words):
    if _installed(module):
        pytest.skip(f"{module} is installed here")
    reason = _by_name("attention")[name].why_unavailable(_attention(), CPU)
    assert reason.startswith(f"package not installed: {module} (ModuleNotFoundError")
    assert pip_words in reason and "Traceback" not in reason


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_absent_quack_names_what_to_install(op):
    if _installed("quack.rmsnorm"):
        pytest.skip("quack is installed here")
    reason = _by_name(op)["quack"].why_unavailable(_norm(op), CPU)
    assert reason.startswith("package not installed: quack.rmsnorm") and "pip install quack-kernels" in reason


def test_a_package_that_is_there_but_does_not_import_is_told_apart(tmp_path, monkeypatch):
    # A real module on sys.path whose own import fails, as a wheel without its compiled extension does.
    (tmp_path / "tierbench_broken_pkg.py").write_text("import tierbench_missing_extension_abc\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reason = import_problem("tierbench_broken_pkg", "pip install tierbench-broken-pkg")
    assert reason.startswith("package broken: tierbench_broken_pkg is installed but does not import")
    assert "tierbench_missing_extension_abc" in reason
    assert reason.endswith("reinstall: pip install tierbench-broken-pkg")
    assert import_problem("tierbench_no_such_pkg.sub", "pip install x") == (
        "package not installed: tierbench_no_such_pkg.sub (ModuleNotFoundError: No module named "
        "'tierbench_no_such_pkg'); pip install x"
    )
    assert import_problem("json", "pip install x") is None


def test_on_a_cpu_the_device_is_the_reason():
    assert device_problem(CPU) == "needs a CUDA GPU (running on cpu)"


def test_absent_packages_report_no_version():
    for provider in cuda_tier.providers(OPS):
        if not _installed(
            {
                "flash-attn-2": "flash_attn.flash_attn_interface",
                "flash-attn-3": "flash_attn_interface",
                "flash-attn-4": "flash_attn.cute",
                "quack": "quack.rmsnorm",
            }[provider.name]
        ):
            assert provider.version() is None


def test_version_lookup_tries_distributions_then_module_owner_then_imported_module():
    torch_version = importlib.metadata.version("torch")
    assert package_version_of(("tierbench-no-such-dist", "torch")) == torch_version
    assert package_version_of(("tierbench-no-such-dist",), owner_of="torch") == torch_version
    assert package_version_of(("tierbench-no-such-dist",), module="json") == json.__version__
    assert package_version_of(("tierbench-no-such-dist",), owner_of="tierbench_no_such_module") is None
    # Never imports to find a version: a module not yet imported gives nothing.
    assert package_version_of(("tierbench-no-such-dist",), module="tierbench_no_such_module") is None


# --- The packages' rules, as pure functions ----------------------------------------------------------------


@pytest.mark.parametrize(
    "rule, cc, dtype, head_dim, expected",
    [
        # flash-attn 2: Ampere and newer, 16-bit, head_dim up to 256 (any, padded inside the call).
        (flash_attn_2_rule, (8, 0), "bf16", 128, None),
        (flash_attn_2_rule, (9, 0), "fp16", 72, None),
        (flash_attn_2_rule, (12, 0), "fp16", 256, None),
        (flash_attn_2_rule, (7, 5), "fp16", 64, "compute capability 7.5 too old: flash-attn-2 needs 8.0 or newer"),
        (flash_attn_2_rule, (9, 0), "fp32", 64, "dtype fp32 unsupported: flash-attn-2 takes fp16 and bf16"),
        (flash_attn_2_rule, (9, 0), "bf16", 512, "head_dim 512 unsupported: flash-attn-2 takes head_dim up to 256"),
        # flash-attn 3: Ampere to Hopper, no Blackwell kernels; head_dim a multiple of 8 up to 256.
        (flash_attn_3_rule, (9, 0), "bf16", 256, None),
        (flash_attn_3_rule, (8, 6), "fp16", 64, None),
        (flash_attn_3_rule, (7, 0), "bf16", 64, "compute capability 7.0 too old: flash-attn-3 needs 8.0 or newer"),
        (
            flash_attn_3_rule,
            (10, 0),
            "bf16",
            64,
            "compute capability 10.0 not supported: flash-attn-3 has kernels "
            "for 8.x and 9.0 only (Hopper build); on Blackwell use flash-attn-4",
        ),
        (flash_attn_3_rule, (9, 0), "fp32", 64, "dtype fp32 unsupported: flash-attn-3 takes fp16 and bf16"),
        (
            flash_attn_3_rule,
            (9, 0),
            "bf16",
            72 + 4,
            "head_dim 76 unsupported: flash-attn-3 takes multiples of 8 up to 256",
        ),
        # flash-attn 4: per-arch head dims from flash_attn/cute/interface.py.
        (flash_attn_4_rule, (9, 0), "bf16", 256, None),
        (flash_attn_4_rule, (9, 0), "fp16", 192, None),
        (flash_attn_4_rule, (10, 0), "bf16", 128, None),
        (flash_attn_4_rule, (10, 3), "bf16", 256, None),
        (flash_attn_4_rule, (8, 0), "bf16", 256, None),
        (flash_attn_4_rule, (12, 0), "bf16", 192, None),
        (flash_attn_4_rule, (7, 5), "bf16", 64, "compute capability 7.5 too old: flash-attn-4 needs 8.0 or newer"),
        (flash_attn_4_rule, (9, 0), "fp32", 64, "dtype fp32 unsupported: flash-attn-4 takes fp16 and bf16"),
        (flash_attn_4_rule, (9, 0), "bf16", 60, "head_dim 60 unsupported: flash-attn-4 takes multiples of 8"),
        (
            flash_attn_4_rule,
            (9, 0),
            "bf16",
            320,
            "head_dim 320 unsupported: flash-attn-4 on 9.x takes multiples of 8 up to 256",
        ),
        (
            flash_attn_4_rule,
            (10, 0),
            "bf16",
            192,
            "head_dim 192 unsupported: flash-attn-4 on 10.x takes multiples of 8 up to 128, or 256",
        ),
        (
            flash_attn_4_rule,
            (8, 9),
            "bf16",
            256,
            "head_dim 256 unsupported: flash-attn-4 on 8.9 (SM80-MMA kernel, "
            "99 KB shared memory) takes multiples of 8 up to 192",
        ),
    ],
)
def test_flash_attn_rules(rule, cc, dtype, head_dim, expected):
    assert rule(cc, dtype, head_dim) == expected


def test_quack_rule():
    assert quack_rule((9, 0), "bf16") is None and quack_rule((10, 0), "fp32") is None
    assert quack_rule((8, 0), "bf16") == "compute capability 8.0 too old: quack needs 9.0 or newer"


def test_backward_rules_flash_attn_4_on_9_to_11_and_no_quack_layernorm_backward():
    assert flash_attn_4_backward_rule((9, 0), 128) is None and flash_attn_4_backward_rule((10, 0), 64) is None
    assert flash_attn_4_backward_rule((8, 0), 128) == (
        "no backward on compute capability 8.0: flash-attn-4's backward runs on 9.x to 11.x "
        "(its 8.x and 12.x kernels are forward only)"
    )
    assert flash_attn_4_backward_rule((12, 0), 64).startswith("no backward on compute capability 12.0")
    assert quack_backward_problem("rms_norm", "0.6.1") is None
    assert quack_backward_problem("layer_norm", "0.6.1") == (
        "no backward: quack-kernels 0.6.1 has a LayerNorm forward only (quack.rmsnorm.layernorm_fwd), "
        "no LayerNorm backward"
    )


def test_flash_attn_providers_declare_the_recomputing_backward():
    bwd = Case("attention", "attention", {**_attention(causal=True).params, "mode": "bwd"}, "t", 32.0)
    product = 2.0 * 1 * 2 * 32 * 32 * 16 / 2  # causal: the masked half is skipped
    for name in ("flash-attn-2", "flash-attn-3", "flash-attn-4"):
        provider = _by_name("attention")[name]
        assert provider.executed_flops(bwd) == 5 * product == CATALOG.ops["attention"].work(bwd).flops


# --- Through the runner -------------------------------------------------------------------------------------


def test_runner_records_cuda_tier_skips_with_reasons_and_goes_on(cpu_ctx):
    ctx = cpu_ctx
    math = next(p for p in CATALOG.providers() if p.name == "sdpa-math")
    providers = [*_by_name("attention").values(), math]
    records = {r.provider: r for r in measure_case(_attention(), providers, ctx, CATALOG.ops["attention"])}
    for name in ("flash-attn-2", "flash-attn-3", "flash-attn-4"):
        record = records[name]
        assert record.status == "skipped" and record.tier == "cuda" and record.median_ms is None
        assert record.reason == _by_name("attention")[name].why_unavailable(_attention(), CPU)
        assert record.reason.startswith(("package not installed", "needs a CUDA GPU"))
    assert records["sdpa-math"].status == "ok" and records["sdpa-math"].median_ms > 0

    eager = next(p for p in CATALOG.providers() if p.name == "eager" and p.op == "layer_norm")
    pair = [_by_name("layer_norm")["quack"], eager]
    norm = {r.provider: r for r in measure_case(_norm("layer_norm"), pair, ctx, CATALOG.ops["layer_norm"])}
    assert norm["quack"].status == "skipped" and norm["quack"].reason
    assert norm["eager"].status == "ok"
