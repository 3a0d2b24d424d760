"""`tierbench profile`: one measurement of a run again, under the profiler, rebuilt from the run's config."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from tierbench.suite import cli
from tierbench.suite.commands import profile_command
from tierbench.suite.store.records import CONFIG_FILE

SMALL_NORMS = [
    "suite=smoke",
    "matmul.enabled=false",
    "attention.enabled=false",
    "decode.enabled=false",
    "pointwise.enabled=false",
    "model.enabled=false",
    "norm.rows=[8]",
    "norm.hidden=[32]",
    "norm.dtypes=[bf16]",
    "norm.modes=[fwd,bwd]",
    "tiers=[vendor,triton]",
]


@pytest.fixture
def run_dir(compose, tmp_path):
    """A run folder as `tierbench run` starts it: its composed config, nothing measured yet."""
    folder = tmp_path / "runs" / "r1"
    folder.mkdir(parents=True)
    (folder / CONFIG_FILE).write_text(OmegaConf.to_yaml(compose(SMALL_NORMS), resolve=True))
    return folder


def test_profile_writes_a_chrome_trace_and_prints_what_the_call_launched(run_dir, capsys):
    code = cli.main(["profile", "r1", "op=bias_gelu_layer_norm", "mode=fwd", "eager", "--runs", str(run_dir.parent)])
    out = capsys.readouterr().out
    assert code == 0, out
    trace_path = run_dir / "profiles" / "bias-gelu-layer-norm-dtype-bf16-hidden-32-mode-fwd-rows-8-eager.trace.json"
    assert f"trace: {trace_path}" in out and "3 launches" in out and "aten::gelu" in out
    trace = json.loads(trace_path.read_text())  # Chrome's trace format: an object holding traceEvents
    events = trace["traceEvents"]
    assert isinstance(events, list) and all(isinstance(e, dict) and "ph" in e for e in events)
    ops = [e["name"] for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    assert {"aten::add", "aten::gelu", "aten::layer_norm"} <= set(ops)
    assert all(isinstance(e["ts"], (int, float)) and e["dur"] >= 0 for e in events if e.get("ph") == "X")


def test_a_case_id_and_the_backward_alone(run_dir, capsys):
    case_id = "bias_gelu_layer_norm/dtype=bf16,hidden=32,mode=bwd,rows=8"
    assert profile_command.main([str(run_dir), case_id, "eager"]) == 0
    out = capsys.readouterr().out
    assert "3 launches" in out and "aten::gelu_backward" in out and "aten::gelu " not in out


@pytest.mark.parametrize(
    "terms, message",
    [
        (["op=rms_norm", "rows=513"], "no case of the run matches op=rms_norm rows=513; valid choices: op: "),
        (["op=rms_norm"], "2 cases match op=rms_norm; narrow it with one of: mode: fwd, bwd"),
        (["rms_norm/rows=8"], "the run has no case 'rms_norm/rows=8'; valid choices: layer_norm/"),
        (["op"], "'op' is neither a case id nor a selector key=value; keys: op, rows, hidden, dtype, mode"),
    ],
)
def test_a_selector_matching_no_single_case_exits_2_naming_the_choices(run_dir, capsys, terms, message):
    assert profile_command.main([str(run_dir), *terms, "eager"]) == 2
    err = capsys.readouterr().err
    assert message in err
    if "rows=513" in terms:
        assert "rows: 512" not in err and "rows: 8;" in err and "mode: fwd, bwd" in err


def test_an_unknown_provider_or_run_exits_2(run_dir, capsys):
    assert profile_command.main([str(run_dir), "op=rms_norm", "mode=fwd", "eagr"]) == 2
    err = capsys.readouterr().err
    assert "provider 'eagr' is not planned for rms_norm/" in err and "valid choices: eager, triton" in err
    assert profile_command.main([str(run_dir.parent / "nope"), "op=rms_norm", "eager"]) == 2
    assert "is no run folder" in capsys.readouterr().err


def test_the_child_that_ncu_profiles_runs_the_measurement_and_writes_nothing(run_dir, capsys):
    assert profile_command.main([str(run_dir), "op=layer_norm", "mode=fwd", "triton", "--under-ncu"]) == 0
    assert not (run_dir / "profiles").exists() and capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "text, message",
    [
        (": [", "cannot be read (ParserError): no run config to rebuild"),
        ("[1, 2]", "holds no run config (no `suite`)"),
        ("suite: smoke\nseed: abc\n", "does not fit the config schema"),
    ],
)
def test_a_damaged_run_config_exits_2_naming_the_file(tmp_path, capsys, text, message):
    (tmp_path / "config.yaml").write_text(text)
    assert profile_command.main([str(tmp_path), "op=rms_norm", "eager"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
