"""`tierbench compare` on asv result files written in asv 0.6's format: verdicts, reports, exit codes, errors."""

from __future__ import annotations

import json
import re

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


def test_a_slowdown_across_sessions_is_a_suspect_not_a_failure(project, capsys):
    """Stored results of two sessions cannot tell the code from the machine: a 1.5x slower own series is
    suspected, and without an A/B that confirms it nothing fails."""
    two_commits(project)
    code, out, err = run(project, BASE[:7], HEAD[:7], capsys=capsys)
    assert code == 0
    assert "**Suspected, not confirmed**: 0 confirmed, 1 suspected, 1 unchanged, 1 steady, 1 failed." in out
    slow = next(line for line in out.splitlines() if "4096^3" in line)
    cells = [c.strip() for c in slow.strip("|").split("|")]
    assert cells[0] == "🟡 suspected slower" and cells[8] == "across sessions"
    ratio = float(cells[4].split()[0])
    assert ratio == pytest.approx(1.5, abs=0.01)
    assert cells[2].endswith("µs") and cells[3].endswith("µs")
    assert "no history on this machine" in cells[7]  # two results and nothing else: the stated prior
    assert "suspects not re-measured (run with --confirm)" in out
    assert any("1024^3" in line and "| unchanged |" in line for line in out.splitlines())
    assert any("layer_norm" in line and "| steady (control) |" in line for line in out.splitlines())
    assert any("rms_norm" in line and "| failed |" in line for line in out.splitlines())
    html = (project / "results" / "compare" / "h200-x-aaaaaaaa-bbbbbbbb.html").read_text()
    assert "Suspected, not confirmed" in html and "suspected slower" in html and cells[4].split()[0] in html
    assert (project / "results" / "compare" / "h200-x-aaaaaaaa-bbbbbbbb.md").read_text() == out


def test_json_verdicts(project, capsys):
    two_commits(project)
    code, out, _ = run(project, BASE, HEAD, "--json", "-", capsys=capsys)
    data = json.loads(out)
    assert code == 0 and data["regression"] is False and data["base"] == BASE and data["method"] == "across sessions"
    by_key = {s["benchmark"]: s for s in data["series"]}
    slow = by_key[f"{MM}('4096^3 bf16 fwd')"]
    assert slow["verdict"] == "suspected" and slow["confirmed"] is None and slow["own_code"] is True
    assert slow["decided_by"] == "across sessions" and slow["ab"] is None
    assert slow["cross_session"]["verdict"] == "suspected"
    assert slow["interval"][0] < slow["ratio"] < slow["interval"][1] and slow["threshold"] >= 0.02
    assert "prior" in slow["threshold_source"]
    assert by_key[f"{NORM}('layer_norm 16384x4096 bf16 fwd')"]["own_code"] is False
    assert by_key[f"{NORM}('rms_norm 16384x4096 bf16 fwd')"]["verdict"] == "failed"


def test_no_regression_exits_0(project, capsys):
    two_commits(project, slow_factor=1.0)
    code, out, _ = run(project, BASE[:8], HEAD[:8], "--md", str(project / "pr.md"), capsys=capsys)
    assert code == 0 and "No regression: 0 confirmed, 0 suspected" in out
    assert (project / "pr.md").exists()


HOUR_MS = 3_600_000


def test_learned_session_noise_stops_a_call(project, capsys):
    """A 6% change on a series whose unchanged sessions moved by about 4% is not called; on a quiet one it is."""
    results = two_commits(project, slow_factor=1.06)
    for i, drift in enumerate((1.0, 1.05, 0.96, 1.03, 0.97, 1.04)):
        write_result(
            noise.runs_dir(project / "results" / "noise", "h200-x") / f"{BASE[:8]}-{i}",
            "h200-x",
            BASE,
            {MM: {"4096^3 bf16 fwd": [t * drift for t in times(200e-6, 10 + i)]}},
            started_at=(i + 1) * 4 * HOUR_MS,
        )
    code, out, _ = run(project, BASE, HEAD, capsys=capsys)
    line = next(line for line in out.splitlines() if "4096^3" in line)
    assert code == 0 and "| unchanged |" in line, out
    assert "noise of this series on h200-x" in line and "over 8 sessions (df 6)" in line
    assert "within this series' noise across sessions" in line
    assert (results / "h200-x").is_dir()
    # A quiet series with the same history (0.3% moves) calls the same 6%.
    for i, drift in enumerate((1.0, 1.003, 0.997, 1.002, 0.998, 1.003)):
        write_result(
            noise.runs_dir(project / "results" / "noise", "h200-x") / f"{BASE[:8]}-{i}",
            "h200-x",
            BASE,
            {MM: {"4096^3 bf16 fwd": [t * drift for t in times(200e-6, 10 + i)]}},
            started_at=(i + 1) * 4 * HOUR_MS,
        )
    code, out, _ = run(project, BASE, HEAD, capsys=capsys)
    line = next(line for line in out.splitlines() if "4096^3" in line)
    assert code == 0 and "| 🟡 suspected slower |" in line


def test_changed_version_is_not_compared(project, capsys):
    two_commits(project, version_head="v2")
    code, out, _ = run(project, BASE, HEAD, capsys=capsys)
    assert code == 0 and "4 incomparable" in out


