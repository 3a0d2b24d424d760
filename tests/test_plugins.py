"""Plugins and the library API: a user's ops and kernels measured beside the tiers, without touching tierbench.

The example under examples/plugin/ (a SwiGLU op of the user's and Triton kernels of a tier of their own) runs
through the real console command; broken plugins are clear errors; an entry point is found as installed.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch
from cli_runner import tierbench_cli

import tierbench
from tierbench.suite.catalog import build
from tierbench.suite.plugins import PluginError
from tierbench.suite.records import read_records

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "plugin"
SMALL = ["suite=smoke", "timing=quick", "matmul.enabled=false", "attention.enabled=false", "decode.enabled=false",
         "norm.kinds=[rms_norm]"]  # fmt: skip


@pytest.mark.slow
def test_the_example_plugin_runs_beside_eager_and_compile_and_shows_in_summary_and_report(tmp_path):
    runs = tmp_path / "runs"
    args = [*SMALL, "plugins=[bench_plugin]", "swiglu.modes=[fwd,bwd]", f"results_dir={runs}"]
    result = tierbench_cli("run", *args, f"ceilings_dir={tmp_path}/ceilings", cwd=EXAMPLE, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = list(runs.iterdir())
    records = {(r.op, r.mode, r.provider): r for r in read_records(run_dir)}
    for mode in ("fwd", "bwd"):
        for provider in ("eager", "compile"):
            assert records[("swiglu", mode, provider)].status == "ok"
    # The user's Triton kernels: checked (their own tier, own code), not timed under the interpreter.
    for key in (("rms_norm", "fwd", "my-rmsnorm"), ("swiglu", "fwd", "my-swiglu")):
        r = records[key]
        assert r.tier == "mine" and r.own_code and r.rel_error is not None and r.rel_error < 1e-2
        assert r.status == "skipped" and "TRITON_INTERPRET=1" in r.reason
    assert records[("swiglu", "bwd", "my-swiglu")].reason.endswith("its output takes no gradient")
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["plugins"] == ["bench_plugin"] and meta["views"]["swiglu"]["metric"] == "gbps"
    assert meta["tiers"]["mine"]["own_code"] is True

    summary = tierbench_cli("summary", str(run_dir), cwd=tmp_path, timeout=120)
    assert summary.returncode == 0 and "### swiglu (bwd)" in summary.stdout and "mine (GB/s)" in summary.stdout
    site = tierbench_cli("report", "--runs", str(runs), "--out", str(tmp_path / "html"), cwd=tmp_path, timeout=300)
    assert site.returncode == 0, site.stderr
    page = next((tmp_path / "html" / "devices").glob("*/swiglu.html")).read_text()
    assert "my-swiglu" in page and "elements (tokens × ffn)" in page


@pytest.mark.parametrize(
    "source, expected",
    [
        (None, "no module named 'no_such_plugin'"),
        ("raise RuntimeError('boom')", "failed at import: RuntimeError: boom"),
        ("import tierbench\nPROVIDERS = []", "defines none of FAMILIES, PROVIDERS, TIERS"),
        (
            "from tierbench.suite.ops.norm import RMS_NORM\nfrom tierbench.suite.providers.base import call_provider\n"
            "PROVIDERS = [call_provider('x', 'gpu-tier', RMS_NORM, lambda x, w, eps: x)]",
            "provider 'x' names tier 'gpu-tier'; tiers: vendor, compiler, triton, cuda",
        ),
        (
            "from tierbench.suite.ops.norm import RMS_NORM\nfrom tierbench.suite.providers.base import call_provider\n"
            "PROVIDERS = [call_provider('eager', 'vendor', RMS_NORM, lambda x, w, eps: x)]",
            "provider 'eager' has the name of a built-in provider",
        ),
        (
            # A name of a compile mode the run did not ask for is a built-in's name all the same.
            "from tierbench.suite.ops.norm import RMS_NORM\nfrom tierbench.suite.providers.base import call_provider\n"
            "PROVIDERS = [call_provider('compile-max-autotune', 'vendor', RMS_NORM, lambda x, w, eps: x)]",
            "provider 'compile-max-autotune' has the name of a built-in provider",
        ),
        ("import sys\nsys.exit(0)", "called sys.exit(0) at import"),
        ("def PROVIDERS():\n    raise SystemExit(4)", "PROVIDERS() called sys.exit(4)"),
        *[
            (
                "import dataclasses\nfrom tierbench.suite.ops import norm\n"
                f"FAMILIES = [dataclasses.replace(norm.FAMILY, name={key!r})]",
                f"op family {key!r} would take the run's own config key {key!r}; the run's keys: ",
            )
            for key in ("metrics", "devices", "shard", "time_limit_s")
        ],
        (
            "from tierbench.suite.tiers import plugin_tier\nimport dataclasses\n"
            "TIERS = [dataclasses.replace(plugin_tier('mine'), color='#zzzzzz')]",
            "tier 'mine' has color '#zzzzzz'; give a hex color",
        ),
        (
            "from tierbench.suite.tiers import plugin_tier\nimport dataclasses\n"
            "TIERS = [dataclasses.replace(plugin_tier('mine'), color='red;background:url(x)')]",
            "tier 'mine' has color 'red;background:url(x)'",
        ),
    ],
)
def test_a_broken_plugin_is_a_clear_error_naming_it(tmp_path, monkeypatch, source, expected):
    name = "no_such_plugin" if source is None else f"broken_plugin_{tmp_path.name.replace('-', '_')}"
    if source is not None:
        (tmp_path / f"{name}.py").write_text(source + "\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PluginError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        build([name], entry_points=False)


@pytest.mark.slow
@pytest.mark.parametrize(
    "source, expected",
    [
        ("raise ImportError('needs a GPU library')", "plugin 'broken_plugin' failed at import"),
        ("import sys\nsys.exit(0)", "plugin 'broken_plugin' called sys.exit(0) at import"),
        (
            "import dataclasses\nfrom tierbench.suite.ops import norm\n"
            "FAMILIES = [dataclasses.replace(norm.FAMILY, name='metrics')]",
            "plugin 'broken_plugin': op family 'metrics' would take the run's own config key 'metrics'",
        ),
    ],
)
def test_a_broken_plugin_on_the_command_line_exits_2_without_a_traceback(tmp_path, source, expected):
    (tmp_path / "broken_plugin.py").write_text(source + "\n")
    result = tierbench_cli("run", "plugins=[broken_plugin]", f"results_dir={tmp_path}/runs", cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "runs").exists()


def test_an_installed_entry_point_is_loaded(tmp_path, monkeypatch):
    """A distribution that names a module under the tierbench.plugins group: found through its metadata."""
    site = tmp_path / "site"
    (site / "demo_tiers").mkdir(parents=True)
    (site / "demo_tiers" / "__init__.py").write_text(
        "from tierbench.suite.tiers import plugin_tier\nTIERS = [plugin_tier('demo', 'a demo tier')]\n"
    )
    info = site / "demo_tiers-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-tiers\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tierbench.plugins]\ndemo = demo_tiers\n")
    monkeypatch.syspath_prepend(str(site))
    catalog = build()
    assert "demo" in catalog.tiers and [p.name for p in catalog.plugins] == ["demo_tiers"]


def _my_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * weight


def test_the_library_api_checks_and_times_a_users_callable(tmp_path):
    from tierbench.timing import TimingSettings

    fast = TimingSettings(warmup_ms=1, rep_ms=2, rounds=2, min_reps=2, max_reps=5, flush_l2=False)
    params = {"rows": 512, "hidden": 96}

    def two_wrong_elements(x, weight, eps):
        out = _my_rms_norm(x, weight, eps)
        out[3, :2] = 0.0  # 2 of 49,152: the norm-wise error stays under 1e-2, the elementwise bound sees them
        return out

    kw = dict(device="cpu", timing=fast, ceilings_dir=tmp_path, peers=["eager"])
    records = {r.provider: r for r in tierbench.measure(_my_rms_norm, "rms_norm", params, **kw)}
    assert records["mine"].status == "ok" and records["mine"].tier == "mine" and records["mine"].own_code
    assert records["eager"].status == "ok" and records["mine"].median_ms > 0
    (wrong,) = [r for r in tierbench.measure(two_wrong_elements, "rms_norm", params, **kw) if r.provider == "mine"]
    assert wrong.status == "incorrect" and "elementwise" in wrong.reason and wrong.rel_error < 1e-2
    with pytest.raises(ValueError, match="valid choices: .*rms_norm"):
        tierbench.measure(_my_rms_norm, "rmsnorm", params, **kw)
    with pytest.raises(ValueError, match="do not make a case of rms_norm"):
        tierbench.measure(_my_rms_norm, "rms_norm", {"rows": 4}, **kw)


def test_the_packages_api_names_load_lazily():
    code = textwrap.dedent(
        """
        import sys, tierbench
        assert "torch" not in sys.modules, "import tierbench must stay light"
        assert tierbench.__version__ and callable(tierbench.measure) and tierbench.Op and tierbench.Provider
        print("ok")
        """
    )
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
