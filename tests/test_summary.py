"""Views of a run: ranking against the vendor baseline, the terminal table, the Markdown summary."""

from __future__ import annotations

import json

from cli_runner import tierbench_cli

from tierbench.suite.catalog import build
from tierbench.suite.scale import spread
from tierbench.suite.show import markdown, table
from tierbench.suite.show.presentation import Presentation
from tierbench.suite.show.site.pages.run_report import run_page
from tierbench.suite.show.site.runs import load_run
from tierbench.suite.show.summary import rank
from tierbench.suite.store import runmeta
from tierbench.suite.store.records import Measurement, RecordWriter

META = runmeta.RunMeta("r", "attention", **runmeta.describe_catalog(build(entry_points=False)))
SHOWN = Presentation.of([META])


def _rec(provider: str, tier: str, median: float | None, status: str = "ok", reason: str = "") -> Measurement:
    return Measurement(
        run_id="r",
        op="attention",
        family="attention",
        case={"dtype": "bf16", "seq": 4096},
        case_id="attention/s=4096",
        label="S4096",
        x=4096.0,
        provider=provider,
        tier=tier,
        status=status,
        reason=reason,
        median_ms=median,
        tflops=1.0 / median if median else None,
        sol=0.5 if median else None,
        bound="compute",
    )


RECORDS = [
    _rec("sdpa-math", "vendor", 4.0),
    _rec("sdpa-flash", "vendor", 2.0),
    _rec("triton", "triton", 1.0),
    _rec("compile", "compiler", None, "incorrect", "relative error 0.3 exceeds the bfloat16 tolerance"),
    _rec("flash-attn-4", "cuda", None, "skipped", "package not installed: pip install flash-attn-4"),
]


def test_ranking_quotes_speedups_against_the_preferred_vendor_provider():
    ranked, rest = rank(RECORDS, SHOWN)
    assert [r.record.provider for r in ranked] == ["triton", "sdpa-flash", "sdpa-math"]
    assert [r.speedup for r in ranked] == [2.0, 1.0, 0.5]
    assert {r.provider for r in rest} == {"compile", "flash-attn-4"}


def test_terminal_table_lists_failures_with_their_reasons():
    text = table.render(RECORDS, META)
    assert "1. triton" in text and "2.00x" in text
    assert "incorrect" in text and "exceeds the bfloat16 tolerance" in text


def test_markdown_summary_has_a_column_per_tier(tmp_path):
    text = markdown.render(RECORDS, SHOWN)
    assert "| vendor (TFLOP/s) | compiler (TFLOP/s) | triton (TFLOP/s) | cuda (TFLOP/s) |" in text
    assert "2.00x triton" in text and "incorrect: compile" in text
    # Every provider not timed is named, grouped by its outcome: a missing package's skip too.
    assert "skipped: flash-attn-4" in text
    writer = RecordWriter(tmp_path)
    for r in RECORDS:
        writer.append(r)
    result = tierbench_cli("summary", str(tmp_path), cwd=tmp_path, timeout=120)
    assert result.returncode == 0 and "### attention (fwd)" in result.stdout
    (tmp_path / "runs").mkdir()
    by_id = tierbench_cli("summary", tmp_path.name, "--runs", str(tmp_path.parent), cwd=tmp_path, timeout=120)
    assert by_id.returncode == 0 and by_id.stdout == result.stdout  # a run id works as well as its folder


def test_views_escape_control_characters_from_records(tmp_path, capsys):
    hostile = _rec("evil\x1b[2J\x1b]0;title\x07\u202eesrever", "vendor", 3.0)
    failed = _rec("oops", "vendor", None, "error", "RuntimeError: \x1b[31mred\x1b[0m \u202eback")
    text = table.render([*RECORDS, hostile, failed], META)
    assert "\x1b" not in text and "\\x1b[2J" in text and "\u202e" not in text and "\\u202eesrever" in text
    assert "\\x1b[31mred" in text
    summary = markdown.render([*RECORDS, hostile, failed], SHOWN)
    assert "\x1b" not in summary and "\u202e" not in summary
    for name in ("a", "b"):  # the spread between two runs names providers too
        (tmp_path / name).mkdir()
        RecordWriter(tmp_path / name).append(hostile)
    assert spread.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    printed = capsys.readouterr().out
    assert "evil\\x1b[2J" in printed and "\x1b" not in printed and "\u202e" not in printed