def test_result_files_can_be_compared_directly(project, capsys):
    results = two_commits(project)
    a, b = sorted((results / "h200-x").glob("*-existing*.json"))
    code, out, _ = run(project, str(a), str(b), "--noise", "none", capsys=capsys)
    assert code == 0 and "noise: none" in out and "1 suspected" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("results-empty", "holds no benchmark results"),
        ("not json", "is not JSON"),
        ("bad-row", "is not a list of columns"),
    ],
)
def test_empty_or_malformed_result_is_exit_2_naming_the_file(project, capsys, content, message):
    results = two_commits(project)
    good = sorted((results / "h200-x").glob("*-existing*.json"))[1]
    bad = project / "bad.json"
    data = json.loads(good.read_text())
    if content == "results-empty":
        data["results"] = {}
        bad.write_text(json.dumps(data))
    elif content == "bad-row":
        data["results"][MM] = "garbage"
        bad.write_text(json.dumps(data))
    else:
        bad.write_text(content)
    code, out, err = run(project, str(bad), str(good), capsys=capsys)
    assert code == 2 and message in err and str(bad) in err and "Traceback" not in err + out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["deadbeef", HEAD],
            "no results for commit deadbeef on machine h200-x; commits with results: aaaaaaaa, bbbbbbbb",
        ),
        ([BASE, HEAD, "--machine", "a100-y"], "no results for machine 'a100-y'"),
        ([BASE, HEAD, "--floor", "-1"], "--floor=-1.0 is outside"),
        ([BASE, HEAD, "--alpha", "0"], "--alpha=0.0 is outside"),
        ([BASE, HEAD, "--suspect-alpha", "0.7"], "--suspect-alpha=0.7 is outside"),
        ([BASE, HEAD, "--md", "/proc/no/such/r.md"], "--md /proc/no/such/r.md"),
        ([BASE, HEAD, "--json", "/"], "--json /: is a folder"),
        ([BASE], "give BASE HEAD (two commits or asv result files, or two runs)"),
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


def test_a_control_that_moved_is_named_as_machine_drift(project, capsys):
    # The vendor kernel got 30% faster with no change of its code: the machine drifted; the report says so.
    drifting_machine(project, control_factor=0.7, own_factor=1.0)
    code, out, _ = run(project, BASE, HEAD, "--noise", "none", capsys=capsys)
    assert "Machine drift: 1 control series" in out and "track_sdpa_flash" in out
    assert re.search(r"track_sdpa_flash\(.*\) ×0\.(69|70)\d", out)
    assert _line(out, f"{ATT_CONTROL}('{CASE}')")[0] == "⚠️ drift (control)"
    assert _line(out, f"{ATT_OWN}('{CASE}')")[0] == "unchanged"
    assert code == 0
    assert "Machine drift" in (project / "results" / "compare" / "h200-x-aaaaaaaa-bbbbbbbb.html").read_text()


def test_a_control_that_got_slower_never_fails_the_run(project, capsys):
    drifting_machine(project, control_factor=1.5, own_factor=1.0)
    code, out, _ = run(project, BASE, HEAD, "--noise", "none", "--json", "-", capsys=capsys)
    data = json.loads(out)
    assert code == 0 and data["regression"] is False
    assert data["drift"]["controls_moved"] == [f"{ATT_CONTROL}('{CASE}')"]
    moved = next(s for s in data["series"] if s["benchmark"] == f"{ATT_CONTROL}('{CASE}')")
    assert moved["verdict"] == "drift" and moved["own_code"] is False and moved["ratio"] == pytest.approx(1.5, 0.02)


def test_no_drift_line_when_the_controls_stay_put(project, capsys):
    drifting_machine(project, control_factor=1.0, own_factor=1.0)
    code, out, _ = run(project, BASE, HEAD, "--noise", "none", capsys=capsys)
    assert code == 0 and "Machine drift" not in out


@pytest.mark.parametrize(
    "name, content",
    [
        ("cccccccc-existing-py_python.json", b"[1, 2, 3]"),  # a list where an object belongs
        ("cccccccc-existing-py_python.json", b'{"commit_hash": "\xff\xfe"}'),  # not UTF-8
        ("odd-name.json", b'{"commit_hash": "\xff\xfe"}'),  # a name that makes the reader open it
        ("dddddddd-existing-py_python.json", b'{"commit_hash": 5, "results": {}, "version": 2, "result_columns": []}'),
    ],
)
def test_a_malformed_file_among_the_results_is_named_and_the_others_compared(project, capsys, name, content):
    results = two_commits(project)
    bad = results / "h200-x" / name
    bad.write_bytes(content)
    code, out, err = run(project, BASE, HEAD, capsys=capsys)
    assert code == 0 and "| 🟡 suspected slower |" in out, err
    assert f"tierbench compare: warning: {bad}" in err and "Traceback" not in err + out


def test_a_bench_filter_that_is_not_a_regular_expression_is_a_clear_error(project, capsys):
    two_commits(project)
    with pytest.raises(SystemExit) as exited:
        compare_command.main(["--config", str(project / "asv.conf.json"), BASE, HEAD, "--bench", "("])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "argument --bench: '(' is not a regular expression" in err
