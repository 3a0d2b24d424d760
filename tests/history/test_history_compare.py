"""`tierbench compare` on asv result files written in asv 0.6's format: verdicts, reports, exit codes, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from asv_result_files import write_result

from tierbench.suite.history import asvresults, compare_command, noise

BASE, HEAD = "a" * 40, "b" * 40
MM = "matmul.Matmul.track_triton"
NORM = "norm.Norm.track_eager"


def times(median: float, seed: int, n: int = 100, spread: float = 0.01) -> list[float]:
    rng = np.random.default_rng(seed)
    return (median * np.exp(rng.normal(0, spread, n))).tolist()


def two_commits(project, slow_factor: float = 1.5, version_head: str = "v1"):
    results = project / "results" / "asv"
    write_result(
        results,
        "h200-x",
        BASE,
        {
            MM: {"4096^3 bf16 fwd": times(200e-6, 1), "1024^3 bf16 fwd": times(20e-6, 2)},
            NORM: {"layer_norm 16384x4096 bf16 fwd": times(110e-6, 3), "rms_norm 16384x4096 bf16 fwd": None},
        },
    )
    write_result(
        results,
        "h200-x",
        HEAD,
        {
            MM: {"4096^3 bf16 fwd": [t * slow_factor for t in times(200e-6, 4)], "1024^3 bf16 fwd": times(20e-6, 5)},
            NORM: {"layer_norm 16384x4096 bf16 fwd": times(110e-6, 6), "rms_norm 16384x4096 bf16 fwd": "skip"},
        },
        version=version_head,
    )
    return results


def run(project, *args, capsys):
    code = compare_command.main(["--config", str(project / "asv.conf.json"), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_reader_expands_parameterized_results(project):
    results = two_commits(project)
    data = asvresults.find(results, "h200-x", HEAD[:8])
    key = f"{MM}('4096^3 bf16 fwd')"
    assert data.commit == HEAD and len(data.results) == 4
    assert data.results[key].status == "ok" and len(data.results[key].samples) == 100
    assert data.results[f"{NORM}('rms_norm 16384x4096 bf16 fwd')"].status == "skipped"


def test_confirmed_regression_exits_1_with_a_report(project, capsys):
    two_commits(project)
    code, out, err = run(project, BASE[:7], HEAD[:7], capsys=capsys)
    assert code == 1
    assert "**Performance regression**: 1 slower, 0 faster, 0 ambiguous, 2 unchanged, 1 failed." in out
    slow = next(line for line in out.splitlines() if "4096^3" in line)
    cells = [c.strip() for c in slow.strip("|").split("|")]
    assert cells[0] == "🔴 slower"
    ratio = float(cells[4].split()[0])
    assert ratio == pytest.approx(1.5, abs=0.01)
    assert cells[2].endswith("µs") and cells[3].endswith("µs")
    assert any("1024^3" in line and "| unchanged |" in line for line in out.splitlines())
    assert any("rms_norm" in line and "| failed |" in line for line in out.splitlines())
    html = (project / "results" / "compare" / "aaaaaaaa-bbbbbbbb.html").read_text()
    assert "Performance regression" in html and "🔴 slower" in html and cells[4].split()[0] in html
    assert (project / "results" / "compare" / "aaaaaaaa-bbbbbbbb.md").read_text() == out


def test_no_regression_exits_0(project, capsys):
    two_commits(project, slow_factor=1.0)
    code, out, _ = run(project, BASE[:8], HEAD[:8], "--md", str(project / "pr.md"), capsys=capsys)
    assert code == 0 and "No confirmed regression: 0 slower" in out
    assert (project / "pr.md").exists()


def test_learned_noise_stops_a_call(project, capsys):
    """A 5% change on a benchmark whose A/A runs moved 12% is not called; on a quiet one it is."""
    two_commits(project, slow_factor=1.05)
    root = project / "results" / "noise"
    for i, drift in enumerate((1.0, 1.12, 1.04), 1):
        write_result(
            noise.runs_dir(root, "h200-x") / f"{BASE[:8]}-{i}",
            "h200-x",
            BASE,
            {MM: {"4096^3 bf16 fwd": [t * drift for t in times(200e-6, 10 + i)]}},
        )
    code, out, _ = run(project, BASE, HEAD, capsys=capsys)
    assert code == 1 and "slower" in out  # no noise model yet: 5% > 3% floor
    assert (
        compare_command.main(
            ["--config", str(project / "asv.conf.json"), "--learn-noise", BASE, "--runs", "0", "--machine", "h200-x"]
        )
        == 2
    )  # BASE is not a git commit here
    model = noise.learn(noise.load_aa_runs(root, "h200-x"), "h200-x")
    assert model.noise[f"{MM}('4096^3 bf16 fwd')"] == pytest.approx(0.12, abs=0.01)
    noise.save(model, noise.noise_file(root, "h200-x"))
    code, out, _ = run(project, BASE, HEAD, capsys=capsys)
    assert code == 0, out
    line = next(line for line in out.splitlines() if "4096^3" in line)
    assert "| unchanged |" in line and "(A/A, 3 runs)" in line
    # Benchmarks without A/A data are held to the machine's largest noise, not to none.
    assert "machine's largest" in next(line for line in out.splitlines() if "1024^3" in line)


def test_changed_version_is_not_compared(project, capsys):
    two_commits(project, version_head="v2")
    code, out, _ = run(project, BASE, HEAD, capsys=capsys)
    assert code == 0 and "4 incomparable" in out


def test_result_files_can_be_compared_directly(project, capsys):
    results = two_commits(project)
    a, b = sorted((results / "h200-x").glob("*-existing*.json"))
    code, out, _ = run(project, str(a), str(b), "--noise", "none", capsys=capsys)
    assert code == 1 and "noise: none" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["deadbeef", HEAD],
            "no results for commit deadbeef on machine h200-x; commits with results: aaaaaaaa, bbbbbbbb",
        ),
        ([BASE, HEAD, "--machine", "a100-y"], "no results for machine 'a100-y'"),
        ([BASE, HEAD, "--floor", "-1"], "--floor=-1.0 is outside"),
        ([BASE], "give BASE and HEAD"),
        ([BASE, HEAD, "--noise", "missing.json"], "no noise model missing.json"),
    ],
)
def test_bad_input_is_a_clear_error(project, capsys, args, message):
    two_commits(project)
    code, out, err = run(project, *args, capsys=capsys)
    assert code == 2 and message in err and "Traceback" not in err + out


def test_no_results_at_all(project, capsys):
    code, _, err = run(project, BASE, HEAD, capsys=capsys)
    assert code == 2 and "no asv results in" in err and "tierbench nightly" in err


def test_missing_config(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert compare_command.main([BASE, HEAD]) == 2
    assert "no asv config" in capsys.readouterr().err


def test_not_an_asv_file(project, capsys):
    bad = project / "x.json"
    bad.write_text(json.dumps({"hello": 1}))
    code, _, err = run(project, str(bad), str(bad), capsys=capsys)
    assert code == 2 and "is not an asv result file" in err


def test_reports_name_the_noise_model_relative_to_the_project(tmp_path):
    inside = tmp_path / "results" / "noise" / "gpu.json"
    assert noise.shown_path(inside, tmp_path) == "results/noise/gpu.json"
    outside = tmp_path.parent / "elsewhere.json"
    assert noise.shown_path(outside, tmp_path) == str(outside)


ATT_OWN, ATT_CONTROL = "attention.Attention.track_triton", "attention.Attention.track_sdpa_flash"
CASE, OTHER_CASE = "B2 H16 S8192 D128 causal bf16 fwd", "B8 H16 S2048 D128 causal bf16 fwd"


def drifting_machine(project, control_factor: float, own_factor: float):
    """Base and head where the control (sdpa_flash) moved by control_factor at CASE and the project's
    triton kernel by own_factor at both cases."""
    results = project / "results" / "asv"
    base = {
        ATT_OWN: {CASE: times(1e-3, 11), OTHER_CASE: times(3e-4, 12)},
        ATT_CONTROL: {CASE: times(2e-3, 13), OTHER_CASE: times(5e-4, 14)},
    }
    head = {
        ATT_OWN: {
            CASE: [t * own_factor for t in times(1e-3, 15)],
            OTHER_CASE: [t * own_factor for t in times(3e-4, 16)],
        },
        ATT_CONTROL: {CASE: [t * control_factor for t in times(2e-3, 17)], OTHER_CASE: times(5e-4, 18)},
    }
    write_result(results, "h200-x", BASE, base)
    write_result(results, "h200-x", HEAD, head)


def _line(out: str, key: str) -> list[str]:
    return [c.strip() for c in next(line for line in out.splitlines() if f"`{key}`" in line).strip("|").split("|")]


def test_a_control_series_that_moved_raises_the_own_threshold_of_its_case(project, capsys):
    # The vendor kernel got 8% faster with no change of its code: the machine drifted. The project's kernel
    # reading 5% slower in that case is within what the drift explains; in the other case, whose control
    # stayed put, the same 5% is a regression.
    drifting_machine(project, control_factor=0.92, own_factor=1.05)
    code, out, _ = run(project, BASE, HEAD, "--noise", "none", capsys=capsys)
    assert "Machine drift: 1 control series" in out and "track_sdpa_flash" in out
    control = _line(out, f"{ATT_CONTROL}('{CASE}')")
    assert control[0] == "🟢 faster" and control[6] == "3.0%"  # controls keep their own threshold
    drifted = _line(out, f"{ATT_OWN}('{CASE}')")
    assert drifted[0] == "unchanged"
    assert float(drifted[6].rstrip("%")) > 5.0
    assert "threshold raised to the drift of the control sdpa_flash" in drifted[8]
    steady = _line(out, f"{ATT_OWN}('{OTHER_CASE}')")
    assert steady[0] == "🔴 slower" and steady[6] == "3.0%"
    assert code == 1
    assert "Machine drift" in (project / "results" / "compare" / "aaaaaaaa-bbbbbbbb.html").read_text()


def test_a_regression_beyond_the_drift_is_still_called(project, capsys):
    drifting_machine(project, control_factor=0.95, own_factor=1.25)
    code, out, _ = run(project, BASE, HEAD, "--noise", "none", capsys=capsys)
    assert _line(out, f"{ATT_OWN}('{CASE}')")[0] == "🔴 slower" and code == 1


def test_no_drift_line_when_the_controls_stay_put(project, capsys):
    drifting_machine(project, control_factor=1.0, own_factor=1.0)
    code, out, _ = run(project, BASE, HEAD, "--noise", "none", capsys=capsys)
    assert code == 0 and "Machine drift" not in out and "threshold raised" not in out