def test_run_report_names_what_each_provider_launched(tmp_path):
    tuned = Measurement(**{**RECORDS[2].__dict__, "launch": "two-pass: CHUNK=4096, warps=16, stages=1"})
    writer = RecordWriter(tmp_path)
    for r in (RECORDS[0], RECORDS[1], tuned):
        writer.append(r)
    runmeta.write(tmp_path, META)
    html = run_page(load_run(tmp_path), None, SHOWN, standalone=True)
    assert "<th>launched</th>" in html and "<bdi>two-pass: CHUNK=4096, warps=16, stages=1</bdi>" in html
    assert "<th>op and case</th>" in html and "<nav>" not in html


def test_markdown_summary_sets_a_familys_passes_side_by_side():
    def rec(provider: str, mode: str, median: float) -> Measurement:
        r = _rec(provider, "vendor", median)
        r.case, r.case_id = {"dtype": "bf16", "seq": 4096, "mode": mode}, f"attention/mode={mode},s=4096"
        return r

    records = [rec("sdpa-math", "fwd", 4.0), rec("sdpa-flash", "fwd", 2.0), rec("sdpa-flash", "bwd", 5.0)]
    records.append(rec("sdpa-math", "fwd_bwd", 9.0))
    text = markdown.render(records, SHOWN)
    assert "### attention (fwd)" in text and "### attention (bwd)" in text
    assert "### attention: passes side by side (fastest timed provider)" in text
    assert "| fwd (ms) | bwd (ms) | fwd_bwd (ms) | bwd / fwd |" in text
    assert "| attention | S4096 | bf16 | 2 (sdpa-flash) | 5 (sdpa-flash) | 9 (sdpa-math) | 2.50x |" in text
    assert "side by side" not in markdown.render(RECORDS, SHOWN)  # one pass: nothing to set beside it


def test_summary_as_json_and_rates_in_three_significant_digits(tmp_path, capsys):
    slow = _rec("sdpa-math", "vendor", 4.0)
    slow.tflops = 0.0006209  # a CPU's rate: never rounded to 0
    writer = RecordWriter(tmp_path)
    for r in (slow, *RECORDS[1:]):
        writer.append(r)
    assert markdown.main([str(tmp_path), "--json"]) == 0
    (table,) = json.loads(capsys.readouterr().out)
    assert table["family"] == "attention" and table["unit"] == "TFLOP/s"
    (row,) = table["rows"]
    assert row["winner"] == "triton" and row["best_vs_baseline"] == 2.0 and row["tiers"]["cuda"] is None
    expected = {"provider": "compile", "status": "incorrect", "verdict": "incorrect", "reason": RECORDS[3].reason}
    assert expected in row["not_timed"]
    assert markdown.render([slow], SHOWN).count("0.000621 (sdpa-math)") == 1


def test_a_record_judged_again_names_no_winner_and_says_why():
    """A provider an older bound called incorrect, correct today, was never timed: the row's fastest timed
    provider is no winner, and the note under the table says what changed."""
    rejudged = _rec("sdpa-cudnn", "vendor", None, "incorrect", "dq: 2 elements off by up to 0.105")
    rejudged.case = {**rejudged.case, "mode": "bwd", "dtype": "bf16"}
    rejudged.errors = {"dq": 0.0025, "dk": 0.0024, "dv": 0.0023}
    rejudged.rel_error = 0.0025
    rejudged.element_errors = {"dq": 0.105, "dk": 0.02, "dv": 0.02}
    fast = _rec("triton", "triton", 1.0)
    fast.case = dict(rejudged.case)
    from tierbench.suite.store.verdicts import rejudge

    rows = markdown.tables([fast, rejudge(rejudged)], SHOWN)
    (row,) = [row for table in rows.values() for row in table["rows"]]
    assert row["winner"] is None and row["fastest_timed"] == "triton" and row["untimed_correct"] == ["sdpa-cudnn"]
    text = markdown.render([fast, rejudge(rejudged)], SHOWN)
    assert "fastest timed, no winner: 1 correct, not timed*" in text
    assert "\\* sdpa-cudnn" in text and "correct under today's" in text


def test_summary_of_an_unknown_family_or_a_hostile_run_id_exits_2_saying_so(tmp_path, capsys):
    writer = RecordWriter(tmp_path)
    for r in RECORDS:
        writer.append(r)
    assert markdown.main([str(tmp_path), "--family", "nope"]) == 2
    assert "--family nope: the run has no such family; its families: attention" in capsys.readouterr().err
    assert markdown.main(["\x1b]0;owned\x07run\u202e", "--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err and "\\x1b]0;owned\\x07run" in err
