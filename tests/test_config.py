"""Config composition: every suite composes, overrides are typed, bad values name the valid choices."""

from __future__ import annotations

import pytest
from cli_runner import tierbench_cli

from tierbench.suite.plan import PlanError, cases_from_config, make_plan, resolve_device, select_providers


@pytest.mark.parametrize("suite", ["smoke", "matmul", "norm", "attention", "decode", "all", "nightly"])
def test_every_suite_composes_and_plans(compose, catalog, suite):
    cfg = compose([f"suite={suite}"])
    cases = [case for case, _ in cases_from_config(cfg, catalog)]
    assert cases, suite
    families = {c.family for c in cases}
    every = {"matmul", "norm", "attention", "decode"}
    expected = {"smoke": every, "all": every, "nightly": every}
    assert families == expected.get(suite, {suite})


def test_all_suite_covers_the_shapes_kernel_engineers_ask_for(compose, catalog):
    cases = [case for case, _ in cases_from_config(compose(["suite=all"]), catalog)]
    squares = {c.params["m"] for c in cases if c.op == "matmul" and c.params["m"] == c.params["n"] == c.params["k"]}
    assert squares == {512, 1024, 2048, 4096, 8192}
    llm = {c.label for c in cases if c.op == "matmul" and "llama" in c.label}
    assert {"llama3-8b.up T=16384", "llama3-70b.down T=16384"} <= llm
    hidden = {c.params["hidden"] for c in cases if c.family == "norm"}
    assert min(hidden) == 1024 and max(hidden) == 16384
    att = [c for c in cases if c.op == "attention"]
    assert {c.params["seq"] for c in att} == {512, 1024, 2048, 4096, 8192, 16384}
    assert all(c.params["batch"] * c.params["seq"] == 16384 for c in att)
    assert {c.params["head_dim"] for c in att} == {64, 128}
    assert {c.params["causal"] for c in att} == {True, False}
    assert {c.params["dtype"] for c in att} == {"fp16", "bf16"}
    assert len({c.case_id for c in cases}) == len(cases), "case ids must be unique"


def test_causal_override_selects_one_variant(compose, catalog):
    cases = [case for case, _ in cases_from_config(compose(["suite=attention", "attention.causal=true"]), catalog)]
    assert cases and all(c.params["causal"] for c in cases)


def test_timing_presets(compose):
    quick, precise = compose(["timing=quick"]).timing, compose(["timing=precise"]).timing
    assert quick.rounds < precise.rounds and quick.rep_ms < precise.rep_ms


def test_tiers_and_provider_filters(compose, catalog):
    names = {(p.tier, p.name) for p in select_providers(compose(["tiers=[vendor]"]), catalog)}
    assert names and all(t == "vendor" for t, _ in names)
    only = select_providers(compose(["providers=[sdpa-math]"]), catalog)
    assert {p.name for p in only} == {"sdpa-math"}
    with pytest.raises(PlanError, match="valid choices: .*sdpa-flash"):
        select_providers(compose(["providers=[sdpa-flashy]"]), catalog)
    with pytest.raises(PlanError, match=r"providers=\['eager'\] are not in the selected tiers"):
        select_providers(compose(["tiers=[triton]", "providers=[eager]"]), catalog)


def test_compile_modes_add_providers(compose, catalog):
    cfg = compose(["compiler.modes=[default,max_autotune]", "tiers=[compiler]"])
    assert {p.name for p in select_providers(cfg, catalog)} == {"compile", "compile-max-autotune"}


def test_plan_gives_each_case_the_providers_of_its_op(compose, catalog):
    for planned in make_plan(compose(["suite=smoke"]), catalog):
        assert planned.providers and planned.op.name == planned.case.op
        assert all(p.op == planned.case.op for p in planned.providers)


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda")


@pytest.mark.parametrize(
    "override, expected",
    [
        ("suite=nope", ["Could not find 'suite/nope'", "smoke", "attention"]),
        ("device=tpu", ["Invalid value 'tpu'", "auto, cuda, cpu"]),
        ("timing=fast", ["Could not find 'timing/fast'", "quick", "precise"]),
        ("atention.causal=true", ["Key 'atention' not in"]),
        ("tiers=[gpu]", ["tiers=['gpu'] not known", "vendor, compiler, triton, cuda"]),
        ("providers=[nope]", ["valid choices:", "sdpa-math"]),
    ],
)
def test_bad_overrides_exit_2_and_name_the_choices(tmp_path, override, expected):
    result = tierbench_cli("run", override, f"results_dir={tmp_path}/runs", cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    for text in expected:
        assert text in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), "no run folder on error"


def test_unknown_subcommand_names_the_valid_ones(tmp_path):
    result = tierbench_cli("benchmark", cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert "valid choices: run" in result.stderr


@pytest.mark.parametrize(
    "override, message",
    [
        ("norm.hidden=[0]", "norm.hidden=[0]: sizes must be whole numbers >= 1"),
        ("norm.rows=[-4]", "norm.rows=[-4]: sizes must be whole numbers >= 1"),
        ("matmul.square=[0]", "matmul.square=[0]: sizes must be whole numbers >= 1"),
        ("attention.tokens=0", "attention.tokens=0: sizes must be whole numbers >= 1"),
        ("attention.tokens=-512", "attention.tokens=-512: sizes must be whole numbers >= 1"),
        ("attention.seq_lens=[0]", "attention.seq_lens=[0]: sizes must be whole numbers >= 1"),
        ("attention.head_dims=[0]", "attention.head_dims=[0]: sizes must be whole numbers >= 1"),
        ("attention.head_dims=[3]", "attention.head_dims: 3 is not a multiple of 8"),
        ("attention.head_dims=[48]", "attention.model_dim=128 is not a multiple of head_dim=48"),
        ("attention.model_dim=0", "attention.model_dim=0: sizes must be whole numbers >= 1"),
        ("timing.rounds=0", "timing.rounds=0 is outside [1, 1000]"),
        ("timing.rounds=-1", "timing.rounds=-1 is outside [1, 1000]"),
        ("timing.rounds=1000000", "timing.rounds=1000000 is outside [1, 1000]"),
        ("timing.max_reps=0", "timing.max_reps=0 is outside [1, 100000]"),
        ("timing.min_reps=10", "timing.min_reps=10 exceeds timing.max_reps=5"),
        ("timing.rep_ms=-1", "timing.rep_ms=-1.0 is outside [0, 60000]"),
        ("timing.warmup_ms=1e12", "timing.warmup_ms=1000000000000.0 is outside [0, 60000]"),
        ("timing.steady_state_s=nan", "timing.steady_state_s=nan is outside [0, 600]"),
    ],
)
def test_values_that_cannot_work_are_refused_when_the_plan_is_made(compose, catalog, override, message):
    overrides = ["suite=smoke", override] + (["timing.max_reps=5"] if "min_reps" in override else [])
    with pytest.raises(PlanError) as caught:
        make_plan(compose(overrides), catalog)
    assert message in str(caught.value)


@pytest.mark.parametrize("override", ["norm.hidden=[0]", "timing.rounds=0"])
def test_a_value_that_cannot_work_exits_2_before_any_run_folder(tmp_path, override):
    result = tierbench_cli("run", override, f"results_dir={tmp_path}/runs", cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and override.split("=")[0] in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "runs").exists()
