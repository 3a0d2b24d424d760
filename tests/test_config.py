"""Config composition: every suite composes, overrides are typed, bad values name the valid choices."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import tierbench_cli

from tierbench.suite.measure.plan import PlanError, cases_from_config, make_plan, resolve_device, select_providers


@pytest.mark.parametrize(
    "suite", ["smoke", "matmul", "norm", "attention", "decode", "all", "nightly", "training", "model"]
)
def test_every_suite_composes_and_plans(compose, catalog, suite):
    cfg = compose([f"suite={suite}", *(["model=llama3-8b"] if suite == "model" else [])])
    cases = [case for case, _ in cases_from_config(cfg, catalog)]
    assert cases, suite
    families = {c.family for c in cases}
    every = {"matmul", "norm", "attention", "decode"}
    # A model's block brings its parts, cases of every family but its own.
    with_model = every | {"pointwise", "model"}
    expected = {"smoke": with_model, "all": every | {"pointwise"}, "nightly": every, "training": every - {"decode"}}
    assert families == expected.get(suite, {suite} if suite != "model" else with_model)


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


def test_smoke_suite_runs_every_op_in_every_pass(compose, catalog):
    cases = [case for case, _ in cases_from_config(compose(["suite=smoke"]), catalog)]
    ops = [op for family in catalog.families for op in family.ops]
    # An op with no backward (the FP8 product) runs its forward; every other op all three passes; a model's
    # block the passes of its phases (prefill and decode forward, training fwd_bwd).
    blocks = {op.name for op in ops if op.parts}
    expected = {(op.name, m) for op in ops for m in (("fwd", "bwd", "fwd_bwd") if op.grads else ("fwd",))}
    expected = {(op, m) for op, m in expected if op not in blocks} | {("llama_block", "fwd_bwd")}
    expected |= {(name, "fwd") for name in blocks}
    assert {(c.op, c.mode) for c in cases} == expected
    assert sum(bool(op.grads) for op in ops) >= 6


def test_the_forward_stays_the_default_pass_of_the_other_suites(compose, catalog):
    for suite in ("matmul", "norm", "attention", "all"):
        assert {c.mode for c, _ in cases_from_config(compose([f"suite={suite}"]), catalog)} == {"fwd"}, suite
    cases = [c for c, _ in cases_from_config(compose(["suite=all", "norm.modes=[fwd,bwd]"]), catalog)]
    assert {c.mode for c in cases if c.family == "norm"} == {"fwd", "bwd"}
    assert {c.mode for c in cases if c.family != "norm"} == {"fwd"}


def test_training_suite_runs_three_passes_at_the_training_shapes(compose, catalog):
    cases = [case for case, _ in cases_from_config(compose(["suite=training"]), catalog)]
    assert {c.mode for c in cases} == {"fwd", "bwd", "fwd_bwd"}
    assert {c.params["dtype"] for c in cases} == {"bf16"}
    matmul = {c.label for c in cases if c.op == "matmul"}
    assert matmul == {f"llama3-{m}.{r} T=16384" for m in ("8b", "70b") for r in ("attn_out", "up", "down")}
    assert {c.params["rows"] for c in cases if c.family == "norm"} == {16384}
    att = [c for c in cases if c.op == "attention"]
    assert {c.params["head_dim"] for c in att} == {64, 128} and {c.params["causal"] for c in att} == {True, False}
    assert max(c.params["seq"] for c in att) == 16384
    per_mode = {mode: sum(c.mode == mode for c in cases) for mode in ("fwd", "bwd", "fwd_bwd")}
    assert len(set(per_mode.values())) == 1, per_mode  # every shape in every pass
    assert len({c.case_id for c in cases}) == len(cases)


def test_a_mode_that_does_not_exist_names_the_valid_ones(compose):
    with pytest.raises(Exception) as caught:
        compose(["norm.modes=[bwdd]"])
    chain, exc = [], caught.value
    while exc is not None:
        chain.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    assert "fwd, bwd, fwd_bwd" in " ".join(chain)


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
    # The compiler tier also holds XLA and TVM, whose providers compile.modes does not multiply.
    assert {p.name for p in select_providers(cfg, catalog)} == {"compile", "compile-max-autotune", "xla", "tvm"}


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
        ("suite=nope", ["no suite 'nope'", "smoke", "attention"]),
        ("device=tpu", ["Invalid value 'tpu'", "auto, cuda, cpu"]),
        ("timing=fast", ["no timing 'fast'", "quick", "precise"]),
        ("atention.causal=true", ["no config key 'atention.causal'", "did you mean 'attention.causal'"]),
        # A key that does not exist is never appended: Hydra's own advice to add it would run the suite
        # with the typo ignored.
        ("+atention.causal=true", ["no config key 'atention.causal'", "did you mean 'attention.causal'"]),
        ("++attention.causl=true", ["no config key 'attention.causl'", "Keys of attention:", "causal"]),
        ("timing.warmup_s=1", ["did you mean 'timing.warmup_ms'"]),
        ("tiers=[gpu]", ["tiers=['gpu'] not known", "vendor, compiler, triton, cuda"]),
        ("providers=[nope]", ["valid choices:", "sdpa-math"]),
        ("isolation=thread", ["Invalid value 'thread'", "process, none"]),
    ],
)
def test_bad_overrides_exit_2_and_name_the_choices(tmp_path, override, expected):
    result = tierbench_cli("run", override, f"results_dir={tmp_path}/runs", cwd=tmp_path, timeout=120)
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    for text in expected:
        assert text in result.stderr + result.stdout
    assert "Traceback" not in result.stderr and "To append to your config" not in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), "no run folder on error"


def test_every_key_of_the_schema_and_hydras_own_pass_the_key_check(catalog):
    from tierbench.suite.commands import run_command
    from tierbench.suite.commands.config_keys import check_overrides, schema_keys
    from tierbench.suite.config import run_schema

    schema = run_schema(catalog.families)
    conf = Path(run_command.conf_dir())
    keys = schema_keys(schema)
    assert {"attention.causal", "timing.rep_ms", "shard.index", "compiler.dynamic"} <= set(keys)
    check_overrides([f"{k}=1" for k in keys if k not in ("suite", "timing", "model")], schema, conf)
    check_overrides(["hydra/launcher=joblib", "hydra.job.chdir=false", "--multirun", "suite=smoke,norm"], schema, conf)


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
        ("time_limit_s=0", "time_limit_s=0.0 is outside (0, 604800] seconds per measurement"),
        ("time_limit_s=nan", "time_limit_s=nan is outside (0, 604800]"),
        ("time_limit_s=-5", "time_limit_s=-5.0 is outside (0, 604800]"),
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


def test_run_help_teaches_groups_keys_suites_and_examples(capsys):
    from tierbench.suite.commands import run_command

    assert run_command.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "powered by Hydra" not in text
    assert "suite=   all, attention, decode, matmul, model, nightly, norm, smoke, training" in text
    assert "model=   llama3-70b, llama3-8b, tiny" in text
    assert "  smoke " in text and "not yet measured" in text and "GPU-sized" in text  # suites and their durations
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and line.split()}
    assert "auto|cuda|cpu (default auto)" in lines["device"]
    assert "Seed of every case" in lines["seed"]  # a key's line is its schema comment
    assert "providers of a case take turns" in lines["timing.rounds"]
    assert "[fwd|bwd|fwd_bwd, ...]" in lines["attention.modes"] and "null runs both" in lines["attention.causal"]
    examples = [line.strip() for line in text.split("Examples", 1)[1].splitlines() if line.strip().startswith("tier")]
    assert len(examples) == 4 and "tierbench run suite=model model=llama3-8b" in examples


def test_version_flag_and_attribute(capsys):
    import tierbench
    from tierbench.suite import cli

    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"tierbench {tierbench.__version__}") and tierbench.__version__ != "0+unknown"


def test_run_help_gives_a_figure_for_every_suite_with_a_committed_h200_run():
    """`run --help` never says "not yet measured" on the H200 for a suite whose H200 run is committed, and
    every run it names is committed."""
    import json
    import re

    import tierbench.conf
    from tierbench.suite.commands.run_help import UNDESCRIBED, suites_help
    from tierbench.suite.ops import builtin_families

    suites = suites_help(Path(tierbench.conf.__file__).parent, builtin_families())
    assert UNDESCRIBED not in suites.values(), "a suite file without its help header"
    runs = Path(__file__).resolve().parents[1] / "results" / "runs"
    if not runs.is_dir():
        pytest.skip("no committed runs in this checkout")
    measured = set()
    for meta in runs.glob("h200-*/run.json"):
        data = json.loads(meta.read_text())
        if data.get("suite") and data.get("done") and data.get("done") == data.get("planned"):
            measured.add(data["suite"])
    for suite in measured & suites.keys():
        assert not suites[suite][2].startswith("not yet measured"), suite
    for _, _, h200 in suites.values():
        for name in re.findall(r"h200-[\w-]+", h200):
            assert (runs / name).is_dir(), name
