"""A built-in op family is declared as a plugin's is: its module says everything. No hand-listed asv class
(its class is made from the catalog, one line), no guard in another suite's file (a family's schema defaults
make no case), and its own `suite=<family>` with its help comes from its declaration (Family.suite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

import tierbench.conf
from tierbench.suite.commands.run_help import declared_help, suites_help
from tierbench.suite.measure.plan import planned_cases
from tierbench.suite.ops import builtin_families

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "suite" / "benchmarks"
CONF = Path(tierbench.conf.__file__).parent
SUITE_FILES = sorted((CONF / "suite").glob("*.yaml"))

# asv's own discovery of the benchmark folder, in a process of its own (it imports the folder as the top-level
# package `benchmarks`): per benchmark, its class's family, its setup_cache key, and which function made it.
DISCOVER = """
import json, os, sys
from asv_runner.discovery import disc_benchmarks
root = sys.argv[1]
sys.path.insert(0, os.path.dirname(root))
out = {}
for b in disc_benchmarks(root):
    cls = type(b.func.__self__)
    out[b.name] = {"family": cls.family, "where": cls.where, "key": b.setup_cache_key,
                   "made_by": b.func.__func__.__qualname__, "params": b.params}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def discovered(tmp_path_factory) -> dict[str, dict]:
    """asv's discovery of suite/benchmarks with the CPU's asv suite (smoke), in an empty working folder."""
    cwd = tmp_path_factory.mktemp("asv-discovery")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERBENCH_ASV")}
    run = subprocess.run(
        [sys.executable, "-c", DISCOVER, str(BENCHMARKS)], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_every_track_method_is_made_from_the_catalog_none_by_hand(discovered):
    """A family needs no list of providers: every asv benchmark is a track method `finish_class` made."""
    assert discovered
    hand_written = {name: b["made_by"] for name, b in discovered.items() if b["made_by"] != "_track.<locals>.track"}
    assert not hand_written


def test_every_builtin_family_with_smoke_cases_has_a_class_and_each_class_a_cache_of_its_own(discovered):
    families = {b["family"] for b in discovered.values()}
    smoke = set(yaml.safe_load((CONF / "suite" / "smoke.yaml").read_text())) & {f.name for f in builtin_families()}
    assert smoke <= families
    # asv keys a setup_cache by module and source line: two classes on one key would share one measurement.
    classes = {name.rsplit(".", 1)[0]: b["key"] for name, b in discovered.items()}
    assert len(set(classes.values())) == len(classes), classes


def test_the_one_line_family_classes_keep_their_series_names(discovered):
    """asv names a series `<module>.<Class>.<method>`: the generated classes keep the names of the classes
    they replaced (module and class named after the family)."""
    for family, cls in (("decode", "Decode"), ("pointwise", "Pointwise"), ("model", "Model")):
        names = [n for n, b in discovered.items() if b["family"] == family]
        assert names and all(n.startswith(f"{family}.{cls}.track_") for n in names), family


def test_family_class_tracks_any_builtin_familys_runnable_providers(compose, catalog, monkeypatch, tmp_path):
    """The one-line declaration works for every built-in family: its class's methods are the catalog's
    providers that run one of its cases here, with no list anywhere."""
    from tierbench.suite.benchmarks import _cases, _harness, _settings
    from tierbench.suite.measure.plan import make_plan, resolve_device

    monkeypatch.setenv(_settings.SUITE_ENV, "smoke")
    monkeypatch.delenv(_settings.OVERRIDES_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    for cached in (_cases.catalog, _cases.compose_config, _cases.planned_suite):
        cached.cache_clear()
    try:
        cfg = compose(["suite=smoke", "timing=quick"])
        device = resolve_device(cfg.device)
        plan = [p for p in make_plan(cfg, catalog) if not p.part_of]
        for family in builtin_families():
            runnable = {
                _harness.method_name(p.name)
                for planned in plan
                if planned.case.family == family.name
                for p in planned.providers
                if p.why_unavailable(planned.case, device) is None
            }
            cls = _harness.family_class(family.name, f"declared_in_a_test.{family.name}")
            assert cls.__name__ == _harness.class_name(family.name) and cls.family == family.name
            tracked = {name for name in vars(cls) if name.startswith("track_")}
            assert tracked == runnable and tracked, family.name
    finally:
        for cached in (_cases.catalog, _cases.compose_config, _cases.planned_suite):
            cached.cache_clear()


def test_a_module_declares_one_family_class():
    """Two generated classes of one module would share asv's setup_cache key (module and source line)."""
    from tierbench.suite.benchmarks._harness import family_class

    family_class("plugins", "declared_in_a_test.twice")
    family_class("plugins", "declared_in_a_test.twice")  # the same declaration again: a module imported anew
    with pytest.raises(ValueError, match="second family class .*'decode'.* a module of its own"):
        family_class("decode", "declared_in_a_test.twice")


def _named_families(path: Path, families: set[str]) -> set[str]:
    """The families a suite file names: its sections and its `/shapes/<family>@<family>` defaults."""
    data = yaml.safe_load(path.read_text()) or {}
    named = {key for key in data if key in families}
    for entry in data.get("defaults", []):
        if isinstance(entry, str) and "@" in entry:
            named.add(entry.rsplit("@", 1)[1])
    return named


@pytest.mark.parametrize("path", SUITE_FILES, ids=[p.stem for p in SUITE_FILES])
def test_no_suite_file_guards_a_family_it_does_not_measure(path, compose, catalog):
    """A suite file names only the families it measures, and none of them is switched off there: a family
    added later plans no case in it (its schema defaults make none) without a line in this file."""
    families = {f.name for f in builtin_families()}
    data = yaml.safe_load(path.read_text()) or {}
    guards = [k for k in data if k in families and isinstance(data[k], dict) and data[k].get("enabled") is False]
    assert not guards, f"{path.name} switches off {guards}"
    named = _named_families(path, families)
    overrides = [f"suite={path.stem}"] + (["model=tiny"] if path.stem == "model" else [])
    planned = {case.family for case, _, part_of in planned_cases(compose(overrides), catalog) if not part_of}
    assert planned <= named, f"{path.name} plans cases of {planned - named}, which it does not name"


def test_no_schema_default_makes_a_case(catalog):
    """Why no guard is needed: every built-in family's section at its defaults asks for nothing."""
    for family in builtin_families():
        assert family.cases(family.schema()) == [], family.name


def test_a_declared_suite_is_the_familys_shapes_alone_with_its_help(compose, catalog):
    declared = [f for f in builtin_families() if f.suite is not None]
    assert "decode" in {f.name for f in declared}
    files = {p.stem for p in SUITE_FILES}
    suites = suites_help(CONF, catalog.families)
    for family in declared:
        assert family.name not in files, f"{family.name}: a declared suite and a file conf/suite/{family.name}.yaml"
        shapes = CONF / "shapes" / f"{family.name}.yaml"
        assert shapes.is_file(), f"{family.name} declares a suite but has no {shapes.name} in conf/shapes/"
        cfg = compose([f"suite={family.name}"])
        assert cfg.suite == family.name
        section = yaml.safe_load(shapes.read_text())
        composed = OmegaConf.to_container(cfg[family.name], resolve=True, enum_to_str=True)
        assert {k: composed[k] for k in section} == section
        planned = planned_cases(cfg, catalog)
        assert planned and {case.family for case, _, _ in planned} == {family.name}
        assert suites[family.name] == declared_help(family) and family.suite.help


def test_run_help_lists_a_declared_suite_among_the_files(catalog):
    from tierbench.suite.commands.run_help import render

    text = render(CONF, catalog)
    groups = next(line for line in text.splitlines() if line.startswith("  suite=   "))
    names = groups.split("=", 1)[1].strip().split(", ")
    assert "decode" in names and names == sorted(names)
    decode = next(f for f in builtin_families() if f.name == "decode")
    assert f"      {decode.suite.help}" in text and decode.suite.on_h200 in text


def test_a_plugins_family_may_describe_its_suite_in_the_help(monkeypatch):
    import dataclasses

    from tierbench.suite.catalog import build
    from tierbench.suite.commands.run_help import render
    from tierbench.suite.ops.base import FamilySuite

    monkeypatch.chdir(REPO / "examples" / "plugin")
    catalog = build(["bench_plugin"], entry_points=False)
    plain = render(CONF, catalog)
    assert "      the plugins' swiglu family alone (its section's shapes)" in plain
    described = FamilySuite("SwiGLU at a few FFN widths", on_cpu="1 min", on_h200="not yet measured")
    index = next(i for i, f in enumerate(catalog.families) if f.name == "swiglu")
    catalog.families[index] = dataclasses.replace(catalog.families[index], suite=described)
    text = render(CONF, catalog)
    assert "      SwiGLU at a few FFN widths" in text and "the plugins' swiglu family alone" not in text
    assert next(line for line in text.splitlines() if line.startswith("  swiglu ")).split() == [
        "swiglu",
        "1",
        "min",
        "not",
        "yet",
        "measured",
    ]


def test_a_kernel_joins_by_its_modules_declaration():
    """kernels/__init__.py names no kernel module: each public module declares its kernels (EXPORTS), the
    package gathers them, and every op's kernel is among them with its dtypes and launch log."""
    import ast

    import tierbench.kernels as kernels

    init = ast.parse((REPO / "kernels" / "__init__.py").read_text())
    relative = [n.module for n in ast.walk(init) if isinstance(n, ast.ImportFrom) and n.level]
    assert relative == ["_common"], relative  # only the Export record itself
    wanted = {op.kernel for family in builtin_families() for op in family.ops if op.kernel}
    assert wanted and wanted <= set(kernels.DTYPES) == set(kernels.LAUNCH_LOGS) == set(kernels.__all__[3:])
    for name in kernels.DTYPES:
        function = getattr(kernels, name)
        assert callable(function) and function.__module__.startswith("tierbench.kernels."), name
