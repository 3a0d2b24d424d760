"""Plugins and the library API: a user's ops and kernels measured beside the tiers, without touching tierbench.

The example under examples/plugin/ (a SwiGLU op of the user's and Triton kernels of a tier of their own) runs
through the real console command; broken plugins are clear errors; an entry point is found as installed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from cli_runner import tierbench_cli
from cpu_run import FAST, RUN_TIMING

import tierbench
from tierbench.suite.catalog import build
from tierbench.suite.plugins import PluginError
from tierbench.suite.store.reading import read_records

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "plugin"
SMALL = ["suite=smoke", *RUN_TIMING, "matmul.enabled=false", "attention.enabled=false", "decode.enabled=false",
         "pointwise.enabled=false", "model.enabled=false", "norm.kinds=[rms_norm]"]  # fmt: skip


@pytest.mark.slow
def test_the_example_installed_as_a_package_runs_through_run_measure_and_asv(tmp_path):
    """examples/plugin copied out of the project and installed (pip --target), found by its entry point alone:
    measured by `tierbench run` (its op forward and backward, its provider of tierbench's LayerNorm), by
    `tierbench.measure` and by asv's plugin class, in processes that start without TRITON_INTERPRET."""
    source, site, work, runs = (tmp_path / name for name in ("src", "site", "work", "runs"))
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    installed = subprocess.run([*pip, "--target", str(site), str(source)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH", "ASV_PYTHONPATH")}
    env.update(PYTHONPATH=str(site), HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(Path.home() / ".cache"))

    small = ["norm.kinds=[layer_norm]", "norm.modes=[fwd]", "norm.rows=[16]", "norm.hidden=[96]", *TINY_SWIGLU]
    providers = "providers=[eager,compile,my-layernorm,my-swiglu]"
    result = _cli("run", *SMALL, *small, providers, f"results_dir={runs}", cwd=work, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = list(runs.iterdir())
    records = {(r.op, r.mode, r.provider): r for r in read_records(run_dir)}
    for mode in ("fwd", "bwd"):
        for provider in ("eager", "compile"):
            assert records[("swiglu", mode, provider)].status == "ok"
    # The user's Triton kernels: checked through the interpreter (own code, a tier of their own), not timed;
    # the backward through the kernel's own autograd.Function, both gradients checked.
    for key in (("layer_norm", "fwd", "my-layernorm"), ("swiglu", "fwd", "my-swiglu"), ("swiglu", "bwd", "my-swiglu")):
        r = records[key]
        assert r.tier == "my-triton" and r.own_code and r.rel_error is not None and r.rel_error < 1e-2
        assert r.status == "skipped" and r.reason.startswith("correct, not timed")
    assert set(records[("swiglu", "bwd", "my-swiglu")].errors) == {"dgate", "dup"}
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["plugins"] == ["bench_plugin"] and meta["views"]["swiglu"]["metric"] == "gbps"
    assert meta["tiers"]["my-triton"]["own_code"] is True

    summary = _cli("summary", str(run_dir), cwd=work, env=env, timeout=120)
    assert summary.returncode == 0 and "### swiglu (bwd)" in summary.stdout and "my-triton" in summary.stdout
    html = tmp_path / "html"
    site_build = _cli("report", "--runs", str(runs), "--out", str(html), cwd=work, env=env, timeout=300)
    assert site_build.returncode == 0, site_build.stderr
    page = next((html / "devices").glob("*/swiglu.html")).read_text()
    assert "my-swiglu" in page and "elements (tokens × ffn)" in page

    script = [sys.executable, "-c", MEASURE_SWIGLU, json.dumps(dataclasses.asdict(FAST))]
    measured = subprocess.run(script, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert measured.returncode == 0, measured.stderr[-3000:]
    by_provider = json.loads(measured.stdout.splitlines()[-1])
    assert by_provider["mine"][:2] == ["ok", "mine"] and by_provider["eager"][0] == "ok"
    assert by_provider["my-swiglu"][:2] == ["skipped", "my-triton"]
    assert all(error < 1e-2 for _, _, error in by_provider.values())

    asv = _asv_plugin_class(tmp_path, env)
    assert asv.returncode == 0, asv.stdout[-3000:] + asv.stderr[-3000:]
    assert "failed" not in asv.stdout, asv.stdout[-3000:]
    for method in ("track_eager", "track_my_swiglu"):
        assert re.search(rf"plugins\.Plugins\.{method} +ok", asv.stdout), asv.stdout[-3000:]
    assert re.search(r"swiglu 64x96 bf16 bwd +n/a", asv.stdout), asv.stdout[-3000:]  # checked, not timed


def _cli(*args: str, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """The console command in exactly this environment (tierbench_cli adds the test process's own)."""
    exe = shutil.which("tierbench") or str(Path(sys.executable).parent / "tierbench")
    return subprocess.run([exe, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


TINY_SWIGLU = ["swiglu.tokens=[64]", "swiglu.ffn=[96]", "swiglu.modes=[fwd,bwd]"]
# tierbench.measure of a user's callable on the installed plugin's op, by name (the entry point loads it),
# beside eager and the plugin's own kernel, with the tests' timing (the JSON of its settings, the first argument);
# prints {provider: [status, tier, rel_error]}.
MEASURE_SWIGLU = """
import json, sys, torch, tierbench
from tierbench.timing import TimingSettings
fast = TimingSettings(**json.loads(sys.argv[1]))
def mine(gate, up):
    return torch.nn.functional.silu(gate.float()).to(gate.dtype) * up
records = tierbench.measure(mine, "swiglu", {"tokens": 64, "ffn": 96}, mode="bwd", device="cpu", timing=fast,
                            peers=["eager", "my-swiglu"])
print(json.dumps({r.provider: [r.status, r.tier, r.rel_error] for r in records}))
"""


def _asv_plugin_class(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Real asv over tierbench's benchmarks in the plugin author's own repository (a git one, asv's
    `existing` environment): the Plugins class, the example found by its entry point."""
    import tierbench.suite.benchmarks

    project = tmp_path / "project"
    project.mkdir()
    config = {
        "version": 1,
        "project": "my-kernels",
        "repo": ".",
        "branches": ["HEAD"],
        "environment_type": "existing",
        "benchmark_dir": str(Path(tierbench.suite.benchmarks.__file__).parent),
        "results_dir": "results",
        "html_dir": "html",
        "launch_method": "spawn",
    }
    (project / "asv.conf.json").write_text(json.dumps(config))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], cwd=project, check=True)
    asv_env = {
        **env,
        "ASV_PYTHONPATH": env["PYTHONPATH"],
        "TIERBENCH_ASV_SUITE": "swiglu",
        "TIERBENCH_ASV_OVERRIDES": " ".join(["providers=[eager,my-swiglu]", *TINY_SWIGLU]),
    }
    asv = [sys.executable, "-m", "asv"]
    subprocess.run([*asv, "machine", "--yes", "--machine", "cpu-test"], cwd=project, env=asv_env, check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    run = [*asv, "run", "--python=same", "--quick", "--dry-run", "--bench", "plugins", "--machine", "cpu-test"]
    return subprocess.run(run, cwd=project, env=asv_env, capture_output=True, text=True, timeout=900)


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

    params = {"rows": 512, "hidden": 96}

    def two_wrong_elements(x, weight, eps):
        out = _my_rms_norm(x, weight, eps)
        out[3, :2] = 0.0  # 2 of 49,152: the norm-wise error stays under 1e-2, the elementwise bound sees them
        return out

    kw = dict(device="cpu", timing=FAST, ceilings_dir=tmp_path, peers=["eager"])
    records = {r.provider: r for r in tierbench.measure(_my_rms_norm, "rms_norm", params, **kw)}
    assert records["mine"].status == "ok" and records["mine"].tier == "mine" and records["mine"].own_code
    assert records["eager"].status == "ok" and records["mine"].median_ms > 0
    (wrong,) = [r for r in tierbench.measure(two_wrong_elements, "rms_norm", params, **kw) if r.provider == "mine"]
    assert wrong.status == "incorrect" and "elementwise" in wrong.reason and wrong.rel_error < 1e-2
    with pytest.raises(ValueError, match="valid choices: .*rms_norm"):
        tierbench.measure(_my_rms_norm, "rmsnorm", params, **kw)
    with pytest.raises(ValueError, match="do not make a case of rms_norm"):
        tierbench.measure(_my_rms_norm, "rms_norm", {"rows": 4}, **kw)


def _my_swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(gate.float()).to(gate.dtype) * up


def test_the_library_api_measures_a_plugins_op_by_name_once_named_and_an_op_object_directly(monkeypatch):

    kw = dict(device="cpu", timing=FAST, peers=["eager"])
    params = {"tokens": 32, "ffn": 48}
    with pytest.raises(ValueError, match=r"op='swiglu' is not known; .*plugins=\[\.\.\.\]"):
        tierbench.measure(_my_swiglu, "swiglu", params, **kw)
    monkeypatch.chdir(EXAMPLE)  # a plugin in the current folder needs no install
    by_name = {r.provider: r for r in tierbench.measure(_my_swiglu, "swiglu", params, plugins=["bench_plugin"], **kw)}
    assert by_name["mine"].status == "ok" and by_name["mine"].op == "swiglu" and by_name["eager"].status == "ok"

    monkeypatch.syspath_prepend(str(EXAMPLE))
    import bench_plugin

    # No plugin named: the op object brings its own eager and compile (its formula) as peers.
    direct = {r.provider: r for r in tierbench.measure(_my_swiglu, bench_plugin.SWIGLU, params, **kw)}
    assert direct["mine"].status == "ok" and direct["eager"].status == "ok" and direct["mine"].rel_error < 1e-2
    with pytest.raises(ValueError, match="valid choices: eager, compile"):
        tierbench.measure(_my_swiglu, bench_plugin.SWIGLU, params, device="cpu", peers=["triton"])
    with pytest.raises(ValueError, match="name='eager' is one of the peers"):
        tierbench.measure(_my_swiglu, bench_plugin.SWIGLU, params, name="eager", **kw)


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


def test_the_plugin_reference_page_is_the_one_the_catalog_generates():
    """docs/plugins.md's public names and built-in op signatures are generated: regenerate them with
    `python -m tierbench.suite.op_reference --write docs/plugins.md` when this fails."""
    from tierbench.suite import op_reference

    page = (Path(__file__).resolve().parent.parent / "docs" / "plugins.md").read_text()
    for part, text in op_reference.generated_parts().items():
        assert op_reference.part_of(page, part) == text, f"docs/plugins.md's {part!r} part is stale"
    for helper in ("randn", "per_pass", "element_size", "positive", "choice_name", "plugin_tier", "builtin_op"):
        assert f"`tierbench.{helper}(" in page
    for op in build(entry_points=False).ops:
        assert f"### `{op}` (family" in page


def test_every_public_name_has_a_docstring_of_its_own():
    for name in tierbench.__all__[1:]:
        doc = getattr(tierbench, name).__doc__ or ""
        # a dataclass without one gets its generated signature as __doc__
        assert doc.strip() and not doc.startswith(f"{name}("), name


def test_a_plugins_family_has_a_suite_of_its_own_and_joins_the_others(monkeypatch):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tierbench.suite.commands.run_command import conf_dir
    from tierbench.suite.config import family_suites, register_configs
    from tierbench.suite.measure.plan import make_plan

    monkeypatch.chdir(EXAMPLE)
    catalog = build(["bench_plugin"], entry_points=False)
    register_configs(catalog.families)

    def plan(*overrides: str) -> set[str]:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
            cfg = compose(config_name="config", overrides=list(overrides))
        GlobalHydra.instance().clear()
        return {p.case.family for p in make_plan(cfg, catalog)}

    assert plan("suite=swiglu") == {"swiglu"}
    assert plan("suite=swiglu", "swiglu.tokens=[8]") == {"swiglu"}
    assert plan("suite=norm") == {"norm", "swiglu"}
    assert plan("suite=norm", "swiglu.enabled=false") == {"norm"}
    # A family named like a suite of conf/suite/ gets none of its own: the file stays what suite=training is.
    # (decode's is the built-in family's own declared suite.)
    named_like_a_suite = dataclasses.replace(catalog.family("swiglu"), name="training")
    assert [f.name for f in family_suites([*catalog.families, named_like_a_suite])] == ["decode", "swiglu"]


@pytest.mark.parametrize("name", ["declared-swiglu", "eager"])
def test_a_plugins_family_may_declare_its_providers_and_they_are_checked_as_the_plugins(tmp_path, monkeypatch, name):
    """Family.providers, as decode declares its own: from a plugin's family they join the plugin's providers,
    held to the same rules (here: a built-in provider's name is refused)."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    module = f"declaring_plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(
        "import dataclasses\nimport bench_plugin\nfrom tierbench.suite.providers.base import call_provider\n"
        "family = bench_plugin.FAMILIES[0]\n"
        f"mine = lambda ops: [call_provider({name!r}, 'vendor', ops[0], ops[0].formula)]\n"
        "FAMILIES = [dataclasses.replace(family, providers=mine)]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    if name == "eager":
        with pytest.raises(PluginError, match="provider 'eager' has the name of a built-in provider"):
            build([module], entry_points=False)
        return
    catalog = build([module], entry_points=False)
    assert [(p.name, p.op) for p in catalog.plugin_providers] == [("declared-swiglu", "swiglu")]
    assert ("declared-swiglu", "swiglu") in {(p.name, p.op) for p in catalog.providers()}
